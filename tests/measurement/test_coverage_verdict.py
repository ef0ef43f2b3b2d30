"""Judging coverage in every comparison: `compare`, `compare --grid` and `gate` say
'coverage-confounded' instead of better/worse when a side is judged too thinly or the two
unevenly, and report the condensed-list value and bpref beside the standard one.

The pair is constructed so that each number can be checked by hand and against pytrec_eval:
30 queries, each with two relevant documents (r1 grade 2, r2 grade 1) and eight judged
non-relevant ones (n1..n8).

* 'pooled' ranks n1 r1 n2 r2 n3..n8: every top-10 document judged (judged@10 = 1);
* 'novel' ranks u1 u2 r1 r2 u3 n1..n5: three documents nobody judged in its top 10
  (judged@10 = 0.7). Its judged documents are in the ideal order, so on the condensed list
  (unjudged documents removed, Sakai, SIGIR 2007) its nDCG@10 and its bpref are 1, while the
  standard nDCG@10, counting u1 u2 as non-relevant, puts it below 'pooled'.
* 'reordered' is 'pooled' with r1 and r2 moved to the top: fully judged, clearly better.

The contract is trec_eval's conventions (linear gain), so every standard and condensed value is
checked against pytrec_eval on the runs and on the runs with their unjudged documents removed
by hand.
"""

from __future__ import annotations

import json
import math

import numpy as np
import polars as pl
import pytest
import pytrec_eval

from releval.errors import InputError
from releval.measurement import gate, scoring, stats
from releval.measurement.grid import compare_grid
from releval.measurement.metrics import Contract, condense, evaluate
from support.scored_project import Project, qids

N = 30
METRICS = ["ndcg@10", "recall@100", "hit@10", "bpref", "judged@10"]
JUDGED = [f"n{i}" for i in range(1, 9)]
RANKINGS = {
    "pooled": ["n1", "r1", "n2", "r2", "n3", "n4", "n5", "n6", "n7", "n8"],
    "novel": ["u1", "u2", "r1", "r2", "u3", "n1", "n2", "n3", "n4", "n5"],
    "reordered": ["r1", "r2", "n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8"],
}


def qrels_rows(ids: list[str]) -> list[tuple[str, str, int]]:
    rows = []
    for q in ids:
        rows += [(q, f"{q}-r1", 2), (q, f"{q}-r2", 1)] + [(q, f"{q}-{d}", 0) for d in JUDGED]
    return rows


def qrels_table(ids: list[str]) -> pl.DataFrame:
    schema = {"query_id": pl.Utf8, "doc_id": pl.Utf8, "grade": pl.Int64}
    return pl.DataFrame(qrels_rows(ids), schema=schema, orient="row")


def doc_run(name: str, ids: list[str]) -> pl.DataFrame:
    rows = [(q, f"{q}-{d}", float(10 - rank)) for q in ids for rank, d in enumerate(RANKINGS[name])]
    return pl.DataFrame(rows, schema={"query_id": pl.Utf8, "doc_id": pl.Utf8, "score": pl.Float64}, orient="row")


def contract(n: int, **terms) -> dict:
    """metrics.json's contract: trec_eval's conventions, the recorded context, ``terms`` added."""
    return {
        **Contract.trec_eval().to_dict(),
        "metrics": METRICS,
        "primary": "ndcg@10",
        "collapse": "first",
        "dataset": "toy",
        "judgments_version": "toy-1",
        "judgments_sha256": "ab" * 32,
        "queries": n,
        "split": "all",
        **terms,
    }


@pytest.fixture
def pair(tmp_path) -> Project:
    """Run files for the three rankings, the qrels they are scored against, and reports that give
    the contract (trec_eval's conventions; coverage terms as given to :func:`contract`)."""
    proj = Project(tmp_path)
    ids = qids(N)
    proj.write_qrels(qrels_rows(ids))
    proj.write_queries(ids)
    proj.write_reports({"placeholder": {m: [0.5] * N for m in METRICS}}, ids, contract(N))
    for name in RANKINGS:
        chunks = {q: [f"{q}-{d}#0" for d in RANKINGS[name]] for q in ids}
        proj.write_run(name, chunks)
    return proj


