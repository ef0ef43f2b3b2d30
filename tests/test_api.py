"""releval.api: reading, evaluate against pytrec_eval, compare against the stats functions and the CLI's text."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import pytrec_eval

from releval import api
from releval.errors import InputError
from releval.measurement import stats

REPO = Path(__file__).parent.parent
TREC = REPO / "tests" / "data" / "trec"


def _write_trec_pair(
    tmp_path: Path, n_queries: int = 25, n_docs: int = 30, seed: int = 0, judged: int = 30
) -> tuple[Path, Path, Path]:
    """qrels and two runs as TREC files: graded judgments of the first ``judged`` documents, a
    baseline and a noisier candidate."""
    rng = np.random.default_rng(seed)
    qrels_lines, run_a, run_b = [], [], []
    for q in range(n_queries):
        grades = rng.choice([0, 0, 0, 1, 2, 3], size=n_docs)
        grades[0] = 3  # every query has a relevant document
        for d, grade in enumerate(grades[:judged]):
            qrels_lines.append(f"q{q} 0 d{d} {grade}")
        signal = grades + rng.normal(0, 1.0, n_docs)
        for d in range(n_docs):
            run_a.append(f"q{q} Q0 d{d} 0 {signal[d]:.6f} a")
            run_b.append(f"q{q} Q0 d{d} 0 {signal[d] + rng.normal(0, 1.5):.6f} b")
    paths = tmp_path / "qrels.trec", tmp_path / "a.trec", tmp_path / "b.trec"
    for path, lines in zip(paths, (qrels_lines, run_a, run_b)):
        path.write_text("\n".join(lines) + "\n")
    return paths


def test_evaluate_equals_pytrec_eval_under_the_trec_eval_contract():
    qrels = api.read_judgments(TREC / "robust04-subset.qrels")
    run = api.read_run(TREC / "robust04-rm3-subset.run")
    result = api.evaluate(run, qrels, ["ndcg@10", "map", "recall@100"], contract=api.Contract.trec_eval())
    judged = {q: {d: int(g)} for q, d, g in qrels.iter_rows()}
    judged = {}
    for q, d, g in qrels.iter_rows():
        judged.setdefault(q, {})[d] = int(g)
    scores = {}
    for q, d, s in run.select("query_id", "doc_id", "score").iter_rows():
        scores.setdefault(q, {})[d] = float(s)
    reference = pytrec_eval.RelevanceEvaluator(judged, {"ndcg_cut.10", "map", "recall.100"}).evaluate(scores)
    ours = {row["query_id"]: row for row in result.per_query.iter_rows(named=True)}
    assert sorted(ours) == sorted(reference)
    for query_id, ref in reference.items():
        assert ours[query_id]["ndcg@10"] == pytest.approx(ref["ndcg_cut_10"], abs=1e-12)
        assert ours[query_id]["map"] == pytest.approx(ref["map"], abs=1e-12)
        assert ours[query_id]["recall@100"] == pytest.approx(ref["recall_100"], abs=1e-12)
    assert result.mean["ndcg@10"] == pytest.approx(np.mean([r["ndcg_cut_10"] for r in reference.values()]))
    assert result.counts["queries_evaluated"] == len(reference)


ARCHIVE = REPO / "data" / "archive" / "docs"
MINILM_C256 = ARCHIVE / "b34f748935dceb8548eaf5afcda32628663540c130ded873042ad42bf440d88d.parquet"
RRF_MINILM_BM25_C256 = ARCHIVE / "dc1b37787ed49fb08797ceee18139cf4f12c8930429e6c6b28eb5ceefb488084.parquet"


def test_the_shipped_runs_and_judgments_give_the_readme_s_comparison():
    """The archived v3 runs of minilm/c256 and rrf(minilm,bm25)/c256 against judgment set v3 (dev
    queries): the figures README.md's `releval compare` report shows."""
    qrels = api.read_judgments(REPO / "data" / "judgments" / "v3")
    assert qrels.columns == ["query_id", "doc_id", "grade"] and qrels.height == 4104
    dev = pl.read_ndjson(REPO / "data" / "pydocs" / "v3" / "queries.jsonl").filter(pl.col("split") == "dev")
    qrels = qrels.filter(pl.col("query_id").is_in(dev["query_id"].implode()))
    minilm, hybrid = api.read_run(MINILM_C256), api.read_run(RRF_MINILM_BM25_C256)
    assert api.evaluate(minilm, qrels, ["ndcg@10"]).mean["ndcg@10"] == pytest.approx(0.8015, abs=5e-5)
    result = api.compare(minilm, hybrid, qrels, metric="ndcg@10")
    assert result.n_queries == 85
    assert round(result.mean_difference, 4) == 0.0219
    assert tuple(round(x, 4) for x in result.interval) == (-0.0148, 0.0574)
    assert (round(result.p_value, 3), result.wins, result.losses, result.ties) == (0.225, 35, 16, 34)
    assert result.worst_query.query_id == "q007" and result.verdict == "inconclusive"


