"""`releval diff REV [REV]` (releval.measurement.diff, reporting.diff_text, commands/diff.py): every configuration of
two commits, its two archived runs scored under the current judgments and compared paired."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from support.audited_project import CONFIGS, make_audited_project
from support.commands import run
from releval.measurement import diff, stats
from releval.measurement.metrics import Contract, evaluate
from releval.measurement.scoring import CoverageTerms, document_run
from releval.provenance import archive as ar
from releval.reporting.diff_text import diff_to_dict, render_diff
from releval.retrieval import runs

QUERIES = [f"q{i:02d}" for i in range(1, 21)]
PROVENANCE = ar.Provenance(commit="a" * 40, dirty=False, source="workspace", commit_date="2026-01-02T03:04:05+00:00")


def chunk_run(first: dict[str, str]) -> pl.DataFrame:
    """Per query two documents, ``first[query]`` ranked above the other (good / bad)."""
    rows = []
    for query in QUERIES:
        top = first.get(query, "bad")
        other = "good" if top == "bad" else "bad"
        rows += [(query, f"{top}#0-5", top, 0.9, 0), (query, f"{other}#0-5", other, 0.5, 0)]
    return runs.rank_by_score(pl.DataFrame(rows, schema=runs.RUN_SCHEMA, orient="row"))


def archived(tmp_path: Path, store: ar.Archive, model: str, table: pl.DataFrame) -> str:
    """Archive ``table`` as configuration ``<model>/c1``; its run sha256."""
    folder = tmp_path / "written" / model / str(len(list(tmp_path.glob("written/*/*"))))
    meta = {
        "config_id": runs.dense_id(model, "c1"),
        "kind": "dense",
        "model": model,
        "chunking": "c1",
        "inputs": [],
        "ops": {},
        "models": {model: {"revision": "r1"}},
        "queries": len(QUERIES),
    }
    runs.write_run(folder, table, meta)
    run_path = f"data/work/runs/model/{model}/c1"
    item = ar.RunFiles(run_path, (folder / "run.parquet").read_bytes(), (folder / "run.json").read_bytes(), None)
    store.add([item], PROVENANCE, dataset="tiny")
    return item.run_sha256


def judgments() -> diff.Judgments:
    qrels = pl.DataFrame(
        [(q, d, g) for q in QUERIES for d, g in (("good", 2), ("bad", 0))],
        schema={"query_id": pl.Utf8, "doc_id": pl.Utf8, "grade": pl.Int64},
        orient="row",
    )
    return diff.Judgments(
        version="v9",
        source_sha256="f" * 64,
        qrels_path="data/work/qrels.parquet",
        qrels=qrels,
        query_ids=QUERIES,
        metrics=["ndcg@10", "judged@10"],
        primary="ndcg@10",
        contract=Contract(),
        coverage_terms=CoverageTerms(),
    )


def test_each_configuration_in_both_is_compared_paired_and_decided_as_one_family(tmp_path):
    store = ar.Archive(tmp_path / "archive")
    worse = chunk_run({})  # the bad document first everywhere
    better = chunk_run({q: "good" for q in QUERIES})  # every query improves
    slightly = chunk_run({q: "good" for q in QUERIES[:3]})  # three queries improve
    runs_a = {m: archived(tmp_path, store, m, worse) for m in ("x", "y", "z")}
    same = archived(tmp_path, store, "s", slightly)
    a = diff.Revision("HEAD~1", "1" * 40, "reports", {"x/c1": runs_a["x"], "y/c1": runs_a["y"], "s/c1": same})
    a.runs.update({"gone/c1": runs_a["z"], "lost/c1": "0" * 64})
    b_runs = {"x/c1": archived(tmp_path, store, "x", better), "y/c1": archived(tmp_path, store, "y", slightly)}
    b = diff.Revision("workspace", None, "reports", {**b_runs, "s/c1": same, "lost/c1": runs_a["x"], "new/c1": same})
    found = diff.diff_revisions(a, b, store, judgments(), n_resamples=2000)

    rows = {row.config_id: row for row in found.rows}
    assert list(rows) == ["x/c1", "y/c1", "s/c1", "lost/c1"]  # A's order, configurations in both
    assert found.only_a == ["gone/c1"] and found.only_b == ["new/c1"]
    qrels = judgments().qrels

    def mean(table: pl.DataFrame) -> float:
        return evaluate(qrels, document_run(table).select("query_id", "doc_id", "score"), ["ndcg@10"]).mean["ndcg@10"]

    # A and B are the runs' own means under the given judgments; Δ and W/L/T paired over the 20 queries
    x = rows["x/c1"].comparison
    assert x.baseline_mean == pytest.approx(mean(worse)) and x.candidate_mean == pytest.approx(1.0)
    assert (x.wins, x.losses, x.ties) == (20, 0, 0) and x.verdict == "improvement"
    y = rows["y/c1"].comparison
    assert (y.wins, y.losses, y.ties) == (3, 0, 17)
    # one family: the two changed runs, Holm-adjusted together (a run missing from the archive is not compared)
    raw = [x.bootstrap_p_value, y.bootstrap_p_value]
    assert [x.adjusted_p_value, y.adjusted_p_value] == pytest.approx(list(stats.holm(raw)))
    assert x.family_size == y.family_size == found.family_size == 2
    assert rows["s/c1"].same_run and rows["s/c1"].comparison is None
    assert rows["s/c1"].mean_a == rows["s/c1"].mean_b == pytest.approx(mean(slightly))
    assert rows["lost/c1"].comparison is None and "0000000000" in rows["lost/c1"].problem

    text = render_diff(found)
    assert "judgments v9 (sha256 ffffffffffff), 20 dev queries" in text
    assert "ndcg@10 under gain=exponential; ties=docid-asc" in text
    assert "Holm-adjusted over the 2 configurations whose run changed" in text
    line: dict[str, str] = {}
    for row in text.splitlines():  # the table's row of each configuration (its notes follow the table)
        if row.split() and row.split()[0] in rows:
            line.setdefault(row.split()[0], row)
    assert line["s/c1"].endswith("same run") and "improvement" in line["x/c1"] and "20/0/0" in line["x/c1"]
    assert line["lost/c1"].endswith("not compared")
    assert "lost/c1 not compared: A's run 000000000000 is not in the run archive" in text
    assert "only in A: gone/c1" in text and "only in B: new/c1" in text
    assert json.loads(json.dumps(diff_to_dict(found)))["rows"][0]["comparison"]["wins"] == 20


def test_a_configuration_whose_run_did_not_change_has_no_test(tmp_path):
    store = ar.Archive(tmp_path / "archive")
    sha = archived(tmp_path, store, "x", chunk_run({}))
    a = diff.Revision("HEAD", "2" * 40, "reports", {"x/c1": sha})
    b = diff.Revision("workspace", None, "reports", {"x/c1": sha})
    found = diff.diff_revisions(a, b, store, judgments())
    assert found.family_size == 0 and found.rows[0].same_run and found.rows[0].comparison is None
    assert "over the 0 configurations whose run changed" in render_diff(found)


@pytest.mark.slow
def test_releval_diff_across_two_commits_of_a_real_project(tmp_path):
    """The audited project (three configurations, every stage run by dvc repro), then RRF's k changed,
    reproduced and committed: only the fused run changed; its A and B are the two commits' own scores."""
    project = make_audited_project(tmp_path / "project")
    first = json.loads((project / "reports" / "metrics.json").read_text())["configs"]
    run(["releval", "params", "dataset=pydocs-v2", "fusions.rrf.k=30"], project)
    run(["dvc", "repro"], project)
    run(["git", "add", "-A"], project)
    run(["git", "commit", "-qm", "rrf k=30"], project)
    second = json.loads((project / "reports" / "metrics.json").read_text())["configs"]

    lines = run(["releval", "diff", "HEAD~1"], project).stdout.splitlines()
    assert lines[0].startswith("diff: ndcg@10, A = HEAD~1 (") and "B = workspace" in lines[0]
    assert lines[1].startswith("evaluation set: judgments v2 (sha256 ") and "12 dev queries" in lines[1]
    assert lines[2].startswith("metric contract: ndcg@10 under gain=exponential")
    rows: dict[str, list[str]] = {}
    for line in lines:  # the table's row of each configuration (its notes follow the table)
        if line.split() and line.split()[0] in CONFIGS:
            rows.setdefault(line.split()[0], line.split())
    assert set(rows) == set(CONFIGS)
    fused = "rrf(wordllama,bm25)/c256"
    for config_id in CONFIGS:
        a, b = float(rows[config_id][1]), float(rows[config_id][2])
        # both runs rescored under the same judgments and contract give the commits' own means
        assert a == pytest.approx(first[config_id]["ndcg@10"], abs=5e-5)
        assert b == pytest.approx(second[config_id]["ndcg@10"], abs=5e-5)
        if config_id != fused:
            assert " ".join(rows[config_id][-2:]) == "same run"
    assert rows[fused][-1] in ("improvement", "regression", "inconclusive", "coverage-confounded")
    assert "1 configuration whose run changed" in lines[0]

    as_json = json.loads(run(["releval", "diff", "HEAD~1", "HEAD", "--json"], project).stdout)
    assert as_json["b"]["label"] == "HEAD" and as_json["family_size"] == 1
    changed = [row for row in as_json["rows"] if not row["same_run"]]
    assert [row["config_id"] for row in changed] == [fused]
    assert changed[0]["comparison"]["n_queries"] == 12
    assert np.isclose(changed[0]["mean_b"] - changed[0]["mean_a"], changed[0]["comparison"]["mean_difference"])

    done = run(["releval", "diff", "no-such-rev"], project, check=False)
    assert done.returncode == 2 and "unknown git revision 'no-such-rev'" in done.stderr

    # `dvc metrics diff` across the same two commits shows quality only; machine figures on request
    quality = json.loads(run(["dvc", "metrics", "diff", "HEAD~1", "HEAD", "--json"], project).stdout)
    assert set(quality) == {"reports/quality.json"} and f"ndcg@10.{fused}" in quality["reports/quality.json"]
    machine = run(
        ["dvc", "metrics", "diff", "HEAD~1", "HEAD", "--targets", "reports/ops.json", "--all", "--json"], project
    )
    figures = json.loads(machine.stdout)
    assert set(figures) == {"reports/ops.json"} and f"configs.{fused}.latency_ms_p50" in figures["reports/ops.json"]


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
