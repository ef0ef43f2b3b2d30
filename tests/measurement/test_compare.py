"""Tests for `releval compare` and releval.measurement.compare: refusals, verdicts, the hand example,
Holm in the grid against statsmodels, threshold stability, run files and the REV:config form.

Every test builds real files (reports, queries, qrels, runs) in a temporary folder and runs the
command through the CLI entry point, as a user would.
"""

from __future__ import annotations

import json
import math

import numpy as np
import polars as pl
import pytest
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower

from releval.measurement import pair, scoring, stats
from releval.reporting.text import thin_evidence
from releval.measurement.metrics import Contract, evaluate
from support.commands import git
from support.scored_project import METRICS, Project, qids

# --------------------------------------------------------------------------- verdicts


@pytest.mark.parametrize(
    "candidate, verdict", [("better", "improvement"), ("worse", "regression"), ("noise", "inconclusive")]
)
def test_verdicts_on_constructed_data(project, capsys, candidate, verdict):
    code, out, _ = project.cli(capsys, "compare", "base", candidate, "--json", "--resamples", "2000")
    assert code == 0
    result = json.loads(out)
    assert result["verdict"] == verdict
    low, high = result["primary"]["bootstrap_ci"]
    assert (low > 0) if verdict == "improvement" else (high < 0) if verdict == "regression" else (low < 0 < high)
    assert result["primary"]["n_queries"] == 60
    assert result["baseline"]["ref"] == "base" and result["candidate"]["ref"] == candidate


def test_six_line_report_names_everything(project, capsys):
    code, out, _ = project.cli(capsys, "compare", "base", "better", "--resamples", "2000")
    assert code == 0
    lines = out.rstrip("\n").splitlines()
    assert len(lines) == 6
    assert lines[0] == "1. candidate better vs baseline base"
    assert (
        lines[1].startswith("2. evaluation set:")
        and "judgments toy-1" in lines[1]
        and "60 queries compared" in lines[1]
        and "split all" in lines[1]
        and "pooling unknown" in lines[1]
    )
    assert (
        lines[2].startswith("3. metric contract: ndcg@10 under ")
        and "gain=exponential" in lines[2]
        and "rel_threshold=1" in lines[2]
        and "collapse=first" in lines[2]
    )
    assert (
        lines[3].startswith("4. result: ndcg@10")
        and "95% CI [+" in lines[3]
        and "paired t [+" in lines[3]
        and "W/L/T 60/0/0" in lines[3]
        and "IMPROVEMENT" in lines[3]
    )
    # recall@100 is unchanged, so the nDCG gain is an ordering win, not a retrieval win.
    assert "(ordering win)" in lines[3]
    assert lines[4].startswith("5. secondary: recall@100") and "hit@10" in lines[4] and "Worst query: none" in lines[4]
    assert lines[5].startswith("6. power: SD of per-query differences ") and "`releval power --sd " in lines[5]


def test_retrieval_loss_is_told_apart_from_ordering(project, capsys):
    code, out, _ = project.cli(capsys, "compare", "base", "worse", "--json", "--resamples", "2000")
    result = json.loads(out)
    assert result["kind"] == "retrieval loss"
    assert result["secondary"]["recall@100"]["verdict"] == "regression"
    assert result["secondary"]["hit@10"]["verdict"] == "inconclusive"


def test_wins_losses_ties_and_worst_query_on_a_hand_example(tmp_path, capsys):
    proj = Project(tmp_path)
    ids = ["a", "b", "c", "d", "e"]
    proj.write_reports(
        {"old": {"ndcg@10": [0.5, 0.2, 0.9, 0.4, 0.3]}, "new": {"ndcg@10": [0.7, 0.2, 0.1, 0.5, 0.3]}}, ids
    )
    proj.write_queries(ids)
    code, out, _ = proj.cli(capsys, "compare", "old", "new", "--json", "--resamples", "500")
    assert code == 0
    primary = json.loads(out)["primary"]
    assert (primary["wins"], primary["losses"], primary["ties"]) == (2, 1, 2)
    assert primary["sign_test_p_value"] == pytest.approx(sps.binomtest(2, 3).pvalue)
    assert primary["worst_regression"] == {
        "query_id": "c",
        "baseline": 0.9,
        "candidate": 0.1,
        "text": "text of c",
        "difference": pytest.approx(-0.8),
    }
    assert primary["best_improvement"]["query_id"] == "a"
    assert primary["mean_difference"] == pytest.approx((0.2 - 0.8 + 0.1) / 5)
    code, text, _ = proj.cli(capsys, "compare", "old", "new", "--resamples", "500")
    assert 'Worst query: c "text of c" 0.9000 → 0.1000' in text
    assert "W/L/T 2/1/2" in text


