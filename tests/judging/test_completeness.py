"""Labels as teams have them (issue 28): a judgment set declares how complete it is, qrels files become
a first version with their provenance, and positives-only labels give verdicts with their caveat
instead of "coverage-confounded" everywhere."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from releval.cli import main
from releval.errors import InputError
from releval.judging import completeness as comp
from releval.judging import judgments as jmod
from releval.measurement import pair
from support.scored_project import Project, qids

REPO = Path(__file__).parents[2]
BEIR = REPO / "tests" / "data" / "corpus" / "beir"


def test_a_manifest_declares_its_completeness_and_the_shipped_sets_are_pooled():
    problems: list[str] = []
    assert comp.parse("positives-only", problems.append) == comp.Completeness(comp.POSITIVES_ONLY)
    found = comp.parse({"kind": "pooled", "depth": 10, "systems": ["bm25/c256"]}, problems.append)
    assert found == comp.Completeness(comp.POOLED, 10, ("bm25/c256",)) and problems == []
    for bad in ("complete", {"kind": "pooled", "depth": 0}, {"kind": "positives-only", "depth": 5}, {"kin": "x"}):
        assert comp.parse(bad, problems.append) is None
    assert len(problems) == 4
    v3 = jmod.load_version(REPO / "data" / "judgments" / "v3").manifest.completeness
    assert (v3.kind, v3.depth, len(v3.systems)) == ("pooled", 10, 24)
    assert comp.metrics_for(["ndcg@10", "judged@10", "bpref", "map"], comp.Completeness(comp.POSITIVES_ONLY)) == (
        ["ndcg@10", "map"],
        ["judged@10", "bpref"],
    )


@pytest.fixture
def project(tmp_path: Path, monkeypatch) -> Path:
    root = tmp_path / "project"
    shutil.copytree(REPO / "conf", root / "conf", ignore=shutil.ignore_patterns("recorded.yaml"))
    shutil.copytree(BEIR, root / "beir")
    monkeypatch.chdir(root)
    return root


def write_qrels(path: Path, rows: list[tuple[str, str, int]]) -> Path:
    path.write_text("query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{g}\n" for q, d, g in rows))
    return path


def beir_ids(project: Path) -> tuple[list[str], list[str]]:
    docs = [json.loads(line)["_id"] for line in (project / "beir" / "corpus.jsonl").read_text().splitlines()]
    queries = [json.loads(line)["_id"] for line in (project / "beir" / "queries.jsonl").read_text().splitlines()]
    return docs, queries


def test_init_dataset_makes_the_qrels_the_first_version_with_their_provenance(project, capsys):
    docs, queries = beir_ids(project)
    qrels = write_qrels(project / "beir" / "test.tsv", [(queries[0], docs[0], 1), (queries[1], docs[1], 2)])
    argv = ["init-dataset", "labs", "--corpus", "beir", "--format", "beir", "--queries", "beir"]
    assert main([*argv, "--queries-format", "beir", "--qrels", str(qrels), "--annotator", "me"]) == 0
    out = capsys.readouterr().out
    assert "the labels of " in out and "declared positives-only" in out
    v1 = jmod.load_version("data/labs/judgments/v1").manifest
    assert v1.completeness == comp.Completeness(comp.POSITIVES_ONLY)
    assert v1.imported_from == {"file": str(qrels.as_posix()), "format": "beir", "sha256": jmod.io.sha256_file(qrels)}
    assert v1.dataset == "labs" and v1.annotators == ("qrels",)
    assert main(["validate", "data/labs/judgments/v1"]) == 0
    # your own judgments go on top as a revision; a second qrels file into it is refused
    pool = project / "mine.csv"
    pool.write_text(f"query_id,doc_id,grade,annotator\n{queries[0]},{docs[2]},0,me\n")
    argv = ["pool", "--import", str(pool), "--into", "data/labs/judgments/v2", "--parent", "data/labs/judgments/v1"]
    assert main([*argv, "--completeness", "pooled"]) == 0
    v2 = jmod.load_version("data/labs/judgments/v2").manifest
    assert (v2.completeness.kind, v2.parent, v2.imported_from) == ("pooled", "v1", None)
    assert main(["pool", "--import", str(qrels), "--into", "data/labs/judgments/v2"]) == 1
    assert "a qrels file makes a first version" in capsys.readouterr().out


def test_a_qrels_file_with_non_relevant_rows_is_declared_pooled(project, capsys):
    docs, queries = beir_ids(project)
    argv = ["init-dataset", "labs", "--corpus", "beir", "--format", "beir", "--queries", "beir"]
    assert main([*argv, "--queries-format", "beir", "--annotator", "me"]) == 0
    qrels = write_qrels(project / "graded.tsv", [(queries[0], docs[0], 2), (queries[0], docs[1], 0)])
    capsys.readouterr()
    assert main(["pool", "--import", str(qrels), "--into", "data/labs/judgments/v1"]) == 0
    assert "declared pooled" in capsys.readouterr().out
    assert jmod.load_version("data/labs/judgments/v1").manifest.imported_from["format"] == "beir"
    bad = write_qrels(project / "bad.tsv", [(queries[0], "NOPE", 1)])
    argv = ["pool", "--import", str(bad), "--into", "data/labs/judgments/v3", "--dataset", "labs"]
    assert main(argv) == 1
    assert f"{bad}:2: field 'doc_id': unknown document 'NOPE'" in capsys.readouterr().out


# --------------------------------------------------------------------------- comparisons under positives-only


def positives_only(tmp_path: Path) -> Project:
    """Two configurations scored under positives-only labels: no judged@k, no bpref, no condensed lists."""
    proj = Project(tmp_path)
    ids = qids(60)
    base = np.linspace(0.2, 0.6, 60)
    contract = proj.contract(60, ["ndcg@10", "recall@100"], completeness=comp.POSITIVES_ONLY)
    scores = {"dense": {"ndcg@10": base.tolist(), "recall@100": base.tolist()}}
    scores["fused"] = {"ndcg@10": (base + 0.05).tolist(), "recall@100": base.tolist()}
    proj.write_reports(scores, ids, contract)
    return proj


def test_a_positives_only_comparison_gives_its_verdict_with_the_caveat_and_no_fake_evidence(tmp_path, capsys):
    """Before: judged@10 0.08 on every side made every comparison coverage-confounded and the gate exit 2,
    and condensed nDCG and bpref (0.99 for every system) were printed as agreeing evidence."""
    proj = positives_only(tmp_path)
    code, out, _ = proj.cli(capsys, "compare", "dense", "fused", "--resamples", "2000")
    assert code == 0
    assert "→ IMPROVEMENT" in out and "COVERAGE-CONFOUNDED" not in out
    line7 = next(line for line in out.splitlines() if line.startswith("7. coverage:"))
    assert line7 == f"7. coverage: not a question here: {comp.POSITIVES_ONLY_CAVEAT}"
    assert "bpref" not in out.replace(comp.POSITIVES_ONLY_CAVEAT, "") and "ndcg@10'" not in out
    code, out, _ = proj.cli(capsys, "gate", "--baseline", "dense", "--candidate", "fused", "--resamples", "2000")
    assert code == 0 and "gate: PASS — significant improvement" in out
    code, out, _ = proj.cli(capsys, "gate", "--baseline", "fused", "--candidate", "dense", "--resamples", "2000")
    assert code == 1 and "gate: FAIL — significant regression" in out


def test_the_two_kinds_are_never_compared(tmp_path, capsys):
    proj = positives_only(tmp_path)
    from support.commands import git

    git(proj.root, "init", "-q")
    git(proj.root, "add", "reports")
    git(proj.root, "commit", "-q", "-m", "positives-only")
    ids = qids(60)
    proj.write_reports({"dense": {"ndcg@10": [0.5] * 60, "recall@100": [0.5] * 60}}, ids)  # a pooled contract
    code, _, err = proj.cli(capsys, "gate", "--baseline", "HEAD:dense", "--candidate", "dense")
    assert code == 2 and "completeness" in err


def test_the_api_declares_positives_only_too(tmp_path):
    from releval import api

    qrels = tmp_path / "q.tsv"
    write_qrels(qrels, [(f"q{i}", f"d{i}", 1) for i in range(30)])
    lines_a, lines_b = [], []
    for i in range(30):  # a finds each query's one labelled document at rank 1 or 2, b further down
        for d in range(20):
            lines_a.append(f"q{i} Q0 {'d%d' % i if d == i % 2 else 'x%d' % d} {d + 1} {20 - d} a")
            lines_b.append(f"q{i} Q0 {'d%d' % i if d == 5 + i % 3 else 'x%d' % d} {d + 1} {20 - d} b")
    (tmp_path / "a.trec").write_text("\n".join(lines_a) + "\n")
    (tmp_path / "b.trec").write_text("\n".join(lines_b) + "\n")
    result = api.compare(tmp_path / "a.trec", tmp_path / "b.trec", qrels, completeness="positives-only")
    assert result.verdict != "coverage-confounded" and comp.POSITIVES_ONLY_CAVEAT in result.text
    assert api.compare(tmp_path / "a.trec", tmp_path / "b.trec", qrels).verdict == "coverage-confounded"
    with pytest.raises(InputError, match="must be one of"):
        api.compare(tmp_path / "a.trec", tmp_path / "b.trec", qrels, completeness="complete")


def test_contracts_record_the_kind(tmp_path):
    found = comp.from_contract({"completeness": "positives-only"})
    assert found.positives_only and not comp.from_contract({}).positives_only
    assert pair  # the comparison code reads the same term


def test_reports_recorded_before_the_term_compare_as_pooled():
    """main's reports, scored before contracts recorded completeness, are pooled ones: a CI gate of a new
    run against them was refused ("contracts differ in completeness: baseline '<absent>', candidate 'pooled'")."""
    from releval.measurement.metrics import contract_differences

    old = {"judgments_sha256": "ab" * 32, "gain": "exponential"}
    assert contract_differences(old, {**old, "completeness": "pooled"}) == []
    assert contract_differences(old, {**old, "completeness": "positives-only"}) == ["completeness"]


def test_a_sampled_set_declares_its_sample_and_leaves_out_what_a_sample_cannot_mean():
    problems: list[str] = []
    sample = {"file": "sample.json", "sha256": "ab" * 32, "pairs": 40, "frame": 200, "rate": 0.2, "seed": 3}
    value = {"kind": "sampled", "depth": 10, "systems": ["bm25/c256"], "sample": sample}
    found = comp.parse(value, problems.append)
    assert found == comp.Completeness(comp.SAMPLED, 10, ("bm25/c256",), sample) and problems == []
    assert found.sampled and not found.pooled and found.to_manifest() == value
    assert "sampled: 40 of 200 unjudged top-10 pairs (rate 20%, seed 3)" in found.text()
    for bad in ({"kind": "sampled", "depth": 10}, {"kind": "pooled", "sample": sample}, {**value, "sample": {"x": 1}}):
        assert comp.parse(bad, problems.append) is None
    assert len(problems) == 3
    assert comp.metrics_for(["ndcg@10", "judged@10", "bpref"], found) == (["ndcg@10"], ["judged@10", "bpref"])
    recorded = comp.from_contract({"completeness": "sampled", "sample": {"pairs": 40, "rate": 0.2}})
    assert recorded.sampled and recorded.sample == {"pairs": 40, "rate": 0.2}
    assert comp.sampled_caveat(40, 0.2).startswith(
        "the figures are estimates from a sample of 40 judged pairs at rate 20%"
    )
    assert "sampled" not in comp.DECLARABLE  # --completeness cannot declare it: a sample comes with its design
