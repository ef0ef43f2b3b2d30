"""`releval pool --missing`: the judging debt of the grid, exported blind and paid back by the import.

The debt is checked against a set difference computed here without the package: each stored
run's chunks folded to documents (best score), ordered by score then doc_id, cut at k, united,
less the pairs in the judgment set's judgments.jsonl. After the filled export is imported, the
metric engine itself must find every configuration's judged@k at 1.
"""

from __future__ import annotations

import csv
import hashlib
import json
import random
import re
import shutil
from pathlib import Path

import polars as pl
import pytest
import yaml

from releval.cli import main
from releval.errors import InputError
from releval.judging.judgments import Manifest, load_version
from releval.judging.pool import (
    POOL_COLUMNS,
    judged_depth,
    judging_debt,
    low_judged_configs,
    scored_top_documents,
)
from releval.measurement import scoring
from releval.measurement.metrics import Contract, contract_from_params
from releval.retrieval import runs

SYSTEM_WORDS = ("score", "rank", "config", "system", "run", "model", "vote")


# --------------------------------------------------------------------------- independent reference


def reference_top(run_parquet: Path, k: int) -> set[tuple[str, str]]:
    """Each query's first k documents, computed in plain Python: a document scores its best chunk;
    score descending, then doc_id ascending (the contract's ``docid-asc``)."""
    best: dict[tuple[str, str], float] = {}
    for query_id, doc_id, score in pl.read_parquet(run_parquet).select("query_id", "doc_id", "score").iter_rows():
        best[(query_id, doc_id)] = max(score, best.get((query_id, doc_id), float("-inf")))
    by_query: dict[str, list[tuple[float, str]]] = {}
    for (query_id, doc_id), score in best.items():
        by_query.setdefault(query_id, []).append((score, doc_id))
    return {
        (query_id, doc_id)
        for query_id, docs in by_query.items()
        for _, doc_id in sorted(docs, key=lambda item: (-item[0], item[1]))[:k]
    }


def judged_in(set_dir: Path) -> set[tuple[str, str]]:
    lines = (set_dir / "judgments.jsonl").read_text(encoding="utf-8").splitlines()
    return {(r["query_id"], r["doc_id"]) for r in map(json.loads, filter(str.strip, lines))}


def reference_debt(project: Path, k: int, judged: set[tuple[str, str]]) -> dict[str, set[tuple[str, str]]]:
    """config id (from run.json) -> its unjudged top-k pairs, for every run folder of the project."""
    out = {}
    for meta in sorted((project / "data" / "work" / "runs").rglob("run.json")):
        config_id = json.loads(meta.read_text())["config_id"]
        out[config_id] = reference_top(meta.parent / "run.parquet", k) - judged
    return out


def printed_counts(stdout: str) -> tuple[dict[str, int], int]:
    counts = {m[1]: int(m[2]) for m in re.finditer(r"^  (\S+)\s+(\d+)$", stdout, re.M)}
    total = re.search(r"^total: (\d+) distinct pairs?", stdout, re.M)
    assert total, stdout
    return counts, int(total[1])


