"""`releval compare --grid` and report.md under a sampled judgment set, on the constructed collection of
tests/judging/test_sample.py (every top-10 pair's grade known; 20% of the unjudged top 10 sampled, graded,
imported and scored by the score stage's own code): the grid decides on infndcg@10 with the sample's caveat
and says why the winner is not re-scored at other relevance thresholds; report.md headlines infndcg@10,
opens with the caveat, and shows no judged@k, condensed-list or bpref figure. A pooled project's report
stays as it was (tests/reporting/test_report_markdown.py pins it further)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import polars as pl
import pytest

from judging.test_sample import CONFIGS, draw, grade, score_version, write_collection
from releval import io
from releval.cli import main
from releval.config import load_params
from releval.judging.completeness import contract_sample_caveat
from releval.measurement import scoring
from releval.measurement.grid import SAMPLED_THRESHOLDS
from releval.reporting.evaluation_report import EvaluationReport, build_report, read_inputs
from reporting.test_report_markdown import constructed_repo

BASELINE = "bm25/c256"
RESAMPLES = 2000
EARLY = 20  # queries q00-q19 carry the slice "early"


def sampled_project(root: Path) -> Path:
    """The collection, its 20% sample graded from the known grades and imported as v2, scored, and the
    files the report stage reads."""
    grades = write_collection(root)
    assert draw("s/pool.csv") == 0
    grade(root / "s" / "pool.csv", grades)
    assert main(["pool", "--import", "s/pool.csv", "--into", "data/judgments/v2", "--parent", "data/judgments/v1"]) == 0
    grid = score_version(root, root / "data" / "judgments" / "v2")
    reports, work = root / "reports", root / "data" / "work"
    io.write_json(reports / "metrics.json", grid.document)
    io.write_json(reports / "lineage.json", scoring.lineage_document(grid.results))
    io.write_parquet(reports / "per_query.parquet", grid.per_query)
    docs = pl.read_parquet(root / "data" / "docs.parquet")
    docs.with_columns(sha256=pl.col("doc_id")).write_parquet(work / "docs.parquet")
    queries = pl.read_parquet(root / "data" / "queries.parquet")
    early = pl.Series([["early"] if int(q[1:]) < EARLY else [] for q in queries["query_id"]], dtype=pl.List(pl.Utf8))
    queries.with_columns(slices=early).write_parquet(work / "queries.parquet")
    shutil.copy(root / "qrels.parquet", work / "qrels.parquet")
    shutil.copy(root / "judgments.json", work / "judgments.json")
    params = {
        "dataset": {
            "name": "sampled",
            "corpus": {"path": "data/corpus.jsonl.gz", "format": "beir"},
            "queries": {"path": "data/queries.jsonl", "format": "releval"},
            "subset": {"docs": None},
        },
        "judgments": {"version": "v2", "path": "data/judgments/v2", "format": "releval"},
        "models": {},
        "grid": {"baseline": BASELINE},
    }
    (root / "params.yaml").write_text(json.dumps(params))
    return root


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("sampled-report")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        return sampled_project(root)


@pytest.fixture(scope="module")
def report(project) -> EvaluationReport:
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(project)
        inputs = read_inputs(Path("reports"), Path("data/work"), "reports/holdout_access.jsonl")
        return build_report(inputs, load_params("params.yaml"), None, RESAMPLES, seed=0, worst=5)


def caveat(project: Path) -> str:
    found = contract_sample_caveat(json.loads((project / "reports" / "metrics.json").read_text())["contract"])
    assert found is not None and found.startswith("the figures are estimates from a sample of")
    return found


def test_compare_grid_decides_on_the_inferred_primary_with_the_caveat(project, capsys, monkeypatch):
    monkeypatch.chdir(project)
    sources = ["--reports", "reports", "--qrels", "data/work/qrels.parquet", "--queries", "data/work/queries.parquet"]
    sources += ["--runs-root", "data/work/runs", "--params", "params.yaml", "--resamples", str(RESAMPLES)]
    assert main(["compare", "--grid", *sources]) == 0
    text = capsys.readouterr().out
    assert text.startswith(f"grid: infndcg@10 vs baseline {BASELINE} on 40 queries")
    rows = {line.split()[0]: line.split() for line in text.splitlines() if line.split() and line.split()[0] in CONFIGS}
    assert rows["good/c256"][-2:] == ["improvement", "≈best"] and rows["poor/c256"][-1] == "regression"
    assert "coverage-confounded" not in text.lower() and "judged@" not in text
    assert f"sampled judgments: {caveat(project)}" in text
    assert f"winner by relevance threshold: {SAMPLED_THRESHOLDS}" in text
    # The JSON form: the same metric, the sample and why the thresholds were not re-scored.
    assert main(["compare", "--grid", "--json", *sources]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["metric"] == "infndcg@10" and data["thresholds"] is None and data["coverage"] is None
    assert data["sample"]["caveat"] == caveat(project) and data["sample"]["thresholds"] == SAMPLED_THRESHOLDS
    metrics = json.loads((project / "reports" / "metrics.json").read_text())
    means = {row["config_id"]: row["mean"] for row in data["configs"]}
    assert means["good/c256"] == pytest.approx(metrics["configs"]["good/c256"]["infndcg@10"], abs=1e-12)
    assert data["baseline_mean"] == pytest.approx(metrics["configs"][BASELINE]["infndcg@10"], abs=1e-12)


def test_report_md_headlines_the_inferred_primary_and_opens_with_the_caveat(project, report):
    markdown = report.markdown
    opening = markdown.split("## Grid")[0]
    assert "**Conclusion** (infndcg@10, 40 queries, paired bootstrap" in opening
    assert f"Sampled judgments: {caveat(project)}." in opening
    assert f"Winner by relevance threshold: {SAMPLED_THRESHOLDS}." in opening
    metrics = json.loads((project / "reports" / "metrics.json").read_text())["configs"]
    best = max(metrics, key=lambda cid: metrics[cid]["infndcg@10"])
    assert f"Best: `{best}` ({metrics[best]['infndcg@10']:.4f})." in opening
    grid = markdown.split("## Grid")[1].split("## Against")[0]
    table = [[c.strip() for c in line.strip("|").split("|")] for line in grid.splitlines() if line.startswith("|")]
    assert table[0][:3] == ["configuration", "infndcg@10 [95% CI]", "infap"]
    by_inferred = sorted(metrics, key=lambda cid: -metrics[cid]["infndcg@10"])
    assert [row[0] for row in table[2:]] == [f"`{cid}`" for cid in by_inferred]  # best first by it
    against = markdown.split("## Against the baseline")[1].split("## Slices")[0]
    assert "Each block's infndcg@10 verdict is the grid's" in against
    assert f"grid: infndcg@10 vs baseline {BASELINE}" in against and "4. result: infndcg@10" in against
    assert "7. sampled judgments: the figures are estimates" in against
    # Nothing a sample cannot mean: no judged@k, condensed list or bpref, no coverage question (the card
    # at the end states the contract's terms as recorded, coverage terms included).
    figures = markdown.split("## Evaluation card")[0]
    for absent in ("judged@", "bpref", "coverage-confounded", "condensed"):
        assert absent not in figures, absent
    assert not re.search(r"(?<![a-z])(ndcg@10|map)'", figures)  # no condensed-list value
    assert report.primary == "infndcg@10"
    assert "infndcg@10" in report.page and f"Sampled judgments: {caveat(project)}." in report.page
    assert {row["metric"] for row in report.plot_tables["difference_ci"]} == {"infndcg@10"}


def table_rows(section: str) -> list[list[str]]:
    """A Markdown table's data rows, cells stripped."""
    lines = [line for line in section.splitlines() if line.startswith("|")]
    return [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]