def run_ref(name: str) -> str:
    return f"data/work/runs/{name}"


def trec_eval(qrels: pl.DataFrame, run: pl.DataFrame, measures: set[str]) -> dict[str, dict[str, float]]:
    judged = {}
    for q, d, g in qrels.iter_rows():
        judged.setdefault(q, {})[d] = int(g)
    ranked = {}
    for q, d, s in run.iter_rows():
        ranked.setdefault(q, {})[d] = float(s)
    return pytrec_eval.RelevanceEvaluator(judged, measures).evaluate(ranked)


def mean_of(values: dict[str, dict[str, float]], measure: str) -> float:
    return float(np.mean([v[measure] for v in values.values()]))


# --------------------------------------------------------------------------- the decision rule


def test_the_coverage_rule_on_hand_examples():
    terms = scoring.CoverageTerms()
    assert (terms.min_judged, terms.max_judged_gap) == (0.9, 0.05)
    assert scoring.coverage_verdict(1.0, 0.96, terms) is None
    assert scoring.coverage_verdict(0.9, 0.9, terms) is None  # at the threshold: covered
    assert scoring.coverage_verdict(0.95, 0.90, terms) is None  # a gap of exactly 0.05: within it
    low = scoring.coverage_verdict(1.0, 0.7, terms, metric="judged@10")
    assert (
        low == "judged@10 below 0.9 (candidate 0.70); judged@10 differs by 0.30 > 0.05 (baseline 1.00, candidate 0.70)"
    )
    gap = scoring.coverage_verdict(1.0, 0.93, terms, metric="judged@10", names=("a", "b"))
    assert gap == "judged@10 differs by 0.07 > 0.05 (a 1.00, b 0.93)"
    both = scoring.coverage_verdict(0.5, 0.5, terms)
    assert both == "judged@k below 0.9 (baseline 0.50, candidate 0.50)"
    assert scoring.coverage_verdict(1.0, 0.7, scoring.CoverageTerms(0.6, 0.35)) is None


@pytest.mark.parametrize(
    "terms, field",
    [({"min_judged": 1.5}, "metric.coverage.min_judged"), ({"max_judged_gap": -0.1}, "metric.coverage.max_judged_gap")],
)
def test_coverage_terms_out_of_range_are_refused_naming_the_field(terms, field):
    with pytest.raises(InputError) as caught:
        scoring.coverage_terms({"coverage": terms}, source="params.yaml")
    assert caught.value.field == field and caught.value.file == "params.yaml"


def test_unknown_coverage_terms_and_a_non_mapping_are_refused():
    with pytest.raises(InputError, match="unknown coverage term") as caught:
        scoring.coverage_terms({"coverage": {"min_judge": 0.8}})
    assert caught.value.field == "metric.coverage.min_judge"
    with pytest.raises(InputError) as caught:
        scoring.coverage_terms({"coverage": 0.9})
    assert caught.value.field == "metric.coverage"
    # a contract recorded before the terms existed gets the defaults; one term given keeps the other's
    assert scoring.coverage_terms({}) == scoring.CoverageTerms(0.9, 0.05)
    assert scoring.coverage_terms({"coverage": {"min_judged": 0.8}}) == scoring.CoverageTerms(0.8, 0.05)


def test_coverage_is_read_at_the_primary_metrics_cutoff():
    assert (
        scoring.coverage_metric({"metrics": ["ndcg@10", "judged@5", "judged@10"], "primary": "ndcg@10"}) == "judged@10"
    )
    assert scoring.coverage_metric({"metrics": ["map", "judged@20"], "primary": "map"}) == "judged@20"
    assert scoring.coverage_metric({"metrics": ["ndcg@10"], "primary": "ndcg@10"}) is None


