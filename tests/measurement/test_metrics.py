"""The metric engine: textbook values, trec_eval (pytrec_eval) agreement, ties, policies, contracts, bad input."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
import pytrec_eval

from releval.errors import InputError
from releval.measurement.metrics import (
    Contract,
    ContractMismatchError,
    Metric,
    contract_differences,
    ensure_same_contract,
    evaluate,
    grade_gains,
    parse_metric,
)
from support.frames import qrels_frame, run_frame

TREC_EVAL_NAMES = {"map": "map", "mrr": "recip_rank", "rprec": "Rprec"}
TREC_EVAL_CUT_NAMES = {
    "ndcg": "ndcg_cut_{k}",
    "map": "map_cut_{k}",
    "recall": "recall_{k}",
    "p": "P_{k}",
    "hit": "success_{k}",
}
TREC_EVAL_MEASURES = {
    "ndcg_cut.5,10,100",
    "map",
    "map_cut.10,100",
    "recall.5,10,100",
    "P.5,10,100",
    "recip_rank",
    "Rprec",
    "success.1,5,10",
}
CROSS_CHECKED = [
    "ndcg@5",
    "ndcg@10",
    "ndcg@100",
    "map",
    "map@10",
    "map@100",
    "recall@5",
    "recall@10",
    "recall@100",
    "p@5",
    "p@10",
    "p@100",
    "mrr",
    "rprec",
    "hit@1",
    "hit@5",
    "hit@10",
]


def ranked_example(grades_in_rank_order: list[int], judged_grades: list[int]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """One query whose run has these grades at ranks 1..n; unretrieved judged docs make up ``judged_grades``."""
    run = {f"r{rank:03d}": float(100 - rank) for rank in range(len(grades_in_rank_order))}
    judged = {f"r{rank:03d}": grade for rank, grade in enumerate(grades_in_rank_order)}
    unretrieved = sorted(judged_grades, reverse=True)
    for grade in sorted((g for g in grades_in_rank_order if g > 0), reverse=True):
        unretrieved.remove(grade)
    judged.update({f"u{i:03d}": grade for i, grade in enumerate(unretrieved)})
    return qrels_frame({"q": judged}), run_frame({"q": run})


def random_collection(seed: int, n_queries: int = 60, tied: bool = False):
    """Graded judgments and a run as pytrec_eval dicts: short and long lists, unjudged docs, policy edge cases."""
    rng = np.random.default_rng(seed)
    judgments, scores = {}, {}
    for i in range(n_queries):
        query = f"q{i}"
        n_docs = int(rng.integers(1, 150))
        docs = [f"d{j}" for j in rng.choice(400, n_docs, replace=False).tolist()]
        values = np.round(rng.random(n_docs) * 5, 1) if tied else rng.permutation(n_docs).astype(float)
        if i % 10 != 3:  # judged but absent from the run
            scores[query] = dict(zip(docs, values.tolist()))
        judged_docs = set(rng.choice(docs, min(n_docs, int(rng.integers(1, 40))), replace=False).tolist())
        judged_docs |= {f"d{j}" for j in rng.choice(400, 10, replace=False).tolist()}
        top_grade = 0 if i % 10 == 5 else 4  # queries with no relevant judgment
        if i % 10 != 7:  # in the run without judgments
            judgments[query] = {doc: int(rng.integers(0, top_grade)) if top_grade else 0 for doc in judged_docs}
    return judgments, scores


def trec_eval_values(judgments, scores, relevance_level: int = 1) -> dict[str, dict[str, float]]:
    return pytrec_eval.RelevanceEvaluator(judgments, TREC_EVAL_MEASURES, relevance_level=relevance_level).evaluate(
        scores
    )


def trec_eval_name(name: str) -> str:
    metric = parse_metric(name)
    if metric.k is None:
        return TREC_EVAL_NAMES[metric.kind]
    return TREC_EVAL_CUT_NAMES[metric.kind].format(k=metric.k)


def assert_matches_trec_eval(evaluation, reference, names) -> None:
    per_query = evaluation.to_dict()["per_query"]
    assert set(per_query) == set(reference)
    for query, values in reference.items():
        for name in names:
            assert per_query[query][name] == pytest.approx(values[trec_eval_name(name)], abs=1e-9), (query, name)
    for name in names:
        expected = float(np.mean([values[trec_eval_name(name)] for values in reference.values()]))
        assert evaluation.mean[name] == pytest.approx(expected, abs=1e-9), name


# --- naive reference for the metrics trec_eval lacks (and for exponential gain) ---------------


def reference_values(judged: dict[str, int], scored: dict[str, float], k: int, gain: str) -> dict[str, float]:
    ranking = sorted(scored, key=lambda doc: (-scored[doc], doc))
    grades = [judged.get(doc, 0) for doc in ranking]
    to_gain = (lambda g: 2.0**g - 1) if gain == "exponential" else float
    top = grades[:k]
    dcg = sum(to_gain(g) / math.log2(rank + 2) for rank, g in enumerate(top))
    ideal = sum(to_gain(g) / math.log2(rank + 2) for rank, g in enumerate(sorted(judged.values(), reverse=True)[:k]))
    best_top = sum(to_gain(g) / math.log2(rank + 2) for rank, g in enumerate(sorted(top, reverse=True)))
    first_hit = next((rank + 1 for rank, g in enumerate(top) if g >= 1), None)
    judged_top = sum(doc in judged for doc in ranking[:k])
    return {
        "dcg": dcg,
        "ndcg": dcg / ideal if ideal else 0.0,
        "ceiling": best_top / ideal if ideal else 0.0,
        "mrr": 1.0 / first_hit if first_hit else 0.0,
        "judged": judged_top / min(k, len(ranking)) if ranking else 0.0,
    }


# --- metric names ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, kind, k",
    [
        ("ndcg@10", "ndcg", 10),
        ("NDCG@10", "ndcg", 10),
        ("dcg@3", "dcg", 3),
        ("recall@100", "recall", 100),
        ("p@10", "p", 10),
        ("precision@5", "p", 5),
        ("rprec", "rprec", None),
        ("mrr", "mrr", None),
        ("mrr@10", "mrr", 10),
        ("map", "map", None),
        ("map@100", "map", 100),
        ("hit@5", "hit", 5),
        ("success@5", "hit", 5),
        ("judged@10", "judged", 10),
        ("ceiling@10", "ceiling", 10),
    ],
)
def test_parse_metric_names(name, kind, k):
    assert parse_metric(name) == Metric(kind, k)


@pytest.mark.parametrize(
    "name, message",
    [
        ("ndgc@10", "unknown metric"),
        ("ndcg@0", "whole number > 0"),
        ("p@-3", "whole number > 0"),
        ("recall@ten", "whole number > 0"),
        ("ndcg", "needs a cutoff"),
        ("rprec@10", "takes no cutoff"),
        ("", "unknown metric"),
    ],
)
def test_bad_metric_names_are_clear_errors(name, message):
    with pytest.raises(InputError, match=message) as caught:
        parse_metric(name)
    assert caught.value.field == "metrics"


def test_metric_names_are_canonical_in_the_output():
    qrels, run = ranked_example([1, 0], [1])
    evaluation = evaluate(qrels, run, ["NDCG@2", "success@1", "precision@2", "ndcg@2"])
    assert list(evaluation.mean) == ["ndcg@2", "hit@1", "p@2"]
    assert evaluation.per_query.columns == ["query_id", "ndcg@2", "hit@1", "p@2"]


# --- textbook values (exponential gain) -----------------------------------------------------


def test_textbook_ndcg_and_average_precision():
    qrels, run = ranked_example([2, 0, 3, 1, 0, 2, 0, 1, 0, 1], judged_grades=[3, 2, 2, 1, 1, 1])
    evaluation = evaluate(qrels, run, ["ndcg@10", "map"])
    assert evaluation.mean["ndcg@10"] == pytest.approx(0.7438, abs=1e-4)
    assert evaluation.mean["map"] == pytest.approx(0.7181, abs=1e-4)


def test_textbook_second_ranking_assumes_the_same_six_judged_documents():
    # 0.930 holds when the judged grades are exactly the six retrieved relevant ones, [3, 2, 2, 1, 1, 1]
    # (IDCG@10 = 11.567); one more relevant document left unretrieved would lower it.
    qrels, run = ranked_example([3, 0, 2, 2, 0, 1, 0, 1, 0, 1], judged_grades=[3, 2, 2, 1, 1, 1])
    assert evaluate(qrels, run, ["ndcg@10"]).mean["ndcg@10"] == pytest.approx(0.930, abs=5e-4)
    qrels, run = ranked_example([3, 0, 2, 2, 0, 1, 0, 1, 0, 1], judged_grades=[3, 2, 2, 1, 1, 1, 1])
    assert evaluate(qrels, run, ["ndcg@10"]).mean["ndcg@10"] < 0.92


def test_hand_computed_small_metrics():
    qrels, run = ranked_example([0, 2, 0, 1], judged_grades=[2, 1, 1])
    values = evaluate(
        qrels, run, ["dcg@2", "p@4", "recall@4", "rprec", "mrr", "mrr@1", "hit@1", "hit@2", "ceiling@2", "ndcg@2"]
    ).mean
    assert values["dcg@2"] == pytest.approx(3 / math.log2(3))
    assert values["p@4"] == pytest.approx(2 / 4)
    assert values["recall@4"] == pytest.approx(2 / 3)
    assert values["rprec"] == pytest.approx(1 / 3)
    assert values["mrr"] == pytest.approx(1 / 2)
    assert values["mrr@1"] == 0.0
    assert (values["hit@1"], values["hit@2"]) == (0.0, 1.0)
    ideal_at_2 = 3 + 1 / math.log2(3)
    assert values["ceiling@2"] == pytest.approx(3 / ideal_at_2)
    assert values["ndcg@2"] == pytest.approx(3 / math.log2(3) / ideal_at_2)


def test_judged_fraction_counts_judgments_of_any_grade_and_short_runs():
    qrels = qrels_frame({"q": {"a": 0, "b": 1}})
    run = run_frame({"q": {"a": 3.0, "x": 2.0, "b": 1.0}})
    values = evaluate(qrels, run, ["judged@2", "judged@10"]).mean
    assert values == {"judged@2": 0.5, "judged@10": pytest.approx(2 / 3)}


def test_relevance_threshold_applies_to_binary_metrics_not_to_gain():
    qrels, run = ranked_example([1, 2], judged_grades=[2, 1])
    strict = evaluate(qrels, run, ["p@2", "mrr", "ndcg@2"], Contract(rel_threshold=2)).mean
    loose = evaluate(qrels, run, ["p@2", "mrr", "ndcg@2"]).mean
    assert (strict["p@2"], strict["mrr"]) == (0.5, 0.5)
    assert (loose["p@2"], loose["mrr"]) == (1.0, 1.0)
    assert strict["ndcg@2"] == loose["ndcg@2"]


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("gain", ["exponential", "linear"])
def test_matches_naive_reference_with_ties(seed, gain):
    judgments, scores = random_collection(seed, tied=True)
    contract = Contract(gain=gain, no_relevant="zero", missing_in_run="exclude")
    names = ["dcg@10", "ndcg@10", "ceiling@10", "mrr@10", "judged@10"]
    per_query = evaluate(qrels_frame(judgments), run_frame(scores), names, contract).to_dict()["per_query"]
    for query, values in per_query.items():
        expected = reference_values(judgments[query], scores[query], 10, gain)
        for name in names:
            assert values[name] == pytest.approx(expected[name.split("@")[0]], abs=1e-12), (query, name)


def test_ceiling_bounds_ndcg_and_equals_it_for_an_ideal_order():
    judgments, scores = random_collection(11)
    evaluation = evaluate(qrels_frame(judgments), run_frame(scores), ["ndcg@10", "ceiling@10"])
    assert (evaluation.per_query["ceiling@10"] >= evaluation.per_query["ndcg@10"] - 1e-12).all()
    qrels, run = ranked_example([3, 2, 1, 0], judged_grades=[3, 2, 1, 1])
    values = evaluate(qrels, run, ["ndcg@3", "ceiling@3"]).mean
    assert values["ndcg@3"] == pytest.approx(values["ceiling@3"])


# --- trec_eval (pytrec_eval) agreement --------------------------------------------------------


@pytest.mark.parametrize("seed", range(8))
def test_linear_gain_matches_trec_eval_without_ties(seed):
    judgments, scores = random_collection(seed)
    contract = Contract(gain="linear", no_relevant="zero", missing_in_run="exclude")
    evaluation = evaluate(qrels_frame(judgments), run_frame(scores), CROSS_CHECKED, contract)
    assert_matches_trec_eval(evaluation, trec_eval_values(judgments, scores), CROSS_CHECKED)


@pytest.mark.parametrize("seed", range(8))
def test_trec_eval_contract_matches_trec_eval_with_ties(seed):
    judgments, scores = random_collection(100 + seed, tied=True)
    evaluation = evaluate(qrels_frame(judgments), run_frame(scores), CROSS_CHECKED, Contract.trec_eval())
    assert evaluation.counts["queries_with_tied_scores"]["@10"] > 0
    assert_matches_trec_eval(evaluation, trec_eval_values(judgments, scores), CROSS_CHECKED)


@pytest.mark.parametrize("level", [2, 3])
def test_relevance_threshold_matches_trec_eval_relevance_level(level):
    judgments, scores = random_collection(7)
    contract = Contract(
        gain="linear", ties="trec_eval", rel_threshold=level, no_relevant="zero", missing_in_run="exclude"
    )
    evaluation = evaluate(qrels_frame(judgments), run_frame(scores), CROSS_CHECKED, contract)
    assert_matches_trec_eval(evaluation, trec_eval_values(judgments, scores, relevance_level=level), CROSS_CHECKED)


def test_trec_eval_ties_sort_doc_ids_descending_by_bytes():
    qrels = qrels_frame({"q": {"9": 1}, "r": {"A": 1}})
    run = run_frame({"q": {"10": 1.0, "9": 1.0}, "r": {"A": 1.0, "a": 1.0}})
    trec = evaluate(qrels, run, ["mrr"], Contract.trec_eval()).to_dict()["per_query"]
    ours = evaluate(qrels, run, ["mrr"]).to_dict()["per_query"]
    assert (trec["q"]["mrr"], trec["r"]["mrr"]) == (1.0, 0.5)  # "9" > "10", "a" > "A"
    assert (ours["q"]["mrr"], ours["r"]["mrr"]) == (0.5, 1.0)


def test_trec_eval_ties_compare_scores_in_single_precision():
    qrels = qrels_frame({"q": {"b": 1}})
    run = run_frame({"q": {"a": 1.0 + 1e-9, "b": 1.0}})
    assert evaluate(qrels, run, ["mrr"], Contract.trec_eval()).mean["mrr"] == 1.0
    assert evaluate(qrels, run, ["mrr"]).mean["mrr"] == 0.5
    reference = pytrec_eval.RelevanceEvaluator({"q": {"b": 1}}, {"recip_rank"}).evaluate(
        {"q": {"a": 1.0 + 1e-9, "b": 1.0}}
    )
    assert reference["q"]["recip_rank"] == 1.0
    assert evaluate(qrels, run, ["mrr"], Contract.trec_eval()).counts["queries_with_tied_scores"] == {"all": 1}
    assert evaluate(qrels, run, ["mrr"]).counts["queries_with_tied_scores"] == {"all": 0}


def test_negative_zero_ties_with_zero():
    qrels = qrels_frame({"q": {"b": 1}})
    run = run_frame({"q": {"b": -0.0, "a": 0.0}})
    evaluation = evaluate(qrels, run, ["mrr"])
    assert evaluation.mean["mrr"] == 0.5
    assert evaluation.counts["queries_with_tied_scores"] == {"all": 1}


def test_more_queries_than_sixteen_bit_codes():
    n = 70_000
    qrels = pl.DataFrame({"query_id": [f"q{i}" for i in range(n)], "doc_id": "d", "grade": 1})
    run = pl.DataFrame(
        {
            "query_id": [f"q{i}" for i in range(n)] * 2,
            "doc_id": ["d"] * n + ["e"] * n,
            "score": [float(i % 2) for i in range(n)] + [0.5] * n,
        }
    )
    evaluation = evaluate(qrels, run, ["mrr"])
    assert evaluation.counts["queries_evaluated"] == n
    assert evaluation.mean["mrr"] == pytest.approx(0.75)


# --- ties -------------------------------------------------------------------------------------


def test_equal_scores_earn_no_credit_from_input_order():
    docs = [f"doc{i:02d}" for i in range(30)]
    qrels = qrels_frame({"q": {"doc29": 2, "doc28": 1}})
    relevant_first = run_frame({"q": {doc: 0.5 for doc in reversed(docs)}})
    relevant_last = run_frame({"q": {doc: 0.5 for doc in docs}})
    names = ["ndcg@10", "mrr", "map", "p@5", "hit@10"]
    first = evaluate(qrels, relevant_first, names)
    assert first.mean == evaluate(qrels, relevant_last, names).mean
    assert first.mean["hit@10"] == 0.0 and first.mean["mrr"] == pytest.approx(1 / 29)
    assert first.counts["queries_with_tied_scores"] == {"@5": 1, "@10": 1, "all": 1}


@pytest.mark.parametrize("ties", ["docid-asc", "trec_eval"])
def test_permuting_input_rows_never_changes_any_number(ties):
    judgments, scores = random_collection(5, tied=True)
    qrels, run = qrels_frame(judgments), run_frame(scores)
    names = CROSS_CHECKED + ["dcg@10", "ceiling@10", "judged@10", "mrr@10"]
    contract = Contract(ties=ties)
    expected = evaluate(qrels, run, names, contract).to_dict()
    for seed in range(3):
        shuffled = evaluate(
            qrels.sample(fraction=1.0, shuffle=True, seed=seed),
            run.sample(fraction=1.0, shuffle=True, seed=seed),
            names,
            contract,
        ).to_dict()
        assert shuffled == expected


def test_ties_across_the_cutoff_are_counted():
    qrels = qrels_frame({"q": {"a": 1}, "r": {"a": 1}})
    run = run_frame({"q": {"a": 3.0, "b": 2.0, "c": 2.0}, "r": {"a": 3.0, "b": 2.0, "c": 1.0}})
    counts = evaluate(qrels, run, ["p@1", "p@2", "map"]).counts["queries_with_tied_scores"]
    assert counts == {"@1": 0, "@2": 1, "all": 1}


# --- query policies ---------------------------------------------------------------------------


def policy_collection():
    qrels = qrels_frame({"has_rel": {"a": 1}, "no_rel": {"a": 0}, "missing": {"a": 2}})
    run = run_frame({"has_rel": {"a": 1.0}, "no_rel": {"a": 1.0}, "unjudged": {"a": 1.0}})
    return qrels, run


def test_default_policies_exclude_no_relevant_and_zero_missing():
    qrels, run = policy_collection()
    evaluation = evaluate(qrels, run, ["ndcg@10"])
    assert evaluation.per_query["query_id"].to_list() == ["has_rel", "missing"]
    assert evaluation.to_dict()["per_query"]["missing"] == {"ndcg@10": 0.0}
    assert evaluation.mean["ndcg@10"] == 0.5
    counts = evaluation.counts
    assert counts["queries_evaluated"] == 2
    assert (counts["queries_without_relevant"], counts["queries_without_relevant_ids"]) == (1, ["no_rel"])
    assert (counts["queries_missing_from_run"], counts["queries_missing_from_run_ids"]) == (1, ["missing"])
    assert (counts["queries_without_judgments"], counts["queries_without_judgments_ids"]) == (1, ["unjudged"])
    assert (counts["queries_judged"], counts["queries_in_run"]) == (3, 3)


def test_no_relevant_zero_and_missing_exclude():
    qrels, run = policy_collection()
    evaluation = evaluate(qrels, run, ["ndcg@10"], Contract(no_relevant="zero", missing_in_run="exclude"))
    assert evaluation.per_query["query_id"].to_list() == ["has_rel", "no_rel"]
    assert evaluation.mean["ndcg@10"] == 0.5


def test_trec_eval_query_set_is_run_queries_with_judgments():
    judgments, scores = random_collection(3)
    evaluation = evaluate(qrels_frame(judgments), run_frame(scores), ["map"], Contract.trec_eval())
    assert set(evaluation.per_query["query_id"]) == set(trec_eval_values(judgments, scores))
    assert evaluation.counts["queries_without_relevant"] > 0


def test_nothing_to_evaluate_is_an_error():
    with pytest.raises(InputError, match="no query left to evaluate"):
        evaluate(
            qrels_frame({"q": {"a": 1}}), run_frame({"r": {"a": 1.0}}), ["map"], Contract(missing_in_run="exclude")
        )


def test_slices_get_their_own_means():
    qrels = qrels_frame({"q1": {"a": 1}, "q2": {"a": 1}, "q3": {"a": 1}})
    run = run_frame({"q1": {"a": 1.0}, "q2": {"b": 1.0}, "q3": {"a": 1.0}})
    evaluation = evaluate(qrels, run, ["p@1"], slices={"q1": "easy", "q2": ["hard", "easy"], "q9": "other"})
    assert evaluation.slices == {
        "easy": {"queries": 2, "mean": {"p@1": 0.5}},
        "hard": {"queries": 1, "mean": {"p@1": 0.0}},
        "other": {"queries": 0, "mean": {}},
    }
    assert evaluation.to_dict()["slices"] == evaluation.slices


def test_to_dict_carries_contract_metrics_and_counts():
    qrels, run = policy_collection()
    document = evaluate(qrels, run, ["ndcg@10", "map"]).to_dict(per_query=False)
    assert set(document) == {"contract", "mean", "counts"}
    assert document["contract"]["metrics"] == ["ndcg@10", "map"]
    assert document["contract"]["gain"] == "exponential"
    assert document["contract"]["discount"] == "log2(rank+1)"


# --- contracts --------------------------------------------------------------------------------


def test_contract_defaults_and_round_trip():
    contract = Contract()
    assert (contract.gain, contract.ties, contract.rel_threshold, contract.no_relevant, contract.missing_in_run) == (
        "exponential",
        "docid-asc",
        1,
        "exclude",
        "zero",
    )
    assert Contract.from_dict(contract.to_dict()) == contract
    assert Contract.from_dict(Contract.trec_eval().to_dict()) == Contract.trec_eval()


def test_contract_read_back_from_an_evaluation():
    qrels, run = ranked_example([1], [1])
    document = evaluate(qrels, run, ["map"], Contract.trec_eval()).to_dict()
    assert Contract.from_dict(document["contract"]) == Contract.trec_eval()


@pytest.mark.parametrize(
    "terms, field",
    [
        ({"gain": "cubic"}, "gain"),
        ({"ties": "random"}, "ties"),
        ({"rel_threshold": 0}, "rel_threshold"),
        ({"no_relevant": "drop"}, "no_relevant"),
        ({"missing_in_run": "skip"}, "missing_in_run"),
        ({"discount": "log10(rank+1)"}, "discount"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_invalid_contract_terms_are_named(terms, field):
    with pytest.raises(InputError) as caught:
        Contract.from_dict({**Contract().to_dict(), **terms})
    assert caught.value.field == field


def test_contract_differences_and_refusal():
    assert contract_differences(Contract(), Contract()) == []
    assert contract_differences(Contract(), Contract.trec_eval()) == ["gain", "missing_in_run", "no_relevant", "ties"]
    assert contract_differences(Contract(), {**Contract(rel_threshold=2).to_dict(), "metrics": ["map"]}) == [
        "rel_threshold"
    ]
    recorded = {**Contract().to_dict(), "metrics": ["map"], "primary": "map", "queries": 3}
    assert contract_differences(recorded, {**recorded, "primary": "p@10", "queries": 4, "split": "dev"}) == [
        "primary",
        "queries",
        "split",
    ]
    assert contract_differences(recorded, {**recorded, "split": None}) == ["split"]  # absent is not None
    assert contract_differences(recorded, {**recorded, "metrics": []}, ignore=("metrics", "primary")) == []
    assert contract_differences(recorded, {**recorded, "metrics": []}, ignore=()) == ["metrics"]
    ensure_same_contract(Contract(), Contract().to_dict())
    with pytest.raises(ContractMismatchError, match=r"gain \('exponential' vs 'linear'\)"):
        ensure_same_contract(Contract(), Contract(gain="linear"))


def test_grade_gains_are_the_ndcg_gains():
    grades = np.array([0, 1, 2, 3])
    assert grade_gains(grades, "exponential").tolist() == [0.0, 1.0, 3.0, 7.0]
    assert grade_gains(grades, "linear").tolist() == [0.0, 1.0, 2.0, 3.0]


# --- bad input --------------------------------------------------------------------------------


def test_duplicate_run_pair_names_both_rows():
    run = pl.DataFrame({"query_id": ["q", "q", "q"], "doc_id": ["a", "b", "a"], "score": [1.0, 2.0, 3.0]})
    with pytest.raises(InputError, match="lines 1 and 3") as caught:
        evaluate(qrels_frame({"q": {"a": 1}}), run, ["map"], run_source="my run")
    assert (caught.value.file, caught.value.line, caught.value.field) == ("my run", 3, "doc_id")


def test_duplicate_qrels_pair_is_rejected():
    qrels = pl.DataFrame({"query_id": ["q", "q"], "doc_id": ["a", "a"], "grade": [1, 0]})
    with pytest.raises(InputError, match="duplicate") as caught:
        evaluate(qrels, run_frame({"q": {"a": 1.0}}), ["map"])
    assert (caught.value.file, caught.value.line) == ("qrels table", 2)


@pytest.mark.parametrize(
    "grades, line, message",
    [
        ([1, -1], 2, "must be >= 0"),
        ([1.0, 2.5], 2, "whole number"),
        ([None, 1], 1, "missing value"),
    ],
)
def test_bad_grades_are_named(grades, line, message):
    qrels = pl.DataFrame({"query_id": ["q", "q"], "doc_id": ["a", "b"], "grade": grades})
    with pytest.raises(InputError, match=message) as caught:
        evaluate(qrels, run_frame({"q": {"a": 1.0}}), ["map"])
    assert (caught.value.line, caught.value.field) == (line, "grade")


def test_whole_float_grades_are_accepted():
    qrels = pl.DataFrame({"query_id": ["q"], "doc_id": ["a"], "grade": [2.0]})
    assert evaluate(qrels, run_frame({"q": {"a": 1.0}}), ["map"]).mean["map"] == 1.0


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_scores_are_rejected(bad):
    run = pl.DataFrame({"query_id": ["q", "q"], "doc_id": ["a", "b"], "score": [1.0, bad]})
    with pytest.raises(InputError, match="finite") as caught:
        evaluate(qrels_frame({"q": {"a": 1}}), run, ["map"])
    assert (caught.value.file, caught.value.line, caught.value.field) == ("run table", 2, "score")


def test_empty_run_and_missing_columns_are_rejected():
    empty = pl.DataFrame(schema={"query_id": pl.String, "doc_id": pl.String, "score": pl.Float64})
    with pytest.raises(InputError, match="run is empty"):
        evaluate(qrels_frame({"q": {"a": 1}}), empty, ["map"])
    with pytest.raises(InputError, match="missing column") as caught:
        evaluate(qrels_frame({"q": {"a": 1}}), pl.DataFrame({"query_id": ["q"], "doc_id": ["a"]}), ["map"])
    assert caught.value.field == "score"
    with pytest.raises(InputError, match="must be numeric") as caught:
        evaluate(
            qrels_frame({"q": {"a": 1}}), pl.DataFrame({"query_id": ["q"], "doc_id": ["a"], "score": ["high"]}), ["map"]
        )
    assert caught.value.field == "score"