def test_report_md_slices_and_worst_queries_read_the_inferred_values(project, report):
    per_query = pl.read_parquet(project / "reports" / "per_query.parquet")
    slices = report.markdown.split("## Slices")[1].split("## Worst")[0]
    assert f"| configuration | early ({EARLY}) |" in slices
    early = per_query.filter(pl.col("query_id").str.slice(1).cast(pl.Int64) < EARLY)
    for cid, value in table_rows(slices):
        expected = early.filter(pl.col("config_id") == cid.strip("`"))["infndcg@10"].mean()
        assert value == f"{expected:.4f}"
    assert "infndcg@10 per slice" in slices
    hardest = per_query.group_by("query_id").agg(pl.col("infndcg@10").mean().alias("mean")).sort(["mean", "query_id"])
    worst = report.markdown.split("## Worst queries (infndcg@10, mean over configurations)")[1].split("## ")[0]
    first = table_rows(worst)[0]
    assert first[0] == hardest["query_id"][0] and first[3] == f"{hardest['mean'][0]:.4f}"


def test_a_pooled_report_carries_no_sample_and_rescores_the_thresholds(tmp_path, monkeypatch):
    """The same code on a pooled project (tests/reporting/test_report_markdown.py's): the contract's own
    primary, the winner re-scored at each threshold, no sample line."""
    root = constructed_repo(tmp_path / "pooled")
    monkeypatch.chdir(root)
    inputs = read_inputs(Path("reports"), Path("data/work"), "reports/holdout_access.jsonl")
    markdown = build_report(inputs, load_params("params.yaml"), None, 500, seed=0, worst=3).markdown
    assert "**Conclusion** (ndcg@10, 40 queries" in markdown and "| configuration | ndcg@10 [95% CI] |" in markdown
    assert "- Winner by relevance threshold: grade >= 1: better/c1, grade >= 2: better/c1" in markdown
    assert "ampled judgments" not in markdown and "infndcg" not in markdown and SAMPLED_THRESHOLDS not in markdown