# --------------------------------------------------------------------------- refusals


def test_refuses_different_query_sets_saying_how_many_differ(tmp_path, capsys):
    proj = Project(tmp_path)
    ids = qids(20)
    long = pl.DataFrame(
        {"config_id": ["a"] * 20 + ["b"] * 17, "query_id": ids + ids[3:], "ndcg@10": np.linspace(0, 1, 37)}
    )
    proj.write_reports({"a": {"ndcg@10": [0.5] * 20}}, ids)
    long.write_parquet(proj.root / "reports" / "per_query.parquet")
    code, _, err = proj.cli(capsys, "compare", "a", "b")
    assert code == 2
    assert "query sets differ: 3 queries differ" in err and "3 only in baseline (q000, q001, q002)" in err


def test_refuses_different_contracts_naming_the_fields(tmp_path, capsys):
    proj = Project(tmp_path)
    ids = qids(10)
    side = lambda contract, values: pair.Side(  # noqa: E731
        "x", "test", contract, pl.DataFrame({"query_id": ids, "ndcg@10": values})
    )
    base = proj.contract(10)
    other = {**base, "rel_threshold": 2, "gain": "linear", "metrics": ["ndcg@10"], "queries": 11}
    with pytest.raises(pair.NotComparable) as info:
        pair.compare_sides(side(base, [0.5] * 10), side(other, [0.6] * 10), "ndcg@10")
    message = str(info.value)
    assert "gain: baseline 'exponential', candidate 'linear'" in message
    assert "rel_threshold: baseline 1, candidate 2" in message
    # the metric list and the topic count are not terms of the contract
    assert "metrics" not in message and "queries" not in message
    assert len(info.value.differences) == 1


def test_refuses_a_run_scored_under_newer_judgments(tmp_path, capsys):
    proj, _ = scored_project(tmp_path)
    (proj.root / "data" / "work" / "judgments.json").write_text(
        json.dumps({"version": "toy-2", "source_sha256": "cd" * 32})
    )
    code, _, err = proj.cli(capsys, "compare", "dense", "data/work/runs/dense")
    assert code == 2
    assert "judgments_sha256" in err and "judgments_version: baseline 'toy-1', candidate 'toy-2'" in err


def test_unknown_reference_lists_the_configurations(project, capsys):
    code, _, err = project.cli(capsys, "compare", "base", "nope")
    assert code == 2
    assert "'nope' is not a run file, a configuration id, or REV:config_id" in err
    assert "base, better, worse, noise" in err


# --------------------------------------------------------------------------- slices


def test_per_slice_differences_and_slice_filter(tmp_path, capsys):
    proj = Project(tmp_path)
    ids = qids(40)
    base = np.full(40, 0.5)
    cand = base.copy()
    cand[:20] += 0.2  # the "short" queries improve
    cand[20:] += np.tile([-0.01, 0.01], 10)  # the "long" ones do not move on average
    proj.write_reports({"a": {"ndcg@10": base.tolist()}, "b": {"ndcg@10": cand.tolist()}}, ids)
    proj.write_queries(ids, slices={q: ["short"] if i < 20 else ["long"] for i, q in enumerate(ids)})
    code, out, _ = proj.cli(capsys, "compare", "a", "b", "--json", "--resamples", "1000")
    slices = json.loads(out)["slices"]
    assert slices["short"]["n_queries"] == 20 and slices["short"]["verdict"] == "improvement"
    assert slices["long"]["n_queries"] == 20 and slices["long"]["verdict"] == "inconclusive"
    code, text, _ = proj.cli(capsys, "compare", "a", "b", "--resamples", "1000")
    assert "   slice long (20 queries): Δ +0.0000" in text
    code, out, _ = proj.cli(capsys, "compare", "a", "b", "--slice", "short", "--json", "--resamples", "1000")
    result = json.loads(out)
    assert result["primary"]["n_queries"] == 20
    assert result["primary"]["mean_difference"] == pytest.approx(0.2)
    assert result["evaluation_set"]["slice"] == "short" and result["slices"] == {}
    code, _, err = proj.cli(capsys, "compare", "a", "b", "--slice", "nope")
    assert code == 2 and "no query carries slice 'nope'; slices: long, short" in err


# --------------------------------------------------------------------------- run files