def test_compare_is_the_stats_modules_paired_comparison(tmp_path):
    qrels_path, a_path, b_path = _write_trec_pair(tmp_path)
    result = api.compare(a_path, b_path, qrels_path, metric="ndcg@10", n_resamples=2000, seed=3)
    qrels = api.read_judgments(qrels_path)
    base = api.evaluate(a_path, qrels, ["ndcg@10"]).per_query.sort("query_id")
    cand = api.evaluate(b_path, qrels, ["ndcg@10"]).per_query.sort("query_id")
    assert base["query_id"].to_list() == cand["query_id"].to_list()
    b, c = base["ndcg@10"].to_numpy(), cand["ndcg@10"].to_numpy()
    low, high = stats.paired_bootstrap_ci(b, c, n_resamples=2000, seed=3)[:2]
    assert result.interval == pytest.approx((low, high), abs=1e-12)
    assert result.p_value == pytest.approx(stats.paired_bootstrap_p_value(b, c, n_resamples=2000, seed=3), abs=1e-12)
    assert result.mean_difference == pytest.approx(float(np.mean(c - b)), abs=1e-12)
    assert (result.wins, result.losses, result.ties) == stats.win_loss_tie(b, c)
    worst = int(np.argmin(c - b))
    assert result.worst_query.query_id == base["query_id"][worst]
    assert result.n_queries == 25 and result.verdict in ("improvement", "regression", "inconclusive")
    assert result.text.splitlines()[0] == f"1. candidate {b_path} vs baseline {a_path}"
    assert f"W/L/T {result.wins}/{result.losses}/{result.ties}" in result.text


def test_compare_reads_judging_coverage_as_the_cli_does(tmp_path):
    qrels_path, a_path, b_path = _write_trec_pair(tmp_path, judged=20)
    result = api.compare(a_path, b_path, qrels_path, n_resamples=500)
    assert result.verdict == "coverage-confounded"
    assert "7. coverage:" in result.text and "judged@10 below 0.9" in result.text


def test_compare_gives_the_cli_s_numbers_for_the_same_run_files(tmp_path, capsys, monkeypatch):
    """`releval compare a.trec b.trec --qrels q.trec` under the same contract gives the same line 4."""
    from releval.cli import main
    from releval.measurement.metrics import Contract

    qrels_path, a_path, b_path = _write_trec_pair(tmp_path, seed=1)
    reports = tmp_path / "reports"
    reports.mkdir()
    metrics = ["ndcg@10", "judged@10"]
    contract = {**Contract().to_dict(), "metrics": metrics, "primary": "ndcg@10"}
    (reports / "metrics.json").write_text(json.dumps({"contract": contract, "configs": {}}))
    pl.DataFrame(schema={"config_id": pl.Utf8, "query_id": pl.Utf8, "ndcg@10": pl.Float64}).write_parquet(
        reports / "per_query.parquet"
    )
    monkeypatch.chdir(tmp_path)
    code = main(
        [
            "compare",
            "a.trec",
            "b.trec",
            "--qrels",
            "qrels.trec",
            "--reports",
            "reports",
            "--secondary",
            "",
            "--resamples",
            "2000",
            "--seed",
            "4",
            "--queries",
            "none.parquet",
            "--judgments-meta",
            "none.json",
        ]
    )
    cli = capsys.readouterr().out
    assert code == 0, cli
    result = api.compare("a.trec", "b.trec", "qrels.trec", metric="ndcg@10", n_resamples=2000, seed=4)
    line4 = next(line for line in cli.splitlines() if line.startswith("4. "))
    assert line4 == next(line for line in result.text.splitlines() if line.startswith("4. "))