# --------------------------------------------------------------------------- a constructed pair


def test_condensed_values_agree_with_pytrec_eval_on_the_hand_condensed_run():
    ids = qids(N)
    qrels = qrels_table(ids)
    run = doc_run("novel", ids)
    engine = Contract.trec_eval()
    condensed = scoring.condensed_scores(run, qrels, ["ndcg@10", "map", "bpref", "judged@10"], engine, ids)
    assert condensed.columns == ["query_id", "ndcg@10'", "map'"]  # judged@k and bpref have no condensed form
    by_hand = run.filter(~pl.col("doc_id").str.contains("-u"))  # the unjudged u1..u3 removed
    reference = trec_eval(qrels, by_hand, {"ndcg_cut_10", "map"})
    assert condensed["ndcg@10'"].to_list() == pytest.approx([reference[q]["ndcg_cut_10"] for q in ids], abs=1e-12)
    assert condensed["map'"].to_list() == pytest.approx([reference[q]["map"] for q in ids], abs=1e-12)
    assert condensed["ndcg@10'"].to_list() == pytest.approx([1.0] * N)  # its judged documents are in the ideal order
    assert condense(run, qrels).height == 7 * N


def test_a_query_with_only_unjudged_documents_scores_zero_on_its_condensed_list():
    qrels = pl.DataFrame({"query_id": ["q1", "q2"], "doc_id": ["a", "b"], "grade": [1, 1]})
    run = pl.DataFrame({"query_id": ["q1", "q2"], "doc_id": ["a", "x"], "score": [1.0, 1.0]})
    condensed = scoring.condensed_scores(run, qrels, ["ndcg@10"], Contract(), ["q1", "q2"])
    assert condensed.rows() == [("q1", 1.0), ("q2", 0.0)]
    nothing_judged = run.with_columns(pl.lit("x").alias("doc_id"))
    assert scoring.condensed_scores(nothing_judged, qrels, ["ndcg@10"], Contract(), ["q1", "q2"]).rows() == [
        ("q1", 0.0),
        ("q2", 0.0),
    ]


def test_a_side_retrieving_unjudged_documents_is_coverage_confounded(pair, capsys):
    code, out, _ = pair.cli(capsys, "compare", run_ref("pooled"), run_ref("novel"), "--json", "--resamples", "1000")
    assert code == 0
    result = json.loads(out)
    assert result["verdict"] == stats.COVERAGE_CONFOUNDED
    coverage = result["coverage"]
    assert coverage["metric"] == "judged@10" and coverage["judged"] == pytest.approx([1.0, 0.7])
    assert coverage["confounded"] is True and "judged@10 below 0.9 (candidate 0.70)" in coverage["reason"]
    assert coverage["terms"] == {"min_judged": 0.9, "max_judged_gap": 0.05}
    # every number against pytrec_eval: standard nDCG@10 and bpref on the runs, nDCG@10 on the hand-condensed runs
    ids = qids(N)
    qrels = pl.read_parquet(pair.root / "data" / "work" / "qrels.parquet")
    standard = {name: trec_eval(qrels, doc_run(name, ids), {"ndcg_cut_10", "bpref"}) for name in ("pooled", "novel")}
    condensed = trec_eval(qrels, doc_run("novel", ids).filter(~pl.col("doc_id").str.contains("-u")), {"ndcg_cut_10"})
    assert coverage["standard"]["means"] == pytest.approx(
        [mean_of(standard["pooled"], "ndcg_cut_10"), mean_of(standard["novel"], "ndcg_cut_10")], abs=1e-12
    )
    assert coverage["condensed"] == {
        "metric": "ndcg@10'",
        "means": pytest.approx([mean_of(standard["pooled"], "ndcg_cut_10"), mean_of(condensed, "ndcg_cut_10")]),
    }
    assert coverage["bpref"] == pytest.approx(
        [mean_of(standard["pooled"], "bpref"), mean_of(standard["novel"], "bpref")]
    )
    assert coverage["bpref"] == pytest.approx(
        [0.25, 1.0]
    )  # by hand, pooled: r1 has 1 of min(R, N) = 2 judged non-relevant above it, r2 has 2
    # the standard value favours the pooled side; the condensed list and bpref favour the novel one
    assert coverage["winners"] == {"ndcg@10": "baseline", "ndcg@10'": "candidate", "bpref": "candidate"}
    assert coverage["winner_differs"] == ["ndcg@10'", "bpref"]
    # without the coverage rule this is a significant regression; the secondaries are confounded too
    assert result["primary"]["bootstrap_ci"][1] < 0 and result["primary"]["bootstrap_p_value"] < 0.05
    assert {c["verdict"] for c in result["secondary"].values()} == {stats.COVERAGE_CONFOUNDED}
    assert result["kind"] is None

    _, text, _ = pair.cli(capsys, "compare", run_ref("pooled"), run_ref("novel"), "--resamples", "1000")
    lines = text.splitlines()
    assert lines[3].endswith("→ COVERAGE-CONFOUNDED") and "REGRESSION" not in text
    assert lines[6].startswith("7. coverage: judged@10 1.00 → 0.70: COVERAGE-CONFOUNDED, judged@10 below 0.9")
    assert "condensed-list ndcg@10' (unjudged documents removed from the ranking; Sakai, SIGIR 2007)" in lines[6]
    assert "THE WINNER DIFFERS: ndcg@10 favours the baseline, ndcg@10' the candidate, bpref the candidate" in lines[6]
    assert "`releval pool --missing`" in lines[6]