def scored_project(tmp_path) -> tuple[Project, list[str]]:
    """Two configurations whose per-query scores come from the engine on real runs."""
    proj = Project(tmp_path)
    ids = qids(12)
    qrels = proj.write_qrels([(q, f"{q}-rel", 2) for q in ids] + [(q, f"{q}-low", 1) for q in ids])
    dense = {q: [f"{q}-x#0", f"{q}-rel#0", f"{q}-rel#1", f"{q}-low#0"] for q in ids}
    bm25 = {q: [f"{q}-rel#0", f"{q}-low#0", f"{q}-x#0"] for q in ids}
    contract = proj.contract(len(ids))
    scores = {}
    for cid, ranking in (("dense", dense), ("bm25", bm25)):
        run = proj.write_run(cid, ranking)
        doc_run = run.sort(["query_id", "rank"]).unique(["query_id", "doc_id"], keep="first", maintain_order=True)
        per_query = evaluate(qrels, doc_run.select("query_id", "doc_id", "score"), METRICS, Contract()).per_query.sort(
            "query_id"
        )
        scores[cid] = {m: per_query[m].to_list() for m in METRICS}
    proj.write_reports(scores, ids, contract)
    proj.write_queries(ids)
    return proj, ids


def test_run_files_are_scored_against_the_qrels_under_the_reports_contract(tmp_path, capsys):
    proj, ids = scored_project(tmp_path)
    # the run folder and a TREC file of the same run: scored exactly like the score stage did
    code, out, _ = proj.cli(capsys, "compare", "dense", "data/work/runs/dense", "--json", "--resamples", "500")
    assert code == 0
    result = json.loads(out)
    assert result["candidate"]["source"].startswith("run file data/work/runs/dense")
    assert (result["primary"]["ties"], result["primary"]["mean_difference"]) == (len(ids), 0.0)
    lines = [f"{q} Q0 {q}-{d} {r} {10 - r} t" for q in ids for r, d in enumerate(["rel", "low", "x"], 1)]
    (proj.root / "bm25.trec").write_text("\n".join(lines) + "\n")
    code, out, _ = proj.cli(capsys, "compare", "bm25", "bm25.trec", "--json", "--resamples", "500")
    assert code == 0 and json.loads(out)["primary"]["ties"] == len(ids)
    code, out, _ = proj.cli(capsys, "compare", "dense", "bm25.trec", "--json", "--resamples", "500")
    primary = json.loads(out)["primary"]
    assert primary["wins"] == len(ids) and primary["verdict"] == "improvement"


# --------------------------------------------------------------------------- the grid


def grid_project(tmp_path) -> Project:
    proj = Project(tmp_path)
    n = 50
    rng = np.random.default_rng(3)
    base = rng.uniform(0.3, 0.7, n)
    effects = {"base": 0.0, "small": 0.012, "medium": 0.03, "large": 0.08, "same": 0.0}
    scores = {cid: {"ndcg@10": (base + effect + rng.normal(0, 0.04, n)).tolist()} for cid, effect in effects.items()}
    proj.write_reports(scores, qids(n))
    proj.write_queries(qids(n))
    return proj


def test_grid_holm_p_values_equal_statsmodels(tmp_path, capsys):
    proj = grid_project(tmp_path)
    code, out, _ = proj.cli(capsys, "compare", "--grid", "--json", "--resamples", "4000", "--thresholds", "")
    assert code == 0
    grid = json.loads(out)
    assert grid["baseline"] == "base"  # no params.yaml: the first configuration
    rows = grid["configs"]
    assert [r["config_id"] for r in rows] == ["small", "medium", "large", "same"]
    for raw_key, holm_key in (("p_bootstrap", "p_bootstrap_holm"), ("p_sign", "p_sign_holm")):
        raw = np.array([r[raw_key] for r in rows])
        expected = multipletests(raw, method="holm")[1]
        np.testing.assert_allclose([r[holm_key] for r in rows], expected, rtol=0, atol=1e-12)
        assert np.any(expected > raw)  # the correction is not a no-op on this data
    per_query = pl.read_parquet(proj.root / "reports" / "per_query.parquet")
    base = per_query.filter(pl.col("config_id") == "base")["ndcg@10"].to_numpy()
    for r in rows:
        cand = per_query.filter(pl.col("config_id") == r["config_id"])["ndcg@10"].to_numpy()
        wins, losses = int(np.sum(cand > base)), int(np.sum(cand < base))
        assert (r["wins"], r["losses"]) == (wins, losses)
        assert r["p_sign"] == pytest.approx(sps.binomtest(wins, wins + losses).pvalue)
    assert grid["best"] == "large"
    assert grid["indistinguishable_from_best"][0] == "large"
    assert "base" not in grid["indistinguishable_from_best"]
    assert sum(grid["winner_frequencies"].values()) == pytest.approx(1.0)
    assert grid["score_spread"]["narrow"] is False
    assert grid["thresholds"] is None