def test_evaluate_without_judgments_or_a_shared_query_is_the_engine_s_error():
    run = pl.DataFrame({"query_id": ["q1"], "doc_id": ["d1"], "score": [1.0]})
    empty = pl.DataFrame(schema={"query_id": pl.Utf8, "doc_id": pl.Utf8, "grade": pl.Int64})
    with pytest.raises(InputError, match="there are no judgments"):
        api.evaluate(run, empty, ["ndcg@10"])
    other = pl.DataFrame({"query_id": ["q1"], "doc_id": ["d9"], "grade": [0]})  # no relevant document
    with pytest.raises(InputError, match="no query left to evaluate"):
        api.evaluate(run, other, ["ndcg@10"])


def test_the_api_gives_the_cli_s_verdict_under_the_project_s_coverage_terms(tmp_path, capsys, monkeypatch):
    """Issue 27, seam 11: with coverage terms the project changed (params.yaml metric.coverage), the CLI
    said inconclusive and the API coverage-confounded, with no way to pass the terms. project_terms()
    reads them; the verdict, interval and coverage line are then the CLI's."""
    from releval.cli import main

    qrels_path, a_path, b_path = _write_trec_pair(tmp_path, seed=1, judged=26)  # judged@10 about 0.87
    monkeypatch.chdir(tmp_path)
    metric = {"metrics": ["ndcg@10", "judged@10"], "primary": "ndcg@10", "coverage": {"min_judged": 0.8}}
    (tmp_path / "params.yaml").write_text(json.dumps({"metric": metric}))
    terms = api.project_terms()
    assert terms.coverage == api.CoverageTerms(min_judged=0.8, max_judged_gap=0.05)
    assert (terms.contract, terms.primary) == (api.Contract(), "ndcg@10")
    reports = tmp_path / "reports"
    reports.mkdir()
    recorded = {**terms.contract.to_dict(), "metrics": list(terms.metrics), "primary": terms.primary}
    recorded["coverage"] = terms.coverage.to_dict()
    (reports / "metrics.json").write_text(json.dumps({"contract": recorded, "configs": {}}))
    pl.DataFrame(schema={"config_id": pl.Utf8, "query_id": pl.Utf8, "ndcg@10": pl.Float64}).write_parquet(
        reports / "per_query.parquet"
    )
    argv = ["compare", "a.trec", "b.trec", "--qrels", "qrels.trec", "--secondary", "", "--resamples", "2000"]
    assert main([*argv, "--queries", "none.parquet", "--judgments-meta", "none.json"]) == 0
    cli = capsys.readouterr().out
    default = api.compare("a.trec", "b.trec", "qrels.trec", n_resamples=2000)
    assert default.verdict == "coverage-confounded"  # releval's own terms: judged@10 below 0.9
    ours = api.compare(
        "a.trec", "b.trec", "qrels.trec", n_resamples=2000, contract=terms.contract, coverage=terms.coverage
    )
    assert ours.verdict != "coverage-confounded" and ours.verdict.upper() in cli
    for number in ("4. ", "7. "):
        line = next(x for x in cli.splitlines() if x.startswith(number))
        assert line == next(x for x in ours.text.splitlines() if x.startswith(number))