def read_rows(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        return list(reader.fieldnames or []), list(reader)


def assert_blind_and_sorted(path: Path, config_ids: set[str]) -> list[dict[str, str]]:
    header, rows = read_rows(path)
    assert header == list(POOL_COLUMNS)
    assert not [c for c in header if any(word in c.lower() for word in SYSTEM_WORDS)]
    text = path.read_text(encoding="utf-8")
    assert not [cid for cid in config_ids if cid in text]
    keys = [(r["query_id"], r["doc_id"]) for r in rows]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    assert all(r["grade"] == r["annotator"] == r["notes"] == "" for r in rows)
    return rows


def fill(path: Path, out: Path, annotator: str, seed: int = 3) -> Path:
    """Every row graded (0-2, seeded), by ``annotator``."""
    header, rows = read_rows(path)
    rng = random.Random(seed)
    for row in rows:
        row["grade"], row["annotator"] = str(rng.choice((0, 1, 2))), annotator
    with open(out, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=header, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return out


def cli(capsys, *argv) -> tuple[int, str, str]:
    code = main(["pool", *map(str, argv)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# --------------------------------------------------------------------------- the pure function


def test_debt_is_each_configurations_unjudged_top_pairs_and_their_union():
    tops = {
        "a/c1": pl.DataFrame({"query_id": ["q1", "q1", "q2", "q2"], "doc_id": ["d1", "d2", "d1", "d3"]}),
        "b/c1": pl.DataFrame({"query_id": ["q1", "q1", "q2"], "doc_id": ["d2", "d4", "d3"]}),
        "c/c1": pl.DataFrame({"query_id": ["q1"], "doc_id": ["d1"]}),
    }
    # Judged by two annotators (one pair twice), with grades: only the pair matters.
    judged = pl.DataFrame(
        {
            "query_id": ["q1", "q1", "q2", "q9"],
            "doc_id": ["d1", "d1", "d3", "d1"],
            "grade": [0, 2, 1, 1],
            "annotator": ["x", "y", "x", "x"],
        }
    )
    counts, pairs = judging_debt(tops, judged)
    assert counts == {"a/c1": 2, "b/c1": 2, "c/c1": 0}  # a: (q1,d2) (q2,d1); b: (q1,d2) (q1,d4)
    assert pairs.rows() == [("q1", "d2"), ("q1", "d4"), ("q2", "d1")]
    assert pairs.columns == ["query_id", "doc_id"]


def test_debt_of_nothing_and_of_a_fully_judged_grid():
    counts, pairs = judging_debt({}, pl.DataFrame({"query_id": ["q1"], "doc_id": ["d1"]}))
    assert counts == {} and pairs.height == 0 and pairs.columns == ["query_id", "doc_id"]
    top = pl.DataFrame({"query_id": ["q1"], "doc_id": ["d1"]})
    counts, pairs = judging_debt({"a/c1": top}, top)
    assert counts == {"a/c1": 0} and pairs.height == 0


def chunk_run(rows: list[tuple[str, str, float]]) -> pl.DataFrame:
    """(query, chunk id ``doc#n``, score) rows, ranked by the rows' order within each query."""
    frame = pl.DataFrame(rows, schema={"query_id": pl.Utf8, "chunk_id": pl.Utf8, "score": pl.Float64}, orient="row")
    return frame.with_columns(
        pl.col("chunk_id").str.split("#").list.first().alias("doc_id"),
        pl.int_range(1, pl.len() + 1).over("query_id").cast(pl.Int64).alias("rank"),
    ).select("query_id", "chunk_id", "doc_id", "score", "rank")


def test_top_documents_are_those_judged_at_k_counts_ties_included():
    # The chunk ranks put b before a although they tie on score; a document's second chunk must
    # not count twice. Scoring orders documents by score, then doc_id: z, a | b, c.
    run = chunk_run(
        [("q1", "z#0", 0.9), ("q1", "z#1", 0.85), ("q1", "b#0", 0.5), ("q1", "a#0", 0.5), ("q1", "c#0", 0.1)]
    )
    top = scored_top_documents(run, 2)
    assert sorted(top.rows()) == [("q1", "a"), ("q1", "z")]
    assert sorted(scored_top_documents(run, 2, "trec_eval").rows()) == [("q1", "b"), ("q1", "z")]
    # The metric engine agrees: judging exactly these two documents makes judged@2 = 1.
    doc_run = scoring.document_run(run)
    for judged, expected in ((top, 1.0), (pl.DataFrame({"query_id": ["q1"] * 2, "doc_id": ["z", "b"]}), 0.5)):
        qrels = judged.with_columns(pl.lit(1, dtype=pl.Int64).alias("grade"))
        assert scoring.score_table(doc_run, qrels, ["judged@2"], Contract()).mean["judged@2"] == expected


def test_depth_is_the_contracts_judged_k():
    assert judged_depth(["ndcg@10", "recall@100", "judged@10"], "ndcg@10") == 10
    assert judged_depth(["judged@5", "ndcg@20", "judged@20"], "ndcg@20") == 20
    assert judged_depth(["judged@5", "ndcg@20", "judged@20"], "map") == 5
    with pytest.raises(InputError) as caught:
        judged_depth(["ndcg@10", "map"], "ndcg@10")
    assert caught.value.file == "params.yaml" and "--depth" in str(caught.value)


def test_low_judged_configs_reads_metrics_json(tmp_path):
    path = tmp_path / "metrics.json"
    configs = {"a/c1": {"judged@10": 0.5}, "b/c1": {"judged@10": 0.9}, "c/c1": {"judged@10": 0.2}}
    path.write_text(json.dumps({"contract": {"metrics": ["ndcg@10", "judged@10"]}, "configs": configs}))
    assert low_judged_configs(path, 10, 0.6, ["a/c1", "b/c1", "c/c1", "gone/c1"]) == [("c/c1", 0.2), ("a/c1", 0.5)]
    assert low_judged_configs(path, 10, 0.2, ["a/c1", "b/c1", "c/c1"]) == []
    assert low_judged_configs(path, 10, 0.6, ["b/c1"]) == []
    with pytest.raises(InputError) as caught:
        low_judged_configs(path, 5, 0.6, ["a/c1"])
    assert (caught.value.file, caught.value.field) == (str(path), "contract.metrics")


# --------------------------------------------------------------------------- a small project, by hand


@pytest.fixture
def small(tmp_path, monkeypatch) -> Path:
    """A project as `dvc repro` leaves it, written by hand: params.yaml (grid bm25 + m1 on c1, the
    contract with judged@2), the query and document tables, runs, a judgment set and metrics.json."""
    root = tmp_path / "small"
    params = {
        "dataset": {"name": "small", "subset": {"docs": None, "queries": None}},
        "judgments": {"version": "v1", "path": "data/judgments/v1", "format": "releval"},
        "metric": {
            "metrics": ["ndcg@2", "judged@2"],
            "primary": "ndcg@2",
            "gain": "exponential",
            "ties": "docid-asc",
            "rel_threshold": 1,
            "no_relevant": "exclude",
            "collapse": "first",
        },
        "grid": {"chunkings": ["c1"], "models": ["m1"], "fusions": []},
    }
    (root / "data" / "work").mkdir(parents=True)
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    queries = {"q1": ("dev", "first  question"), "q2": ("dev", "second"), "q3": ("holdout", "sealed")}
    pl.DataFrame(
        {
            "query_id": list(queries),
            "text": [t for _, t in queries.values()],
            "split": [s for s, _ in queries.values()],
        }
    ).write_parquet(root / "data" / "work" / "queries.parquet")
    docs = ["a", "b", "c", "d"]
    pl.DataFrame(
        {"doc_id": docs, "title": [d.upper() for d in docs], "text": [f"text of {d}" for d in docs]}
    ).write_parquet(root / "data" / "work" / "docs.parquet")
    bm25 = chunk_run(
        [("q1", "a#0", 3.0), ("q1", "b#0", 2.0), ("q1", "c#0", 1.0), ("q2", "c#0", 2.0), ("q2", "d#0", 1.0)]
    )
    # m1 ties b and a on q1 (b ranked first): scoring takes a. q3 is a holdout query in the run.
    dense = chunk_run([("q1", "b#0", 0.5), ("q1", "a#0", 0.5), ("q1", "d#0", 0.1), ("q3", "d#0", 0.9)])
    runs.write_run(root / "data" / "work" / "runs" / "bm25" / "c1", bm25, {"config_id": "bm25/c1"})
    runs.write_run(root / "data" / "work" / "runs" / "model" / "m1" / "c1", dense, {"config_id": "m1/c1"})
    judged = [{"query_id": "q1", "doc_id": "a", "grade": 2, "annotator": "alice"}]
    data = "".join(json.dumps(r) + "\n" for r in judged).encode()
    set_dir = root / "data" / "judgments" / "v1"
    set_dir.mkdir(parents=True)
    (set_dir / "judgments.jsonl").write_bytes(data)
    (set_dir / "RUBRIC.md").write_text("rubric\n")
    manifest = Manifest(
        "v1",
        None,
        "2026-11-30",
        {0: "no", 1: "partly", 2: "yes"},
        "RUBRIC.md",
        ("alice",),
        hashlib.sha256(data).hexdigest(),
    )
    (set_dir / "manifest.yaml").write_text(manifest.to_yaml())
    (root / "reports").mkdir()
    metrics = {
        "contract": {"metrics": params["metric"]["metrics"], "judgments_sha256": manifest.judgments_sha256},
        "configs": {"bm25/c1": {"judged@2": 0.25}, "m1/c1": {"judged@2": 0.5}},
    }
    (root / "reports" / "metrics.json").write_text(json.dumps(metrics))
    monkeypatch.chdir(root)
    return root


def test_missing_on_a_small_project_counts_exports_and_is_paid_by_the_import(small, capsys):
    code, out, _ = cli(capsys, "--missing", "--out", "debt.csv")
    assert code == 0, out
    # bm25 top 2: q1 a b, q2 c d; m1 top 2: q1 a b (tie: a before b), q3 d; (q1, a) is judged.
    counts, total = printed_counts(out)
    assert counts == {"bm25/c1": 3, "m1/c1": 2} and total == 4
    assert "3 queries of the query table, holdout included" in out
    rows = assert_blind_and_sorted(small / "debt.csv", {"bm25/c1", "m1/c1"})
    assert [(r["query_id"], r["doc_id"]) for r in rows] == [("q1", "b"), ("q2", "c"), ("q2", "d"), ("q3", "d")]
    assert rows[0]["query"] == "first question" and rows[0]["title"] == "B" and rows[0]["snippet"] == "text of b"
    # A deeper cut reaches m1's third document; an existing export is kept without --force.
    code, out, _ = cli(capsys, "--missing", "--depth", 3)
    assert printed_counts(out) == ({"bm25/c1": 4, "m1/c1": 3}, 6)
    assert cli(capsys, "--missing", "--out", "debt.csv")[0] == 2
    # Graded and imported as v2 (parent v1) through the pool import; then nothing is owed.
    fill(small / "debt.csv", small / "filled.csv", "bob")
    code, out, _ = cli(
        capsys, "--import", "filled.csv", "--into", "data/judgments/v2", "--parent", "data/judgments/v1",
        "--queries", "data/work/queries.parquet", "--corpus", "data/work/docs.parquet",
    )  # fmt: skip
    assert code == 0, out
    v2 = load_version("data/judgments/v2")
    assert v2.manifest.parent == "v1" and v2.judgments.height == 1 + 4
    code, out, _ = cli(capsys, "--missing", "--judgments", "data/judgments/v2")
    assert printed_counts(out) == ({"bm25/c1": 0, "m1/c1": 0}, 0)
    code, out, _ = cli(capsys, "--missing", "--judgments", "data/judgments/v2", "--out", "none.csv")
    assert code == 0 and out.rstrip().endswith("nothing to judge: none.csv not written")
    assert not (small / "none.csv").exists()


def test_summary_speaks_only_below_the_threshold(small, capsys):
    assert cli(capsys, "--missing", "--summary-if-below", 0.25) == (0, "", "")
    code, out, _ = cli(capsys, "--missing", "--summary-if-below", 0.3)
    lines = out.splitlines()
    assert code == 0 and lines and all(line.startswith("WARNING: ") for line in lines)
    assert "judged@2 below 0.3 for 1 of 2 configurations" in lines[0]
    assert [line.split()[1] for line in lines[1:-1]] == ["bm25/c1"] and lines[1].split()[2:4] == ["0.25", "3"]
    assert "4 distinct unjudged" in lines[-1]
    # scores were reported from v1 (metrics.json's judgments_sha256): the advice is a revision of it
    assert "--into data/judgments/v2 --parent data/judgments/v1, then score with it" in lines[-1]
    # Without metrics.json there is nothing to compare: a note on stderr, exit 0.
    (small / "reports" / "metrics.json").unlink()
    code, out, err = cli(capsys, "--missing", "--summary-if-below", 0.9)
    assert (code, out) == (0, "") and "reports/metrics.json" in err


def test_missing_refuses_what_it_does_not_take(small, capsys):
    assert cli(capsys, "--missing", "--runs", "data/work/runs")[0] == 2
    assert cli(capsys, "--summary-if-below", 0.5)[0] == 2
    assert cli(capsys, "--missing", "--summary-if-below", 1.5)[0] == 2
    assert cli(capsys, "--missing", "--depth", 0)[0] == 2
    shutil.rmtree(small / "data" / "work" / "runs" / "model")
    code, _, err = cli(capsys, "--missing")
    assert code == 2 and "m1/c1" in err and "dvc repro" in err


# --------------------------------------------------------------------------- the default grid, run by dvc


@pytest.mark.slow
def test_debt_of_the_default_grid_is_the_set_difference_and_the_import_pays_it(
    default_project, tmp_path, monkeypatch, capsys
):
    params = yaml.safe_load((default_project / "params.yaml").read_text())
    k = next(int(m.split("@")[1]) for m in params["metric"]["metrics"] if m.startswith("judged@"))
    active = default_project / params["judgments"]["path"]
    expected = reference_debt(default_project, k, judged_in(active))
    assert set(expected) == set(runs.grid_config_ids(params["grid"]))  # every configuration of the grid ran

    monkeypatch.chdir(default_project)  # read-only: only the export goes elsewhere
    code, out, _ = cli(capsys, "--missing", "--out", tmp_path / "debt.csv")
    assert code == 0, out
    counts, total = printed_counts(out)
    union = set().union(*expected.values())
    assert counts == {cid: len(pairs) for cid, pairs in expected.items()}
    assert total == len(union) > 0
    rows = assert_blind_and_sorted(tmp_path / "debt.csv", set(expected))
    assert {(r["query_id"], r["doc_id"]) for r in rows} == union
    # The runs hold the dev queries only (the holdout is sealed), so does the debt.
    queries = pl.read_parquet(default_project / "data" / "work" / "queries.parquet")
    dev = set(queries.filter(pl.col("split") == "dev")["query_id"].to_list())
    assert {r["query_id"] for r in rows} <= dev
    assert f"{queries.height} queries of the query table, holdout included" in out

    # Graded and imported as a new version of the active one, in a copy of the judgments folder
    # (the versions share its rubric).
    judgments = tmp_path / "data" / "judgments"
    shutil.copytree(active.parent, judgments)
    fill(tmp_path / "debt.csv", tmp_path / "filled.csv", "debt-tester")
    new = judgments / f"{active.name}-debt"
    code, out, _ = cli(
        capsys, "--import", tmp_path / "filled.csv", "--into", new, "--parent", judgments / active.name,
        "--queries", "data/work/queries.parquet", "--corpus", "data/work/docs.parquet",
    )  # fmt: skip
    assert code == 0, out
    paid = load_version(new)
    assert paid.manifest.parent == load_version(active).version
    assert paid.judgments.height == load_version(active).judgments.height + len(rows)
    code, out, _ = cli(capsys, "--missing", "--judgments", new)
    counts, total = printed_counts(out)
    assert total == 0 and set(counts.values()) == {0} and set(counts) == set(expected)
    # And the metric engine finds every configuration's top k judged.
    contract = contract_from_params(params["metric"])
    scored = scoring.scored_queries(queries.filter(pl.col("split") == "dev"), paid.qrels())
    for meta in (default_project / "data" / "work" / "runs").rglob("run.json"):
        doc_run = scoring.document_run(runs.read_run(meta.parent)[0])
        evaluation = scoring.score(doc_run, scored, [f"judged@{k}"], contract, with_slices=False)
        assert evaluation.mean[f"judged@{k}"] == 1.0, meta.parent


@pytest.mark.slow
def test_summary_on_the_default_grid_names_exactly_the_configurations_below(default_project, monkeypatch, capsys):
    metrics = json.loads((default_project / "reports" / "metrics.json").read_text())
    k = judged_depth(metrics["contract"]["metrics"], metrics["contract"]["primary"])
    values = sorted({c[f"judged@{k}"] for c in metrics["configs"].values()})
    assert len(values) >= 2, values
    threshold = (values[0] + values[1]) / 2 if len(values) == 2 else values[len(values) // 2]
    below = {cid for cid, c in metrics["configs"].items() if c[f"judged@{k}"] < threshold}
    monkeypatch.chdir(default_project)
    assert cli(capsys, "--missing", "--summary-if-below", values[0]) == (0, "", "")
    code, out, _ = cli(capsys, "--missing", "--summary-if-below", threshold)
    lines = out.splitlines()
    assert code == 0 and all(line.startswith("WARNING: ") for line in lines)
    assert {line.split()[1] for line in lines[1:-1]} == below


def test_sample_of_the_grid_and_no_debt_warning_under_a_sampled_set(small, capsys):
    code, out, _ = cli(capsys, "--sample", "3", "--seed", "4", "--out", "s/pool.csv")
    assert code == 0, out
    # 3 asked, 4 drawn: every non-empty (query, stratum) cell gets at least one pair (4 cells here).
    assert "sample: 4 of 4 unjudged (query, document) pairs" in out and "top 2 of 2 run(s)" in out
    rows = assert_blind_and_sorted(small / "s" / "pool.csv", {"bm25/c1", "m1/c1"})
    design = json.loads((small / "s" / "sample.json").read_text())
    assert {(r["query_id"], r["doc_id"]) for r in rows} == {
        (q["query_id"], d) for q in design["queries"] for d in q["sampled"]
    }
    assert design["source"]["judgments"] == "data/judgments/v1" and design["source"]["runs"] == ["bm25/c1", "m1/c1"]
    assert ("q1", "a") not in {(r["query_id"], r["doc_id"]) for r in rows}  # judged in v1: not in the frame
    # judged@k means nothing under a sampled set: make repro's debt warning stays silent.
    metrics = json.loads((small / "reports" / "metrics.json").read_text())
    metrics["contract"]["completeness"] = "sampled"
    (small / "reports" / "metrics.json").write_text(json.dumps(metrics))
    assert cli(capsys, "--missing", "--summary-if-below", 0.9) == (0, "", "")