def test_grid_baseline_from_params_and_text(tmp_path, capsys):
    proj = grid_project(tmp_path)
    (proj.root / "params.yaml").write_text("grid:\n  baseline: medium\n")
    code, out, _ = proj.cli(capsys, "compare", "--grid", "--resamples", "1000", "--thresholds", "")
    assert code == 0
    assert out.startswith("grid: ndcg@10 vs baseline medium on 50 queries")
    assert "medium (baseline)" in out and "best: large" in out
    assert "winner by relevance threshold: not computed" in out
    code, out, _ = proj.cli(
        capsys, "compare", "--grid", "--baseline", "small", "--json", "--resamples", "500", "--thresholds", ""
    )
    assert json.loads(out)["baseline"] == "small"


def test_grid_winner_changes_with_the_relevance_threshold(tmp_path, capsys):
    """'lenient' puts a grade-1 document first everywhere; 'strict' puts the grade-3 document
    first on half the queries. hit@1 favours lenient at grade >= 1 and strict at grade >= 3."""
    proj = Project(tmp_path)
    ids = qids(10)
    qrels = proj.write_qrels([(q, f"{q}-hi", 3) for q in ids] + [(q, f"{q}-lo", 1) for q in ids])
    lenient = {q: [f"{q}-lo#0", f"{q}-lo#1", f"{q}-hi#0"] for q in ids}
    strict = {q: ([f"{q}-hi#0"] if i % 2 else [f"{q}-x#0", f"{q}-hi#0"]) for i, q in enumerate(ids)}
    metrics = ["hit@1", "ndcg@10"]
    scores = {}
    for cid, ranking in (("lenient", lenient), ("strict", strict)):
        run = proj.write_run(cid, ranking)
        doc_run = run.sort(["query_id", "rank"]).unique(["query_id", "doc_id"], keep="first", maintain_order=True)
        pq = evaluate(qrels, doc_run.select("query_id", "doc_id", "score"), metrics).per_query.sort("query_id")
        scores[cid] = {m: pq[m].to_list() for m in metrics}
    proj.write_reports(scores, ids, proj.contract(len(ids), metrics))
    proj.write_queries(ids)
    code, out, _ = proj.cli(capsys, "compare", "--grid", "--json", "--resamples", "500")
    assert code == 0
    thresholds = json.loads(out)["thresholds"]
    assert thresholds["winners"] == {"1": "lenient", "2": "strict", "3": "strict"}
    assert thresholds["means"]["1"] == {"lenient": 1.0, "strict": 0.5}
    assert thresholds["winner_changes"] is True
    code, text, _ = proj.cli(capsys, "compare", "--grid", "--resamples", "500")
    assert "the WINNER CHANGES with the threshold" in text
    # no document has grade 4: that threshold has no winner and does not count as a change
    code, out, _ = proj.cli(capsys, "compare", "--grid", "--json", "--resamples", "500", "--thresholds", "2,3,4")
    thresholds = json.loads(out)["thresholds"]
    assert thresholds["winners"] == {"2": "strict", "3": "strict", "4": None}
    assert thresholds["means"]["4"] is None and thresholds["winner_changes"] is False


def test_grid_refuses_configurations_on_different_queries(tmp_path, capsys):
    proj = Project(tmp_path)
    ids = qids(10)
    proj.write_reports({"a": {"ndcg@10": [0.5] * 10}}, ids)
    pl.DataFrame({"config_id": ["a"] * 10 + ["b"] * 8, "query_id": ids + ids[:8], "ndcg@10": [0.5] * 18}).write_parquet(
        proj.root / "reports" / "per_query.parquet"
    )
    code, _, err = proj.cli(capsys, "compare", "--grid", "--thresholds", "")
    assert code == 2 and "b lacks 2 queries (q008, q009)" in err


# --------------------------------------------------------------------------- REV:config