def test_a_pair_both_covered_gets_an_ordinary_verdict(pair, capsys):
    code, out, _ = pair.cli(capsys, "compare", run_ref("pooled"), run_ref("reordered"), "--json", "--resamples", "1000")
    assert code == 0
    result = json.loads(out)
    assert result["verdict"] == "improvement"
    coverage = result["coverage"]
    assert coverage["judged"] == [1.0, 1.0] and coverage["confounded"] is False and coverage["reason"] is None
    assert coverage["winner_differs"] == []  # fully judged: the condensed list is the list
    assert coverage["condensed"]["means"] == pytest.approx(coverage["standard"]["means"])
    _, text, _ = pair.cli(capsys, "compare", run_ref("pooled"), run_ref("reordered"), "--resamples", "1000")
    line = text.splitlines()[6]
    assert line.startswith("7. coverage: judged@10 1.00 → 1.00, within the contract's terms (each >= 0.9, gap <= 0.05)")
    assert "same winner under ndcg@10, ndcg@10', bpref" in line and "pool --missing" not in line


def test_overriding_the_thresholds_changes_the_outcome(pair, capsys):
    args = ("compare", run_ref("pooled"), run_ref("novel"), "--json", "--resamples", "1000")
    _, out, _ = pair.cli(capsys, *args, "--min-judged", "0.6", "--max-judged-gap", "0.35")
    assert json.loads(out)["verdict"] == "regression"
    _, out, _ = pair.cli(capsys, *args, "--min-judged", "0.6")  # the gap (0.30 > 0.05) still confounds it
    assert "differs by 0.30 > 0.05" in json.loads(out)["coverage"]["reason"]
    # the terms recorded in the contract (`releval params metric.coverage.min_judged=...`) decide without options
    ids = qids(N)
    relaxed = contract(N, coverage={"min_judged": 0.6, "max_judged_gap": 0.35})
    pair.write_reports({"placeholder": {m: [0.5] * N for m in METRICS}}, ids, relaxed)
    _, out, _ = pair.cli(capsys, *args)
    result = json.loads(out)
    assert result["verdict"] == "regression" and result["coverage"]["terms"] == {
        "min_judged": 0.6,
        "max_judged_gap": 0.35,
    }
    code, _, err = pair.cli(capsys, *args, "--min-judged", "1.2")
    assert code == 2 and "--min-judged" in err and "[0, 1]" in err


