"""grid.md, report.md, metrics.json and the card on judging coverage and saturated cutoffs.

Rendered from a constructed repository, every number computed by the metric engine: a corpus of
40 documents, 20 dev queries each with two relevant documents and eight judged non-relevant ones,
and three configurations. 'pooled' retrieves judged documents only; 'novel' puts three documents
nobody judged in its top 10 (judged@10 = 0.7), its judged ones in the ideal order; 'reordered' is
'pooled' with the relevant documents first. At 40 documents recall@10 reaches 25% of the corpus
(saturated: >= 20%), recall@5 12.5% (not saturated).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from releval import io
from releval.config import load_params
from releval.measurement import scoring
from releval.measurement.metrics import Contract, evaluate
from releval.provenance import card as cards
from releval.reporting.evaluation_report import build_report, read_inputs
from releval.reporting.markdown import grid_markdown, table_quality_metrics
from releval.retrieval import runs
from support import ROOT

N_QUERIES = 20
DOCUMENTS = 40
METRICS = ["ndcg@10", "recall@5", "recall@10", "map", "bpref", "judged@10"]
METRIC_CFG = {
    "metrics": METRICS,
    "primary": "ndcg@10",
    "collapse": "first",
    "coverage": {"min_judged": 0.9, "max_judged_gap": 0.05},
}
RANKINGS = {
    "pooled/c1": ["n1", "r1", "n2", "r2", "n3", "n4", "n5", "n6", "n7", "n8"],
    "novel/c1": ["u1", "u2", "r1", "r2", "u3", "n1", "n2", "n3", "n4", "n5"],
    "reordered/c1": ["r1", "r2", "n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8"],
}


def query_ids() -> list[str]:
    return [f"q{i:02d}" for i in range(N_QUERIES)]


def qrels_table() -> pl.DataFrame:
    rows = []
    for q in query_ids():
        rows += [(q, f"{q}-r1", 2), (q, f"{q}-r2", 1)] + [(q, f"{q}-n{i}", 0) for i in range(1, 9)]
    return pl.DataFrame(rows, schema={"query_id": pl.Utf8, "doc_id": pl.Utf8, "grade": pl.Int64}, orient="row")


def scored(metric_cfg=METRIC_CFG) -> tuple[dict, dict, pl.DataFrame]:
    """(results as scoring.config_result makes them, metrics.json, per_query.parquet) for the three runs."""
    qrels, contract = qrels_table(), Contract()
    results, frames = {}, []
    for cid, ranking in RANKINGS.items():
        run = pl.DataFrame(
            [(q, f"{q}-{d}", float(10 - rank)) for q in query_ids() for rank, d in enumerate(ranking)],
            schema={"query_id": pl.Utf8, "doc_id": pl.Utf8, "score": pl.Float64},
            orient="row",
        )
        evaluation = evaluate(qrels, run, METRICS, contract)
        per_query = scoring.with_condensed(evaluation, run, qrels)
        results[cid] = {
            "mean": evaluation.mean,
            "condensed": scoring.condensed_means(per_query),
            "ops": {"index_bytes": 1024},
            "counts": evaluation.counts,
            "slices": {},
            "warnings": [],
        }
        frames.append(per_query.with_columns(pl.lit(cid).alias("config_id")))
    judgments = {"version": "v1", "source_sha256": "ab" * 32}
    split = {"split": "dev", "queries": N_QUERIES, "holdout_queries_sealed": 0}
    document = scoring.metrics_document(
        results, contract, metric_cfg, "constructed", judgments, split, documents=DOCUMENTS
    )
    return results, document, scoring.per_query_table(frames)


# --------------------------------------------------------------------------- metrics.json and grid.md


def test_metrics_json_records_coverage_terms_condensed_values_and_saturation():
    _, document, per_query = scored()
    assert document["contract"]["coverage"] == {"min_judged": 0.9, "max_judged_gap": 0.05}
    assert document["saturation"] == {"documents": 40, "share": 0.2, "saturated": ["recall@10"]}
    novel = document["configs"]["novel/c1"]
    assert novel["judged@10"] == pytest.approx(0.7)
    # the condensed block: every metric but judged@k and bpref, the mean of per_query.parquet's <metric>' column
    assert set(novel["condensed"]) == {"ndcg@10", "recall@5", "recall@10", "map"}
    rows = per_query.filter(pl.col("config_id") == "novel/c1")
    assert novel["condensed"]["ndcg@10"] == pytest.approx(rows["ndcg@10'"].mean()) == pytest.approx(1.0)
    assert novel["ndcg@10"] < document["configs"]["pooled/c1"]["ndcg@10"] < novel["condensed"]["ndcg@10"]
    pooled = document["configs"]["pooled/c1"]
    assert pooled["condensed"]["ndcg@10"] == pytest.approx(pooled["ndcg@10"])  # fully judged: nothing removed
    # overridden like any metric parameter (`releval params metric.coverage.min_judged=0.8`), recorded as given
    relaxed = {**METRIC_CFG, "coverage": {"min_judged": 0.8}}
    _, document, _ = scored(relaxed)
    assert document["contract"]["coverage"] == {"min_judged": 0.8, "max_judged_gap": 0.05}
    # without the corpus's size there is no saturation block (nothing is claimed)
    assert "saturation" not in scoring.metrics_document(
        {}, Contract(), METRIC_CFG, "x", {"version": "v", "source_sha256": "s"}, {}
    )


def test_the_score_stage_writes_condensed_columns_per_query_and_means_per_configuration(tmp_path):
    """scoring.score_run, as the score stage calls it, on a run folder of 'novel'."""
    ids = query_ids()
    rows = [(q, f"{q}-{d}#0", f"{q}-{d}", 1.0 - j / 10, j + 1) for q in ids for j, d in enumerate(RANKINGS["novel/c1"])]
    meta = {"config_id": "novel/c1", "ops": {}, "models": {}, "inputs": []}
    runs.write_run(tmp_path / "novel", pl.DataFrame(rows, schema=runs.RUN_SCHEMA, orient="row"), meta)
    queries = pl.DataFrame({"query_id": ids})
    scored_run = scoring.score_run(
        tmp_path / "novel", scoring.scored_queries(queries, qrels_table()), METRICS, Contract()
    )
    table = scoring.per_query_table([scored_run.per_query])
    assert table.columns == ["config_id", "query_id", *METRICS, "ndcg@10'", "recall@5'", "recall@10'", "map'"]
    assert table["ndcg@10'"].to_list() == pytest.approx([1.0] * N_QUERIES)
    assert table["map'"].to_list() == pytest.approx([1.0] * N_QUERIES)  # r1, r2 first once u1, u2 are gone
    assert table["map"].to_list() == pytest.approx([(1 / 3 + 2 / 4) / 2] * N_QUERIES)  # r1 at rank 3, r2 at 4
    assert scored_run.result["condensed"] == pytest.approx(
        {"ndcg@10": 1.0, "recall@5": 1.0, "recall@10": 1.0, "map": 1.0}
    )
    assert scored_run.result["mean"]["judged@10"] == pytest.approx(0.7)


def test_grid_md_shows_judged_at_10_and_marks_saturated_values():
    results, document, _ = scored()
    quality = table_quality_metrics(METRICS)
    assert quality == ["ndcg@10", "recall@5", "recall@10", "map"]
    text = grid_markdown(results, document["contract"], quality, "ndcg@10", saturation=document["saturation"])
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("| configuration"))
    cells = [c.strip() for c in header.strip("|").split("|")]
    assert cells[:6] == ["configuration", "ndcg@10", "recall@5", "recall@10", "map", "judged@10"]
    row = {
        line.split("|")[1].strip(): [c.strip() for c in line.strip("|").split("|")]
        for line in lines
        if line.startswith("| `")
    }
    assert row["`novel/c1`"][5] == "0.70" and row["`pooled/c1`"][5] == "1.00"
    assert row["`pooled/c1`"][3] == "1.0000 (sat.)"  # recall@10: saturated
    assert row["`pooled/c1`"][2] == f"{results['pooled/c1']['mean']['recall@5']:.4f}"  # recall@5: not
    assert "(sat.): saturated (recall@10). A saturated cutoff reaches at least 20% of the corpus's 40 documents" in text
    assert "judged@10 below the contract's 0.9 (metric.coverage.min_judged): `novel/c1` 0.70." in text
    assert "`releval pool --missing`" in text
    # without a saturation block nothing is marked
    plain = grid_markdown(results, document["contract"], quality, "ndcg@10")
    assert "(sat.)" not in plain and "| 1.0000 |" in plain


def test_the_card_records_the_coverage_terms_without_changing_its_identity():
    _, document, _ = scored()
    contract = document["contract"]
    summary = cards.contract_summary(contract)
    assert summary["policies"]["coverage"] == (
        "a comparison is coverage-confounded, no verdict, when either side's judged@10 is below 0.9 "
        "or the two differ by more than 0.05"
    )
    assert summary["terms"]["coverage"] == {"min_judged": 0.9, "max_judged_gap": 0.05}
    relaxed = {**contract, "coverage": {"min_judged": 0.5, "max_judged_gap": 0.5}}
    assert cards.identity({"contract": cards.contract_summary(relaxed)}) == cards.identity({"contract": summary})
    older = {k: v for k, v in contract.items() if k != "coverage"}  # a contract recorded before the terms
    assert "coverage" not in cards.contract_summary(older)["policies"]


# --------------------------------------------------------------------------- report.md


def constructed_repo(root: Path) -> Path:
    """What the report stage reads: the scored reports above, their runs, work files and params."""
    work = root / "data" / "work"
    work.mkdir(parents=True)
    ids = query_ids()
    pl.DataFrame(
        {
            "query_id": ids,
            "text": [f"query {q}" for q in ids],
            "split": ["dev"] * N_QUERIES,
            "slices": pl.Series([[] for _ in ids], dtype=pl.List(pl.Utf8)),
            "must_never_break": [False] * N_QUERIES,
        }
    ).write_parquet(work / "queries.parquet")
    qrels_table().write_parquet(work / "qrels.parquet")
    pl.DataFrame(
        {
            "doc_id": [f"d{i}" for i in range(DOCUMENTS)],
            "title": [""] * DOCUMENTS,
            "text": ["text"] * DOCUMENTS,
            "sha256": [f"h{i}" for i in range(DOCUMENTS)],
        }
    ).write_parquet(work / "docs.parquet")
    (root / "qrels.txt").write_text("whatever\n")
    (work / "judgments.json").write_text(
        json.dumps({"version": "v1", "source": "qrels.txt", "source_sha256": io.sha256_file(root / "qrels.txt")})
    )
    results, document, per_query = scored()
    lineage = {}
    for cid, ranking in RANKINGS.items():
        rows = [(q, f"{q}-{d}#0", f"{q}-{d}", 1.0 - j / 10, j + 1) for q in ids for j, d in enumerate(ranking)]
        run_dir = work / "runs" / cid.replace("/", "_")
        meta = {
            "config_id": cid,
            "kind": "bm25",
            "model": None,
            "chunking": "c1",
            "inputs": [],
            "ops": {},
            "models": {},
        }
        runs.write_run(run_dir, pl.DataFrame(rows, schema=runs.RUN_SCHEMA, orient="row"), meta)
        lineage[cid] = {
            "models": {},
            "inputs": [],
            "run_dir": str(run_dir.relative_to(root)),
            "run_sha256": io.sha256_file(run_dir / "run.parquet"),
        }
    reports = root / "reports"
    reports.mkdir()
    (reports / "metrics.json").write_text(json.dumps(document))
    (reports / "lineage.json").write_text(json.dumps(lineage))
    per_query.write_parquet(reports / "per_query.parquet")
    params = {
        "dataset": {
            "name": "constructed",
            "corpus": {"path": "corpus.jsonl", "format": "jsonl"},
            "queries": {"path": "queries.jsonl", "format": "releval"},
            "subset": {"docs": None},
        },
        "judgments": {"version": "v1", "path": "qrels.txt", "format": "trec"},
        "models": {},
        "grid": {"baseline": "pooled/c1"},
    }
    (root / "params.yaml").write_text(json.dumps(params))
    shutil.copytree(ROOT / "dvc_plots", root / "dvc_plots")
    return root


@pytest.fixture(scope="module")
def report_md(tmp_path_factory) -> str:
    root = constructed_repo(tmp_path_factory.mktemp("coverage"))
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.chdir(root)
    try:
        inputs = read_inputs(Path("reports"), Path("data/work"), "reports/holdout_access.jsonl")
        report = build_report(inputs, load_params("params.yaml"), "dvc_plots/offline.html", 1000, seed=0, worst=3)
    finally:
        monkeypatch.undo()
    return report.markdown


def grid_table(markdown: str) -> list[list[str]]:
    section = markdown.split("## Grid")[1].split("## Against")[0]
    return [[c.strip() for c in line.strip("|").split("|")] for line in section.splitlines() if line.startswith("|")]


def test_report_md_grid_has_judged_at_10_and_saturated_marks(report_md):
    table = grid_table(report_md)
    header, rows = table[0], {row[0]: row for row in table[2:]}
    assert header[:6] == ["configuration", "ndcg@10 [95% CI]", "recall@5", "recall@10", "map", "judged@10"]
    assert rows["`novel/c1`"][5] == "0.70" and rows["`pooled/c1`"][5] == "1.00"
    assert rows["`novel/c1`"][3] == "1.0000 (sat.)" and "(sat.)" not in rows["`novel/c1`"][2]
    grid = report_md.split("## Grid")[1].split("## Against")[0]
    assert "(sat.): saturated (recall@10). A saturated cutoff reaches at least 20% of the corpus's 40 documents" in grid
    assert "`novel/c1` 0.70" in grid and "`releval pool --missing`" in grid


def test_report_md_verdicts_say_coverage_confounded_with_condensed_values_and_bpref(report_md):
    against = report_md.split("## Against the baseline")[1].split("## Slices")[0]
    novel_row = next(line for line in against.splitlines() if line.startswith("novel/c1 "))
    assert novel_row.split()[-2:] == ["0.70", "coverage-confounded"]
    reordered_row = next(line for line in against.splitlines() if line.startswith("reordered/c1 "))
    assert reordered_row.split()[-3:] == ["1.00", "improvement", "≈best"]
    block = against[against.index("1. candidate novel/c1 vs baseline pooled/c1") :]
    block = block[: block.index("```")]
    result = next(line for line in block.splitlines() if line.startswith("4. result:"))
    assert result.endswith("→ COVERAGE-CONFOUNDED")
    coverage = next(line for line in block.splitlines() if line.startswith("7. coverage:"))
    assert coverage.startswith("7. coverage: judged@10 1.00 → 0.70: COVERAGE-CONFOUNDED")
    assert "condensed-list ndcg@10' (unjudged documents removed from the ranking; Sakai, SIGIR 2007)" in coverage
    assert "→ 1.0000" in coverage and "bpref " in coverage
    assert "THE WINNER DIFFERS: ndcg@10 favours the baseline, ndcg@10' the candidate" in coverage
    conclusion = report_md.split("**Conclusion**")[1].split("\nCard `")[0]
    assert "- Coverage: 1 of the 2 comparisons with `pooled/c1` is coverage-confounded" in conclusion
    assert "`novel/c1`" in conclusion and "releval pool --missing" in conclusion
    picks = "- Another measure picks the other side than ndcg@10 against `pooled/c1` for `novel/c1` (ndcg@10'"
    assert picks in conclusion
    assert "REGRESSION" not in report_md


def test_a_saturated_cutoff_outside_the_table_is_still_named():
    from releval.reporting.markdown import saturation_note

    block = {"documents": 109, "share": 0.2, "saturated": ["recall@100"]}
    hidden = saturation_note(block, ["ndcg@10", "recall@20"])
    assert hidden.startswith("Saturated and not shown here (metrics.json marks it): recall@100.")
    assert "109 documents" in hidden and "below 21.8" in hidden
    shown = saturation_note(block, ["ndcg@10", "recall@100"])
    assert shown.startswith("(sat.): saturated (recall@100).") and "not shown" not in shown
    assert saturation_note({**block, "saturated": []}, ["recall@100"]) is None