def test_rev_config_reads_reports_from_a_git_commit(tmp_path, capsys):
    proj = Project(tmp_path)
    ids = qids(30)
    old = np.linspace(0.2, 0.6, 30)
    proj.write_reports({"minilm/c256": {"ndcg@10": old.tolist()}}, ids)
    proj.write_queries(ids)
    git(proj.root, "init", "-q")
    git(proj.root, "add", "reports")
    git(proj.root, "commit", "-q", "-m", "old reports")
    proj.write_reports({"minilm/c256": {"ndcg@10": (old + 0.1).tolist()}}, ids)
    code, out, _ = proj.cli(capsys, "compare", "HEAD:minilm/c256", "minilm/c256", "--json", "--resamples", "500")
    assert code == 0
    result = json.loads(out)
    assert result["baseline"]["source"] == "git HEAD:reports/per_query.parquet"
    assert result["primary"]["baseline_mean"] == pytest.approx(old.mean())
    assert result["primary"]["candidate_mean"] == pytest.approx(old.mean() + 0.1)
    assert result["verdict"] == "improvement"
    # a commit-ish with a slash and a config id with one: split at the first colon
    git(proj.root, "branch", "feature/x")
    code, out, _ = proj.cli(capsys, "compare", "feature/x:minilm/c256", "minilm/c256", "--json", "--resamples", "500")
    assert code == 0 and json.loads(out)["primary"]["baseline_mean"] == pytest.approx(old.mean())
    code, _, err = proj.cli(capsys, "compare", "nosuchrev:minilm/c256", "minilm/c256")
    assert code == 2 and "nosuchrev:./reports/metrics.json" in err
    code, _, err = proj.cli(capsys, "compare", "HEAD:bm25/c256", "minilm/c256")
    assert code == 2 and "no configuration 'bm25/c256'; known: minilm/c256" in err


# --------------------------------------------------------------------------- pure helpers


def test_query_set_difference_counts_both_directions():
    assert pair.query_set_difference(["a", "b"], ["b", "a"]) is None
    message = pair.query_set_difference(["a", "b", "c"], ["b", "c", "d", "e"])
    assert message.startswith("query sets differ: 3 queries differ")
    assert "1 only in baseline (a)" in message and "2 only in candidate (d, e)" in message


def test_document_ranks_count_documents_not_chunks():
    run = pl.DataFrame(
        {"query_id": ["q"] * 5, "doc_id": ["d1", "d2", "d1", "d3", "d1"], "score": [0.6, 0.7, 0.9, 0.7, 0.8]}
    )  # a document scores its best chunk
    ranks = scoring.document_ranks(run)
    assert ranks.rows() == [("q", "d1", 1), ("q", "d2", 2), ("q", "d3", 3)]
    ranks = scoring.document_ranks(run, ties="trec_eval")  # trec_eval breaks ties doc_id descending
    assert ranks.rows() == [("q", "d1", 1), ("q", "d3", 2), ("q", "d2", 3)]


def test_grid_verdicts_are_the_decision_rule_over_the_grid(tmp_path, capsys):
    """Every row's verdict is stats.decide over the grid's raw bootstrap p-values, and `compare A B`
    alone gives the same pair its unadjusted verdict by the same rule."""
    proj = grid_project(tmp_path)
    _, out, _ = proj.cli(capsys, "compare", "--grid", "--json", "--resamples", "2000", "--thresholds", "")
    rows = json.loads(out)["configs"]
    decisions = stats.decide(
        [r["mean_difference"] for r in rows], [r["p_bootstrap"] for r in rows], [50] * len(rows), 0.05
    )
    assert [r["verdict"] for r in rows] == [d.verdict for d in decisions]
    assert [r["p_bootstrap_holm"] for r in rows] == [d.adjusted_p_value for d in decisions]
    for r in rows:
        _, out, _ = proj.cli(capsys, "compare", "base", r["config_id"], "--json", "--resamples", "2000")
        alone = json.loads(out)
        assert alone["primary"]["bootstrap_p_value"] == pytest.approx(r["p_bootstrap"], abs=1e-12)
        assert alone["verdict"] == stats.decide([r["mean_difference"]], [r["p_bootstrap"]], [50])[0].verdict


# --------------------------------------------------------------------------- SD and power


