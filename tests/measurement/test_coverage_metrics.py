"""Metrics for incomplete judgments: bpref, condensed lists, saturated recall cutoffs.

bpref and condensed nDCG are checked against trec_eval (pytrec_eval) on random runs with
unjudged docs and tied scores, and against small examples computed by hand.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import polars as pl
import pytest
import pytrec_eval

from releval.errors import InputError
from releval.measurement.metrics import (
    SATURATION_SHARE,
    Contract,
    Metric,
    condense,
    evaluate,
    parse_metric,
    saturated_cutoff,
)
from releval.tables import DOC_RUN
from support.frames import qrels_frame, run_frame


def ranked(doc_ids: list[str]) -> dict[str, float]:
    """Scores that put ``doc_ids`` in this order (no ties)."""
    return {doc: float(len(doc_ids) - rank) for rank, doc in enumerate(doc_ids)}


def incomplete_collection(seed: int, n_queries: int = 50):
    """pytrec_eval dicts: runs with many unjudged docs and tied scores, judged docs the run misses,
    queries whose judgments are all non-relevant, queries with no judged retrieved doc."""
    rng = np.random.default_rng(seed)
    judgments, scores = {}, {}
    for i in range(n_queries):
        query = f"q{i}"
        n_docs = int(rng.integers(1, 120))
        docs = [f"d{j}" for j in rng.choice(300, n_docs, replace=False).tolist()]
        scores[query] = dict(zip(docs, np.round(rng.random(n_docs) * 4, 1).tolist()))
        n_judged = 0 if i % 10 == 8 else int(rng.integers(1, n_docs + 1)) // 2
        judged = set(rng.choice(docs, n_judged, replace=False).tolist())
        judged |= {f"x{j}" for j in rng.choice(50, int(rng.integers(1, 8)), replace=False).tolist()}
        top_grade = 1 if i % 10 == 5 else 4  # i % 10 == 5: every judgment non-relevant
        judgments[query] = {doc: int(rng.integers(0, top_grade)) for doc in judged}
    return judgments, scores


# --- bpref ------------------------------------------------------------------------------------


def test_bpref_parses_without_a_cutoff_only():
    assert parse_metric("bpref") == Metric("bpref")
    assert parse_metric("BPREF").name == "bpref"
    with pytest.raises(InputError, match="takes no cutoff"):
        parse_metric("bpref@10")


def test_bpref_hand_computed():
    # q1: R = 3 (r1, r2, r3), N = 2 (n1, n2); u1, u2 unjudged; r3 not retrieved. Ranking:
    #   r1 u1 n1 r2 u2 n2
    #   r1: no judged non-relevant above            -> 1
    #   r2: 1 above -> 1 - min(1, 3) / min(3, 2)    -> 1 - 1/2 = 0.5
    #   bpref = (1 + 0.5) / 3 = 0.5
    # q2: R = 1 (r1), N = 3 (n1, n2, n3). Ranking n1 u1 n2 r1:
    #   r1: 2 above -> 1 - min(2, 1) / min(1, 3) = 0 -> bpref = 0 / 1 = 0
    # q3: R = 2, N = 0. Ranking u1 r2 u2 r1 -> each adds 1 -> bpref = 2 / 2 = 1
    # q4: R = 2 (r1, r2), N = 4. Ranking n1 r1 n2 n3 r2:
    #   r1: 1 - 1/2 = 0.5; r2: 1 - min(3, 2)/min(2, 4) = 0 -> bpref = 0.5 / 2 = 0.25
    judgments = {
        "q1": {"r1": 2, "r2": 1, "r3": 1, "n1": 0, "n2": 0},
        "q2": {"r1": 1, "n1": 0, "n2": 0, "n3": 0},
        "q3": {"r1": 1, "r2": 3},
        "q4": {"r1": 1, "r2": 1, "n1": 0, "n2": 0, "n3": 0, "n4": 0},
    }
    scores = {
        "q1": ranked(["r1", "u1", "n1", "r2", "u2", "n2"]),
        "q2": ranked(["n1", "u1", "n2", "r1"]),
        "q3": ranked(["u1", "r2", "u2", "r1"]),
        "q4": ranked(["n1", "r1", "n2", "n3", "r2"]),
    }
    per_query = evaluate(qrels_frame(judgments), run_frame(scores), ["bpref"]).to_dict()["per_query"]
    assert {query: values["bpref"] for query, values in per_query.items()} == pytest.approx(
        {"q1": 0.5, "q2": 0.0, "q3": 1.0, "q4": 0.25}, abs=1e-12
    )
    reference = pytrec_eval.RelevanceEvaluator(judgments, {"bpref"}).evaluate(scores)
    assert {query: values["bpref"] for query, values in reference.items()} == pytest.approx(
        {"q1": 0.5, "q2": 0.0, "q3": 1.0, "q4": 0.25}, abs=1e-12
    )


def test_bpref_ignores_unjudged_docs_where_map_does_not():
    judgments = {"q": {"r1": 1, "r2": 1, "n1": 0}}
    without = run_frame({"q": ranked(["r1", "n1", "r2"])})
    with_unjudged = run_frame({"q": ranked(["u1", "r1", "u2", "u3", "n1", "u4", "r2", "u5"])})
    qrels = qrels_frame(judgments)
    bpref = [evaluate(qrels, run, ["bpref", "map"]).mean for run in (without, with_unjudged)]
    assert bpref[0]["bpref"] == bpref[1]["bpref"] == pytest.approx((1 + (1 - 1 / 1)) / 2)
    assert bpref[0]["map"] != bpref[1]["map"]


def test_bpref_threshold_makes_lower_grades_non_relevant():
    # threshold 2: r (grade 2) is the only relevant doc, g1 (grade 1) counts as non-relevant: R = 1, N = 2.
    # Ranking g1 r n -> 1 - min(1, 1) / min(1, 2) = 0; at threshold 1 (R = 2, N = 1): g1 adds 1, r adds 1 -> 1.
    qrels = qrels_frame({"q": {"g1": 1, "r": 2, "n": 0}})
    run = run_frame({"q": ranked(["g1", "r", "n"])})
    assert evaluate(qrels, run, ["bpref"], Contract(rel_threshold=2)).mean["bpref"] == 0.0
    assert evaluate(qrels, run, ["bpref"]).mean["bpref"] == 1.0


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("level", [1, 2])
def test_bpref_matches_trec_eval_with_unjudged_docs_and_ties(seed, level):
    judgments, scores = incomplete_collection(seed)
    contract = dataclasses.replace(Contract.trec_eval(), rel_threshold=level)
    evaluation = evaluate(qrels_frame(judgments), run_frame(scores), ["bpref", "map"], contract)
    reference = pytrec_eval.RelevanceEvaluator(judgments, {"bpref"}, relevance_level=level).evaluate(scores)
    per_query = evaluation.to_dict()["per_query"]
    assert set(per_query) == set(reference)
    assert evaluation.counts["queries_with_tied_scores"]["all"] > 0
    for query, values in reference.items():
        assert per_query[query]["bpref"] == pytest.approx(values["bpref"], abs=1e-12), query
    assert evaluation.mean["bpref"] == pytest.approx(np.mean([v["bpref"] for v in reference.values()]), abs=1e-12)
    assert 0 < evaluation.mean["bpref"] < 1


def test_bpref_follows_the_query_policies_of_map():
    qrels = qrels_frame({"a": {"r": 1, "n": 0}, "none": {"n": 0}, "missing": {"r": 1}})
    run = run_frame({"a": ranked(["n", "r"]), "none": ranked(["n"])})
    for contract in (Contract(), Contract.trec_eval(), Contract(no_relevant="zero", missing_in_run="zero")):
        queries = [evaluate(qrels, run, [name], contract).per_query["query_id"].to_list() for name in ("bpref", "map")]
        assert queries[0] == queries[1]
    by_contract = {
        contract: evaluate(qrels, run, ["bpref"], contract).to_dict()["per_query"]
        for contract in (Contract(), Contract.trec_eval())
    }
    # default: "none" excluded (no relevant doc), "missing" scores 0; a: 1 - min(1,1)/min(1,1) = 0
    assert by_contract[Contract()] == {"a": {"bpref": 0.0}, "missing": {"bpref": 0.0}}
    assert by_contract[Contract.trec_eval()] == {"a": {"bpref": 0.0}, "none": {"bpref": 0.0}}


# --- condensed lists --------------------------------------------------------------------------


def test_condense_keeps_judged_rows_of_any_grade_in_input_order():
    qrels = qrels_frame({"q": {"a": 2, "b": 0}, "r": {"c": 1}, "only_judged": {"z": 1}})
    run = pl.DataFrame(
        {
            "query_id": ["q", "q", "q", "r", "r", "s"],
            "doc_id": ["u", "b", "a", "c", "u", "a"],
            "score": [3.0, 2.0, 1.0, 5.0, 6.0, 1.0],
            "rank": [1, 2, 3, 2, 1, 1],
        }
    )
    condensed = condense(run, qrels)
    assert condensed.schema == DOC_RUN.schema
    assert condensed.rows() == [("q", "b", 2.0), ("q", "a", 1.0), ("r", "c", 5.0)]
    assert condense(condensed, qrels).equals(condensed)


def test_condense_names_bad_input():
    qrels = qrels_frame({"q": {"a": 1}})
    with pytest.raises(InputError, match="run.tsv.*score"):
        condense(pl.DataFrame({"query_id": ["q"], "doc_id": ["a"]}), qrels, run_source="run.tsv")
    with pytest.raises(InputError, match="qrels.tsv:2.*doc_id"):
        condense(run_frame({"q": {"a": 1.0}}), qrels_frame({"q": {"a": 1}}).vstack(qrels), qrels_source="qrels.tsv")


def test_condensed_ndcg_hand_computed():
    # Judged: a = 2, b = 0, c = 1, d = 3 (d not retrieved). Full ranking: u1 a u2 b c (u unjudged).
    # Linear gain (trec_eval contract). IDCG@10 = 3/log2(2) + 2/log2(3) + 1/log2(4) = 3.5 + 2/log2(3).
    # Full:      DCG = 2/log2(3) + 0/log2(5) + 1/log2(6)                         (a at 2, b at 4, c at 5)
    # Condensed: a b c at ranks 1..3: DCG = 2/log2(2) + 0/log2(3) + 1/log2(4) = 2 + 0.5 = 2.5
    qrels = qrels_frame({"q": {"a": 2, "b": 0, "c": 1, "d": 3}})
    run = run_frame({"q": ranked(["u1", "a", "u2", "b", "c"])})
    ideal = 3.5 + 2 / math.log2(3)
    full = evaluate(qrels, run, ["ndcg@10"], Contract.trec_eval()).mean["ndcg@10"]
    condensed = evaluate(qrels, condense(run, qrels), ["ndcg@10"], Contract.trec_eval()).mean["ndcg@10"]
    assert full == pytest.approx((2 / math.log2(3) + 1 / math.log2(6)) / ideal, abs=1e-12)
    assert condensed == pytest.approx(2.5 / ideal, abs=1e-12)  # 0.52500...


def test_condensing_keeps_tied_docs_in_the_engine_order():
    # Tied at 1.0, trec_eval orders doc_ids descending: "b" before "a"; the unjudged "c" goes too.
    qrels = qrels_frame({"q": {"a": 1, "b": 0}})
    run = run_frame({"q": {"c": 1.0, "a": 1.0, "b": 1.0}})
    condensed = evaluate(qrels, condense(run, qrels), ["mrr"], Contract.trec_eval()).mean["mrr"]
    assert condensed == 0.5
    assert evaluate(qrels, condense(run, qrels), ["mrr"]).mean["mrr"] == 1.0  # docid-asc: "a" first


@pytest.mark.parametrize("seed", range(6))
def test_condensed_ndcg_matches_trec_eval_on_the_judged_ranking(seed):
    judgments, scores = incomplete_collection(50 + seed)
    judged_only = {
        query: {doc: score for doc, score in docs.items() if doc in judgments.get(query, {})}
        for query, docs in scores.items()
    }
    judged_only = {query: docs for query, docs in judged_only.items() if docs}
    qrels, run = qrels_frame(judgments), run_frame(scores)
    condensed = evaluate(qrels, condense(run, qrels), ["ndcg@10", "bpref"], Contract.trec_eval())
    reference = pytrec_eval.RelevanceEvaluator(judgments, {"ndcg_cut.10", "bpref"}).evaluate(judged_only)
    per_query = condensed.to_dict()["per_query"]
    assert set(per_query) == set(reference)
    for query, values in reference.items():
        assert per_query[query]["ndcg@10"] == pytest.approx(values["ndcg_cut_10"], abs=1e-12), query
        assert per_query[query]["bpref"] == pytest.approx(values["bpref"], abs=1e-12), query  # condensing keeps bpref
    full = evaluate(qrels, run, ["ndcg@10"], Contract.trec_eval()).to_dict()["per_query"]
    raised = [query for query in per_query if per_query[query]["ndcg@10"] > full[query]["ndcg@10"] + 1e-12]
    lowered = [query for query in per_query if per_query[query]["ndcg@10"] < full[query]["ndcg@10"] - 1e-12]
    assert raised and not lowered  # removing unjudged (gain 0) docs only moves judged ones up


# --- saturated cutoffs ------------------------------------------------------------------------


def test_saturation_share_default():
    assert SATURATION_SHARE == 0.2


@pytest.mark.parametrize(
    "metric, documents, share, saturated",
    [
        ("recall@100", 500, SATURATION_SHARE, True),  # 100 >= 0.2 * 500
        ("recall@99", 500, SATURATION_SHARE, False),
        ("recall@100", 501, SATURATION_SHARE, False),
        ("RECALL@1000", 1400, SATURATION_SHARE, True),
        ("recall@10", 1000, 0.01, True),
        ("recall@10", 1000, 0.011, False),
        ("recall@1", 1, 1.0, True),
        (Metric("recall", 50), 200, SATURATION_SHARE, True),
        ("ndcg@1000", 100, SATURATION_SHARE, False),
        ("p@1000", 100, SATURATION_SHARE, False),
        ("hit@1000", 100, SATURATION_SHARE, False),
        ("judged@1000", 100, SATURATION_SHARE, False),
        ("map@1000", 100, SATURATION_SHARE, False),
        ("map", 100, SATURATION_SHARE, False),
        ("rprec", 1, SATURATION_SHARE, False),
        ("bpref", 1, SATURATION_SHARE, False),
    ],
)
def test_saturated_cutoff(metric, documents, share, saturated):
    assert saturated_cutoff(metric, documents, share) is saturated


def test_saturated_cutoff_default_share():
    assert saturated_cutoff("recall@20", 100) is True
    assert saturated_cutoff("recall@19", 100) is False


@pytest.mark.parametrize(
    "metric, documents, share, field",
    [
        ("recall@10", 0, 0.2, "documents"),
        ("recall@10", -5, 0.2, "documents"),
        ("recall@10", 10.5, 0.2, "documents"),
        ("recall@10", True, 0.2, "documents"),
        ("recall@10", 100, 0.0, "share"),
        ("recall@10", 100, 1.5, "share"),
        ("recall@10", 100, float("nan"), "share"),
        ("recall", 100, 0.2, "metrics"),
        ("bogus@10", 100, 0.2, "metrics"),
    ],
)
def test_saturated_cutoff_rejects_bad_input(metric, documents, share, field):
    with pytest.raises(InputError) as error:
        saturated_cutoff(metric, documents, share)
    assert error.value.field == field


# --- names ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name, metric", [("judged@10", Metric("judged", 10)), ("bpref", Metric("bpref"))])
def test_coverage_metric_names_parse(name, metric):
    assert parse_metric(name) == metric
    assert parse_metric(metric.name) == metric