def test_the_gate_neither_passes_nor_fails_a_confounded_comparison(pair, capsys):
    base = ("gate", "--baseline", run_ref("pooled"), "--candidate", run_ref("novel"), "--resamples", "1000")
    code, out, _ = pair.cli(capsys, *base)
    assert code == gate.GATE_INCOMPARABLE
    last = out.rstrip("\n").splitlines()[-1]
    assert last.startswith("gate: FAIL — coverage-confounded, no verdict on ndcg@10: judged@10 below 0.9")
    assert "`releval pool --missing`" in last and "PASS" not in out
    code, out, _ = pair.cli(capsys, *base, "--margin", "0.5")  # non-inferiority cannot be shown either
    assert code == gate.GATE_INCOMPARABLE and "coverage-confounded" in out
    code, out, _ = pair.cli(capsys, *base, "--min-judged", "0.6", "--max-judged-gap", "0.35")
    assert code == gate.GATE_FAIL and out.rstrip("\n").splitlines()[-1].startswith(
        "gate: FAIL — significant regression"
    )
    code, out, _ = pair.cli(
        capsys, "gate", "--baseline", run_ref("pooled"), "--candidate", run_ref("reordered"), "--resamples", "1000"
    )
    assert code == gate.GATE_PASS and "significant improvement" in out


# --------------------------------------------------------------------------- the grid


def grid_reports(proj: Project, coverage_terms: dict | None = None) -> None:
    """Reports as the score stage writes them: the three runs scored with condensed columns."""
    ids = qids(N)
    qrels = qrels_table(ids)
    engine = Contract.trec_eval()
    frames = []
    configs = {}
    for name in RANKINGS:
        run = doc_run(name, ids)
        evaluation = evaluate(qrels, run, METRICS, engine)
        per_query = scoring.with_condensed(evaluation, run, qrels)
        frames.append(per_query.with_columns(pl.lit(name).alias("config_id")))
        configs[name] = {**evaluation.mean, "condensed": scoring.condensed_means(per_query), "ops": {}, "counts": {}}
    terms = {} if coverage_terms is None else {"coverage": coverage_terms}
    (proj.root / "reports" / "metrics.json").write_text(
        json.dumps({"contract": contract(N, **terms), "configs": configs})
    )
    scoring.per_query_table(frames).write_parquet(proj.root / "reports" / "per_query.parquet")


def test_grid_verdicts_are_coverage_confounded_where_a_side_is_thinly_judged(tmp_path, capsys):
    proj = Project(tmp_path)
    proj.write_queries(qids(N))
    grid_reports(proj)
    args = ("compare", "--grid", "--baseline", "pooled", "--resamples", "1000", "--thresholds", "")
    code, out, _ = proj.cli(capsys, *args, "--json")
    assert code == 0
    grid = json.loads(out)
    rows = {row["config_id"]: row for row in grid["configs"]}
    assert rows["novel"]["verdict"] == stats.COVERAGE_CONFOUNDED
    assert rows["novel"]["p_bootstrap_holm"] < 0.05  # the p-values are kept; only the verdict changes
    assert rows["reordered"]["verdict"] == "improvement"
    assert rows["novel"]["coverage"]["judged"] == pytest.approx([1.0, 0.7])
    assert rows["novel"]["coverage"]["condensed"]["means"][1] == pytest.approx(1.0)
    assert rows["novel"]["coverage"]["winner_differs"] == ["ndcg@10'", "bpref"]
    assert grid["coverage"] == {
        "metric": "judged@10",
        "terms": {"min_judged": 0.9, "max_judged_gap": 0.05},
        "baseline_judged": 1.0,
        "confounded": ["novel"],
    }
    code, text, _ = proj.cli(capsys, *args)
    table = text.split("\n\n")[1].splitlines()
    assert table[0].split()[-2:] == ["judged@10", "verdict"]
    novel = next(line for line in table if line.startswith("novel "))
    assert novel.split()[-2:] == ["0.70", "coverage-confounded"]
    assert (
        "coverage: judged@10 (contract terms: each >= 0.9, gap <= 0.05); 1 of 2 comparisons COVERAGE-CONFOUNDED" in text
    )
    assert "  novel: judged@10 1.00 → 0.70: COVERAGE-CONFOUNDED" in text
    # a relaxed contract gives the grid's ordinary verdict
    grid_reports(proj, {"min_judged": 0.6, "max_judged_gap": 0.35})
    _, out, _ = proj.cli(capsys, *args, "--json")
    rows = {row["config_id"]: row for row in json.loads(out)["configs"]}
    assert rows["novel"]["verdict"] == "regression" and rows["reordered"]["verdict"] == "improvement"