def test_compare_prints_and_writes_the_sd_of_differences_and_the_power_figure(tmp_path, capsys):
    """Cross-checked against numpy and statsmodels' power of the paired (one-sample) t-test."""
    project = grid_project(tmp_path)
    _, out, _ = project.cli(capsys, "compare", "base", "medium", "--json", "--resamples", "1000")
    result = json.loads(out)
    per_query = pl.read_parquet(project.root / "reports" / "per_query.parquet")
    base, medium = (
        per_query.filter(pl.col("config_id") == c).sort("query_id")["ndcg@10"].to_numpy() for c in ("base", "medium")
    )
    differences = medium - base
    sd, delta = float(np.std(differences, ddof=1)), float(differences.mean())
    assert result["primary"]["difference_sd"] == pytest.approx(sd, rel=1e-12)
    power = result["power"]
    assert power["sd"] == pytest.approx(sd, rel=1e-12) and power["n_queries"] == 50
    solver = TTestPower()
    assert power["queries_needed"] == math.ceil(solver.solve_power(effect_size=abs(delta) / sd, alpha=0.05, power=0.8))
    resolvable = solver.solve_power(nobs=50, alpha=0.05, power=0.8) * sd
    assert power["resolvable"] == pytest.approx(resolvable, rel=1e-4)
    assert power["command"] == f"releval power --sd {sd:.4g} --delta {abs(delta):.4g}"
    _, text, _ = project.cli(capsys, "compare", "base", "medium", "--resamples", "1000")
    line = text.splitlines()[5]
    assert line == (
        f"6. power: SD of per-query differences {sd:.4f}; {power['queries_needed']} queries would detect a true "
        f"difference of the observed size {abs(delta):.4f} with 80% power at alpha 0.05 (`{power['command']}`); "
        f"these 50 queries resolve {resolvable:.4f}"
    )
    # the printed command gives the same answer
    from releval.cli import main as cli_main

    assert cli_main(power["command"].split()[1:]) == 0
    assert capsys.readouterr().out.startswith(f"{power['queries_needed']} queries to detect")


def test_power_figure_of_a_difference_too_small_to_detect(project, capsys):
    """'noise' moves every query but its mean difference is 0 up to rounding."""
    _, out, _ = project.cli(capsys, "compare", "base", "noise", "--json", "--resamples", "500")
    power = json.loads(out)["power"]
    assert power["queries_needed"] is None and power["command"] is None and power["beyond_max"] is True
    _, text, _ = project.cli(capsys, "compare", "base", "noise", "--resamples", "500")
    assert "more than 1,000,000,000 queries would be needed" in text.splitlines()[5]


def test_grid_json_carries_each_sd_and_what_would_settle_the_best(tmp_path, capsys):
    proj = Project(tmp_path)
    rng = np.random.default_rng(11)
    base = rng.uniform(0.3, 0.7, 40)
    scores = {name: base + shift + rng.normal(0, 0.05, 40) for name, shift in (("a", 0.0), ("b", 0.03), ("c", 0.035))}
    proj.write_reports({name: {"ndcg@10": values.tolist()} for name, values in scores.items()}, qids(40))
    proj.write_queries(qids(40))
    _, out, _ = proj.cli(capsys, "compare", "--grid", "--json", "--resamples", "2000", "--thresholds", "")
    grid = json.loads(out)
    per_query = pl.read_parquet(proj.root / "reports" / "per_query.parquet")
    score = lambda c: per_query.filter(pl.col("config_id") == c).sort("query_id")["ndcg@10"].to_numpy()  # noqa: E731
    for row in grid["configs"]:
        assert row["difference_sd"] == pytest.approx(np.std(score(row["config_id"]) - score("a"), ddof=1))
    assert len(grid["indistinguishable_from_best"]) > 1
    assert grid["runner_up"] == grid["indistinguishable_from_best"][1]
    differences = score(grid["best"]) - score(grid["runner_up"])
    assert grid["settle"]["sd"] == pytest.approx(np.std(differences, ddof=1))
    assert grid["settle"]["mean_difference"] == pytest.approx(differences.mean())
    _, text, _ = proj.cli(capsys, "compare", "--grid", "--resamples", "2000", "--thresholds", "")
    assert text.splitlines()[-1].startswith(
        f"to settle the best: {grid['best']} vs {grid['runner_up']}: SD of per-query"
    )


# --------------------------------------------------------------------------- every format score reads


def trec_project(tmp_path) -> tuple[Project, list[str]]:
    """Qrels and two runs as TREC text files, and reports to take the contract from."""
    proj, ids = scored_project(tmp_path)
    qrels = pl.read_parquet(proj.root / "data" / "work" / "qrels.parquet")
    (proj.root / "q.trec").write_text("".join(f"{q} 0 {d} {g}\n" for q, d, g in qrels.iter_rows()))
    (proj.root / "q.jsonl").write_text(
        "".join(json.dumps({"query_id": q, "doc_id": d, "grade": g}) + "\n" for q, d, g in qrels.iter_rows())
    )
    (proj.root / "data" / "work" / "qrels.parquet").unlink()  # nothing to fall back on
    a = [f"{q} Q0 {q}-{d} {r} {10 - r} a" for q in ids for r, d in enumerate(["x", "rel", "low"], 1)]
    b = [f"{q} Q0 {q}-{d} {r} {10 - r} b" for q in ids for r, d in enumerate(["rel", "low", "x"], 1)]
    (proj.root / "a.trec").write_text("\n".join(a) + "\n")
    (proj.root / "b.trec").write_text("\n".join(b) + "\n")
    return proj, ids


def test_compare_reads_trec_and_jsonl_qrels_like_score(tmp_path, capsys):
    """The issue's command, which crashed with a polars traceback."""
    proj, ids = trec_project(tmp_path)
    results = []
    for qrels in ("q.trec", "q.jsonl"):
        code, out, err = proj.cli(
            capsys, "compare", "a.trec", "b.trec", "--qrels", qrels, "--json", "--resamples", "500"
        )
        assert code == 0, err
        results.append(json.loads(out))
    assert results[0]["primary"] == results[1]["primary"]
    primary = results[0]["primary"]
    assert primary["wins"] == len(ids) and primary["verdict"] == "improvement"
    # the same numbers `releval score` gives each run against the same qrels
    for name, mean in (("a.trec", primary["baseline_mean"]), ("b.trec", primary["candidate_mean"])):
        code, out, _ = proj.cli(capsys, "score", "--qrels", "q.trec", "--run", name, "--metrics", "ndcg@10")
        assert code == 0 and json.loads(out)["mean"]["ndcg@10"] == pytest.approx(mean, abs=1e-12)


def test_compare_and_gate_take_the_formats_score_takes(tmp_path, capsys):
    proj, ids = trec_project(tmp_path)
    (proj.root / "q.txt.judgments").write_text((proj.root / "q.jsonl").read_text())
    (proj.root / "b.ranking").write_text((proj.root / "b.trec").read_text())
    code, out, err = proj.cli(
        capsys, "compare", "a.trec", "b.ranking", "--qrels", "q.txt.judgments", "--qrels-format", "jsonl",
        "--run-format", "trec", "--json", "--resamples", "500",
    )  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["primary"]["wins"] == len(ids)
    code, out, err = proj.cli(capsys, "gate", "--baseline", "b.trec", "--candidate", "a.trec", "--qrels", "q.trec")
    assert code == 1 and "gate: FAIL — significant regression" in out, err
    code, _, err = proj.cli(capsys, "compare", "a.trec", "b.trec", "--qrels", "q.trec", "--qrels-format", "parquet")
    assert code == 2 and "q.trec" in err and "Traceback" not in err


# --------------------------------------------------------------------------- slices and the minimum


def test_slices_under_the_minimum_get_numbers_but_no_verdict(tmp_path, capsys):
    proj = Project(tmp_path)
    ids = qids(40)
    base = np.full(40, 0.5)
    cand = base + np.where(np.arange(40) < 3, 0.4, 0.0) + np.tile([0.05, -0.05], 20)
    proj.write_reports({"a": {"ndcg@10": base.tolist()}, "b": {"ndcg@10": cand.tolist()}}, ids)
    slices = {q: (["tiny", "half"] if i < 3 else ["half"] if i < 20 else ["rest"]) for i, q in enumerate(ids)}
    proj.write_queries(ids, slices=slices)
    _, out, _ = proj.cli(capsys, "compare", "a", "b", "--json", "--resamples", "1000")
    result = json.loads(out)
    assert result["minimum_slice_queries"] == stats.MIN_SLICE_QUERIES == 10
    tiny = result["slices"]["tiny"]
    assert tiny["n_queries"] == 3 and tiny["verdict"] == "too few queries" and tiny["adjusted_p_value"] is None
    assert tiny["mean_difference"] == pytest.approx(0.4 + 0.05 / 3)
    eligible = ["half", "rest"]
    raw = [result["slices"][name]["bootstrap_p_value"] for name in eligible]
    holm = multipletests(raw, method="holm")[1]
    for name, adjusted in zip(eligible, holm):
        assert result["slices"][name]["adjusted_p_value"] == pytest.approx(adjusted, abs=1e-12)
        assert result["slices"][name]["family_size"] == 2
    _, text, _ = proj.cli(capsys, "compare", "a", "b", "--resamples", "1000")
    line = next(x for x in text.splitlines() if "slice tiny" in x)
    delta = f"{tiny['mean_difference']:+.4f}"
    assert line == f"   slice tiny (3 queries): Δ {delta}, W/L/T 3/0/0 → too few queries for a verdict (< 10)"
    # --slice on a slice under the minimum: numbers, no verdict
    _, out, _ = proj.cli(capsys, "compare", "a", "b", "--slice", "tiny", "--json", "--resamples", "1000")
    assert json.loads(out)["verdict"] == "too few queries"


# --------------------------------------------------------------------------- thin evidence