def test_grid_decisions_agree_with_the_pair_and_stats_decide(tmp_path):
    """The grid's confounded verdict replaces decide()'s, which is what it would have been."""
    proj = Project(tmp_path)
    grid_reports(proj)
    per_query = pl.read_parquet(proj.root / "reports" / "per_query.parquet")
    report = compare_grid(per_query, "pooled", "ndcg@10", n_resamples=1000, contract=contract(N))
    decisions = stats.decide([r.mean_difference for r in report.rows], [r.p_bootstrap for r in report.rows], [N, N])
    for row, decision in zip(report.rows, decisions):
        expected = stats.COVERAGE_CONFOUNDED if row.config_id == "novel" else decision.verdict
        assert row.verdict == expected and row.p_bootstrap_holm == decision.adjusted_p_value
    assert [r.config_id for r in report.confounded()] == ["novel"]
    # without a contract (no judged@k known) nothing is confounded
    plain = compare_grid(per_query, "pooled", "ndcg@10", n_resamples=1000)
    assert [r.verdict for r in plain.rows] == [d.verdict for d in decisions]
    assert not math.isnan(plain.rows[0].mean)


# --------------------------------------------------------------------------- the shipped defaults


def test_the_default_metric_section_records_coverage_terms_and_a_discriminating_recall():
    import yaml

    from releval.measurement.metrics import contract_from_params
    from releval.reporting.markdown import table_quality_metrics
    from support import ROOT

    section = yaml.safe_load((ROOT / "conf" / "metric" / "default.yaml").read_text(encoding="utf-8"))
    assert scoring.coverage_terms(section, source="conf/metric/default.yaml") == scoring.CoverageTerms(0.9, 0.05)
    assert {"recall@20", "bpref", "judged@10"} <= set(section["metrics"])
    assert table_quality_metrics(section["metrics"]) == ["ndcg@10", "recall@20", "mrr@10", "map"]
    assert scoring.coverage_metric(section) == "judged@10"
    # the default corpus (pydocs, 143 documents): recall@100 is saturated, recall@20 is not
    assert scoring.saturation(section["metrics"], 143)["saturated"] == ["recall@100"]
    # the score stage reads the same section as its contract: `coverage` is not an engine term
    contract_from_params(section)


def test_a_tie_on_an_alternative_is_no_contradiction():
    """A tie under bpref beside an nDCG difference was reported as "THE WINNER DIFFERS: ... bpref neither"."""
    from releval.measurement.coverage import Coverage
    from releval.measurement.scoring import CoverageTerms

    def found(standard, condensed, bpref):
        terms = CoverageTerms()
        return Coverage("judged@10", terms, "ndcg@10", ("base", "cand"), (1.0, 1.0), standard, condensed, bpref, None)

    assert found((0.5, 0.6), (0.5, 0.6), (0.4, 0.4)).winner_differs() == []
    assert found((0.5, 0.6), (0.5, 0.6), (0.4, 0.3)).winner_differs() == ["bpref"]
    assert found((0.5, 0.5), (0.5, 0.6), (0.4, 0.3)).winner_differs() == []