def test_queries_needed_on_a_hand_computed_example():
    """SD of per-query differences 0.15, observed difference 0.03, 85 queries: the normal
    approximation ((1.95996 + 0.84162) * 0.15 / 0.03)^2 = 14.0079^2 = 196.2 gives 197; the paired
    t-test's heavier tails need two more, 199 (statsmodels' TTestPower: 198.15, rounded up)."""
    assert stats.queries_needed(0.15, 0.03) == 199
    assert math.ceil(TTestPower().solve_power(effect_size=0.03 / 0.15, alpha=0.05, power=0.8)) == 199
    figure = stats.power_figure(0.15, 0.03, 85)
    assert thin_evidence(figure, "ndcg@10") == (
        "85 queries; to detect the observed ndcg@10 difference of 0.0300 at 80% power you would need about "
        "199 queries (SD of per-query differences 0.1500; `releval power --sd 0.15 --delta 0.03`)"
    )
    assert thin_evidence(stats.power_figure(0.15, 0.03, 199), "ndcg@10") is None  # enough queries
    # A difference under a quarter of what 85 queries resolve is about zero: say what they resolve.
    resolvable = TTestPower().solve_power(nobs=85, alpha=0.05, power=0.8) * 0.15
    assert thin_evidence(stats.power_figure(0.15, 0.001, 85), "ndcg@10") == (
        f"85 queries; the observed ndcg@10 difference +0.0010 is about zero next to the smallest these queries "
        f"resolve, {resolvable:.4f} at 80% power (SD of per-query differences 0.1500): a smaller true difference "
        "would go unseen"
    )


def thin_project(tmp_path) -> Project:
    """20 queries: a small gain lost in the noise, none at all, and a large one."""
    proj = Project(tmp_path)
    n = 20
    rng = np.random.default_rng(14)
    base = rng.uniform(0.3, 0.7, n)
    effects = {"base": 0.0, "small": 0.02, "same": 0.0, "large": 0.2}
    scores = {cid: {"ndcg@10": (base + effect + rng.normal(0, 0.05, n)).tolist()} for cid, effect in effects.items()}
    scores["same"] = {"ndcg@10": (np.array(scores["base"]["ndcg@10"]) + rng.normal(0, 0.05, n)).tolist()}
    proj.write_reports(scores, qids(n))
    proj.write_queries(qids(n))
    return proj


def test_an_inconclusive_comparison_on_few_queries_says_how_many_would_settle_it(tmp_path, capsys):
    project = thin_project(tmp_path)
    _, out, _ = project.cli(capsys, "compare", "base", "small", "--json", "--resamples", "1000")
    result = json.loads(out)
    assert result["verdict"] == "inconclusive"
    sd, delta = result["power"]["sd"], result["primary"]["mean_difference"]
    needed = math.ceil(TTestPower().solve_power(effect_size=abs(delta) / sd, alpha=0.05, power=0.8))
    assert needed > 20
    expected = (
        f"20 queries; to detect the observed ndcg@10 difference of {abs(delta):.4f} at 80% power you would need "
        f"about {needed} queries (SD of per-query differences {sd:.4f}; `{result['power']['command']}`)"
    )
    assert result["thin_evidence"] == expected
    _, text, _ = project.cli(capsys, "compare", "base", "small", "--resamples", "1000")
    assert f"   thin evidence: {expected}" in text.splitlines()
    # A significant difference is settled: nothing to add.
    _, text, _ = project.cli(capsys, "compare", "base", "large", "--resamples", "1000")
    assert "IMPROVEMENT" in text and "thin evidence" not in text


def test_the_grid_says_when_its_queries_are_too_few_for_the_differences_seen(tmp_path, capsys):
    project = thin_project(tmp_path)
    _, out, _ = project.cli(capsys, "compare", "--grid", "--json", "--resamples", "1000", "--thresholds", "")
    grid = json.loads(out)
    inconclusive = [r for r in grid["configs"] if r["verdict"] == "inconclusive"]
    assert {r["config_id"] for r in inconclusive} >= {"small", "same"}
    sentence = grid["thin_evidence"]
    assert sentence.startswith(f"20 queries are too few for {len(inconclusive)} of the 3 differences from base")
    small = next(r for r in inconclusive if r["config_id"] == "small")
    needed = stats.queries_needed(small["difference_sd"], small["mean_difference"])
    assert f"small's {small['mean_difference']:+.4f}, at 80% power you would need about {needed} queries" in sentence
    assert "(same) differ from it by about zero" in sentence
    _, text, _ = project.cli(capsys, "compare", "--grid", "--resamples", "1000", "--thresholds", "")
    assert f"thin evidence: {sentence}" in text.splitlines()
