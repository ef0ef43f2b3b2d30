"""Sampled judging: the design, trec_eval's infAP, the inferred estimators and their intervals."""

from __future__ import annotations

import dataclasses
import itertools
import json

import numpy as np
import polars as pl
import pytest
import pytrec_eval

from releval.errors import InputError
from releval.measurement import inferred, stats
from releval.measurement.metrics import Contract, evaluate
from support.frames import qrels_frame, run_frame


def pooled_collection(seed: int, n_queries: int = 30, tied: bool = False):
    """pytrec_eval dicts: qrels with pooled-but-unjudged docs (-1), unpooled retrieved docs,
    queries without a relevant doc, judged docs nobody retrieved, runs of 1 to 60 docs."""
    rng = np.random.default_rng(seed)
    judgments, scores = {}, {}
    for i in range(n_queries):
        query = f"q{i}"
        n_docs = int(rng.integers(1, 60))
        docs = [f"d{j}" for j in rng.choice(200, n_docs, replace=False).tolist()]
        values = np.round(rng.random(n_docs) * 4, 1) if tied else rng.permutation(n_docs).astype(float)
        scores[query] = dict(zip(docs, values.tolist()))
        pool = set(rng.choice(docs, min(n_docs, int(rng.integers(1, 30))), replace=False).tolist())
        pool |= {f"d{j}" for j in rng.choice(200, 5, replace=False).tolist()}
        top = 1 if i % 7 == 3 else 4  # every third-ish query has no relevant doc
        judgments[query] = {d: -1 if rng.random() < 0.4 else int(rng.integers(0, top)) for d in sorted(pool)}
    return judgments, scores


def trec_infap(judgments, scores, relevance_level: int = 1) -> dict[str, float]:
    evaluator = pytrec_eval.RelevanceEvaluator(judgments, {"infAP"}, relevance_level=relevance_level)
    return {query: values["infAP"] for query, values in evaluator.evaluate(scores).items()}


def grid(seed: int = 1, n_queries: int = 12, n_docs: int = 60, n_configs: int = 4):
    """Graded truth for every doc and a few configurations that rank by noisy truth."""
    rng = np.random.default_rng(seed)
    truth = {
        f"q{q}": {f"d{j}": int(rng.choice(4, p=[0.7, 0.15, 0.1, 0.05])) for j in range(n_docs)}
        for q in range(n_queries)
    }
    runs = {}
    for c in range(n_configs):
        scores = {}
        for query, grades in truth.items():
            docs = rng.choice(n_docs, 30, replace=False)
            scores[query] = {f"d{j}": float(rng.random() + 0.4 * grades[f"d{j}"]) for j in docs}
        runs[f"c{c}"] = run_frame(scores)
    return qrels_frame(truth), runs


# --- trec_eval's infAP --------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("tied", [False, True])
def test_inf_ap_equals_trec_eval(seed, tied):
    judgments, scores = pooled_collection(seed, tied=tied)
    reference = trec_infap(judgments, scores)
    ours = dict(inferred.inf_ap(qrels_frame(judgments), run_frame(scores)).iter_rows())
    assert set(ours) == set(reference)
    assert max(abs(ours[q] - reference[q]) for q in reference) <= 1e-6
    assert any(v == 0 for v in reference.values()) and any(0 < v < 1 for v in reference.values())


@pytest.mark.parametrize("level", [2, 3])
def test_inf_ap_relevance_level(level):
    judgments, scores = pooled_collection(11)
    reference = trec_infap(judgments, scores, relevance_level=level)
    ours = dict(inferred.inf_ap(qrels_frame(judgments), run_frame(scores), relevance_level=level).iter_rows())
    assert max(abs(ours[q] - reference[q]) for q in reference) <= 1e-6


def test_inf_ap_constructed_cases():
    judgments = {
        "first": {"a": 1, "b": -1, "c": 0, "d": 2, "e": -1},  # relevant at 1 and 5, 1 unjudged + 1 unpooled above
        "none": {"x": 0, "y": -1},  # no relevant doc: 0
        "unretrieved": {"r": 1, "s": 1},  # one of two relevant docs retrieved, at rank 2 under an unpooled doc
        "ties": {"9": 1, "10": 0},  # equal scores: "9" before "10" (doc_id descending, byte order)
    }
    scores = {
        "first": {"a": 0.9, "b": 0.8, "z": 0.7, "c": 0.6, "d": 0.5, "e": 0.4, "f": 0.3},
        "none": {"x": 1.0, "y": 0.5},
        "unretrieved": {"u": 2.0, "r": 1.0},
        "ties": {"10": 1.0, "9": 1.0},
        "not judged": {"a": 1.0},
    }
    ours = dict(inferred.inf_ap(qrels_frame(judgments), run_frame(scores)).iter_rows())
    reference = trec_infap(judgments, scores)
    assert ours == pytest.approx(reference, abs=1e-12)
    assert ours["first"] == pytest.approx((1 + 0.2 + 0.6 * (1 + 1e-5) / (2 + 2e-5)) / 2)
    assert ours["none"] == 0.0 and ours["ties"] == 1.0 and "not judged" not in ours
    assert ours["unretrieved"] == pytest.approx(0.25, abs=1e-5)


# --- the design -----------------------------------------------------------------------------------


def test_strata_ranges():
    assert inferred.strata_ranges((1, 3, 10), 20) == ((1, 1), (2, 3), (4, 10), (11, 20))
    assert inferred.strata_ranges((1, 3, 10), 10) == ((1, 1), (2, 3), (4, 10))
    assert inferred.strata_ranges((1, 3, 10), 5) == ((1, 1), (2, 3), (4, 5))
    with pytest.raises(InputError):
        inferred.strata_ranges((3, 3), 10)


def test_frame_is_the_unjudged_union_of_the_top_k_with_best_ranks():
    runs = {
        "a": run_frame({"q": {"x": 3.0, "y": 2.0, "z": 1.0}}),
        "b": run_frame({"q": {"z": 3.0, "w": 2.0, "x": 1.0}, "r": {"x": 1.0}}),
    }
    frame = inferred.sampling_frame(runs, 2, judged=qrels_frame({"q": {"w": 0}}))
    assert [q.query_id for q in frame.queries] == ["q", "r"]
    assert frame.queries[0].doc_ids == ("x", "y", "z") and frame.queries[0].best_rank == (1, 2, 1)
    assert frame.size == 4


def test_allocation_rate_minimum_caps_and_weights():
    population = np.array([[4, 9, 22], [1, 0, 30], [5, 10, 20]])
    sizes = inferred.allocate(population, 20, (1.0, 1.0, 1.0), 1)
    assert sizes.sum() == 20 and (sizes <= population).all() and (sizes[population > 0] >= 1).all()
    assert (inferred.allocate(population, population.sum(), (2.0, 1.0, 1.0)) == population).all()
    top_heavy = inferred.allocate(population, 20, (4.0, 1.0, 1.0), 0)
    assert top_heavy.sum() == 20 and top_heavy[:, 0].sum() > sizes[:, 0].sum()
    assert inferred.allocate(population, 2, (1.0, 1.0, 1.0), 1).sum() == 8  # minimums win over the total
    assert inferred.allocate(population, 9, (1.0, 1.0, 1.0), 1).sum() == 9


def test_draw_is_deterministic_given_the_seed_and_recorded():
    qrels, runs = grid()
    frame = inferred.sampling_frame(runs, 10)
    first, again = inferred.draw_sample(frame, 0.2, seed=7), inferred.draw_sample(frame, 0.2, seed=7)
    other = inferred.draw_sample(frame, 0.2, seed=8)
    assert first == again and first != other
    assert first.requested == round(0.2 * frame.size) and first.sample_size >= first.requested
    by_count = inferred.draw_sample(frame, 50, seed=7)
    assert by_count.requested == 50 and by_count.rate == pytest.approx(50 / frame.size)
    table = first.sampled_pairs()
    assert table.height == first.sample_size
    assert table["inclusion_probability"].is_between(0, 1, closed="right").all()


def test_design_round_trips_through_json():
    _, runs = grid()
    design = inferred.draw_sample(inferred.sampling_frame(runs, 10), 0.3, seed=3)
    text = design.to_json()
    assert inferred.SampleDesign.from_json(text) == design
    assert inferred.SampleDesign.from_dict(json.loads(text)) == design
    broken = json.loads(text)
    broken["queries"][0]["sampled"].append("not-in-frame")
    with pytest.raises(InputError, match="not in the frame"):
        inferred.SampleDesign.from_dict(broken)


# --- estimators --------------------------------------------------------------------------------------


def test_full_sample_gives_releval_ndcg_and_map():
    qrels, runs = grid()
    design = inferred.draw_sample(inferred.sampling_frame(runs, 10), 1.0, seed=0)
    result = inferred.infer(design, qrels, runs, ["infndcg@10", "infndcg@5", "infap"], n_resamples=50)
    for c, name in enumerate(result.configurations):
        truth = evaluate(qrels, runs[name], ["ndcg@10", "ndcg@5", "map"], Contract(no_relevant="zero"))
        per_query = truth.per_query.sort("query_id")
        assert result.query_ids == tuple(per_query["query_id"])
        np.testing.assert_allclose(result.per_query["infndcg@10"][:, c], per_query["ndcg@10"], rtol=1e-12, atol=0)
        np.testing.assert_allclose(result.per_query["infndcg@5"][:, c], per_query["ndcg@5"], rtol=1e-12, atol=0)
        np.testing.assert_allclose(result.per_query["infap"][:, c], per_query["map"], atol=1e-4)  # eps of infAP
        assert result.low["infndcg@10"][c] == pytest.approx(result.mean["infndcg@10"][c])  # nothing left to sample
    assert (result.unjudged > 0).all() and (result.relevant_share > 0).all()


def test_ideal_by_ranks_is_exact_for_a_full_sample_and_unbiased_for_a_lone_relevant_document():
    qrels, runs = grid(seed=6)
    full = inferred.draw_sample(inferred.sampling_frame(runs, 10), 1.0, seed=0)
    counts = inferred.infer(full, qrels, runs, ["infndcg@10"], n_resamples=5)
    ranks = inferred.infer(full, qrels, runs, ["infndcg@10"], n_resamples=5, ideal="ranks")
    np.testing.assert_allclose(ranks.per_query["infndcg@10"], counts.per_query["infndcg@10"], rtol=1e-12)
    # c (grade 2) is judged; the frame x, y, z, r holds one relevant document (r, grade 1); one is sampled.
    runs = {"a": run_frame({"q": {"c": 5.0, "r": 4.0, "x": 3.0, "y": 2.0, "z": 1.0}})}
    grades = qrels_frame({"q": {"c": 2, "r": 1, "x": 0, "y": 0, "z": 0}})
    frame = inferred.sampling_frame(runs, 5, judged=qrels_frame({"q": {"c": 2}}))
    design = inferred.draw_sample(frame, 1, seed=0, strata=())
    query = design.queries[0]
    assert query.population == (4,) and query.size == (1,)
    ideal = {}
    for rule in ("ranks", "counts"):
        values = []
        for doc in query.doc_ids:
            one = dataclasses.replace(design, queries=(dataclasses.replace(query, sampled=(doc,)),))
            result = inferred.infer(one, grades, runs, ["infdcg@5", "infndcg@5"], n_resamples=2, ideal=rule)
            values.append(result.mean["infdcg@5"][0] / result.mean["infndcg@5"][0])
        ideal[rule] = np.mean(values)
    truth = 3 + 1 / np.log2(3)  # c first, r second
    assert ideal["ranks"] == pytest.approx(truth, rel=1e-12)
    assert ideal["counts"] < truth  # four copies of r fill ranks 2-5: the concave fill falls short


def test_full_sample_with_linear_gain_and_trec_eval_ties():
    qrels, runs = grid(seed=5)
    runs = {name: run.with_columns(pl.col("score").round(1)) for name, run in runs.items()}  # ties
    contract = Contract.trec_eval()
    design = inferred.draw_sample(inferred.sampling_frame(runs, 10, ties="trec_eval"), 1.0, seed=0)
    result = inferred.infer(design, qrels, runs, ["infndcg@10"], contract, n_resamples=10)
    for c, name in enumerate(result.configurations):
        truth = evaluate(qrels, runs[name], ["ndcg@10"], contract).per_query.sort("query_id")
        np.testing.assert_allclose(result.per_query["infndcg@10"][:, c], truth["ndcg@10"], rtol=1e-12, atol=0)


def test_single_stratum_inferred_ap_is_trec_eval_infap():
    qrels, runs = grid(seed=2)
    frame = inferred.sampling_frame(runs, 10)
    design = inferred.draw_sample(frame, 0.3, seed=4, strata=())
    assert design.strata == ((1, 10),)
    judged = {(q.query_id, d) for q in design.queries for d in q.sampled}
    pooled = {(q.query_id, d) for q in design.queries for d in q.doc_ids}
    sample = qrels.join(design.sampled_pairs().select("query_id", "doc_id"), on=["query_id", "doc_id"])
    result = inferred.infer(design, sample, runs, ["infap"], n_resamples=10, empty_stratum="trec_eval")
    truth: dict[str, dict[str, int]] = {}  # trec_eval's qrels: the sample's grades, -1 for the rest of the frame
    for query_id, doc_id, grade in qrels.iter_rows():
        if (query_id, doc_id) in pooled:
            truth.setdefault(query_id, {})[doc_id] = grade if (query_id, doc_id) in judged else -1
    for c, name in enumerate(result.configurations):
        scores = {}
        for query_id, doc_id, score in runs[name].iter_rows():
            scores.setdefault(query_id, {})[doc_id] = score
        reference = trec_infap(truth, scores)
        ours = dict(zip(result.query_ids, result.per_query["infap"][:, c]))
        assert max(abs(ours[q] - reference[q]) for q in reference) <= 1e-6


def tiny_case():
    """One query, two configurations, a frame of 7 docs in strata [1] (3 docs) and [2-3] (4 docs)
    plus one certain judgment; every grade known."""
    runs = {
        "a": run_frame({"q": {"d1": 9.0, "d2": 8.0, "d3": 7.0, "d4": 6.0, "c": 5.0}}),
        "b": run_frame({"q": {"d5": 9.0, "d6": 8.0, "d7": 7.0, "d2": 6.0}}),
        "x": run_frame({"q": {"d3": 9.0, "d4": 8.0, "d1": 7.0}}),
    }
    grades = {"d1": 3, "d2": 0, "d3": 1, "d4": 2, "d5": 0, "d6": 1, "d7": 0, "c": 2}
    return runs, grades


def test_horvitz_thompson_estimates_are_unbiased_over_every_possible_sample():
    runs, grades = tiny_case()
    frame = inferred.sampling_frame(runs, 3, judged=qrels_frame({"q": {"c": grades["c"]}}))
    design = inferred.draw_sample(frame, 3, seed=0, strata=(1,), weights=(1.0, 1.0))
    query = design.queries[0]
    assert query.population == (3, 4) and query.size == (1, 2)
    members = [[d for d, s in zip(query.doc_ids, query.stratum) if s == h] for h in range(2)]
    full = dataclasses.replace(design, queries=(dataclasses.replace(query, size=(3, 4), sampled=query.doc_ids),))
    metrics = ["infdcg@3", "infdcg@5"]
    judged = qrels_frame({"q": grades})
    truth = inferred.infer(full, judged, runs, metrics, n_resamples=2)
    sums = {m: np.zeros(3) for m in metrics}
    share_sum, relevant_sum, samples = np.zeros(3), 0.0, 0
    for first in itertools.combinations(members[0], 1):
        for second in itertools.combinations(members[1], 2):
            drawn = dataclasses.replace(query, sampled=tuple(sorted(first + second)))
            one = dataclasses.replace(design, queries=(drawn,))
            result = inferred.infer(one, judged, runs, metrics, n_resamples=2)
            for m in metrics:
                sums[m] += result.mean[m]
            share_sum += result.relevant_share
            relevant_sum += result.relevant[0]
            samples += 1
    assert samples == 3 * 6
    for m in metrics:
        np.testing.assert_allclose(sums[m] / samples, truth.mean[m], rtol=1e-12)
    np.testing.assert_allclose(share_sum / samples, truth.relevant_share, rtol=1e-12)
    assert relevant_sum / samples == pytest.approx(truth.relevant[0], rel=1e-12)
    assert truth.relevant[0] == 5  # d1, d3, d4, d6 in the frame, c certain
    np.testing.assert_allclose(truth.relevant_share, [2 / 3, 1 / 3, 1.0])  # a: d1 d2 d3; b: d5 d6 d7; x: d3 d4 d1


def test_unsampled_judged_frame_pairs_are_ignored_and_unjudged_sampled_ones_refused():
    runs, grades = tiny_case()
    frame = inferred.sampling_frame(runs, 3)
    design = inferred.draw_sample(frame, 3, seed=0, strata=(1,), weights=(1.0, 1.0))
    sampled = design.queries[0].sampled
    only_sample = qrels_frame({"q": {d: grades[d] for d in sampled}})
    everything = qrels_frame({"q": {d: grades[d] for d in frame.queries[0].doc_ids}})
    a = inferred.infer(design, only_sample, runs, ["infndcg@3"], n_resamples=5)
    b = inferred.infer(design, everything, runs, ["infndcg@3"], n_resamples=5)
    assert np.array_equal(a.mean["infndcg@3"], b.mean["infndcg@3"])
    with pytest.raises(InputError, match="no judgment"):
        inferred.infer(design, qrels_frame({"q": {sampled[0]: 1}}), runs, ["infndcg@3"])


def test_intervals_are_deterministic_and_cover_with_the_sample():
    qrels, runs = grid(seed=3, n_queries=20)
    design = inferred.draw_sample(inferred.sampling_frame(runs, 10), 0.3, seed=1)
    first = inferred.infer(design, qrels, runs, baseline="c0", n_resamples=200, seed=5)
    again = inferred.infer(design, qrels, runs, baseline="c0", n_resamples=200, seed=5)
    assert all(np.array_equal(first.low[m], again.low[m]) for m in first.metrics)
    assert first.comparisons == again.comparisons
    for m in first.metrics:
        assert (first.low[m] <= first.high[m]).all() and (first.low[m] < first.high[m]).any()
    comparison = first.comparisons[0]
    assert comparison.baseline == "c0" and comparison.paired == "queries" and comparison.family_size == 3
    assert comparison.verdict in ("improvement", "regression", "inconclusive")
    assert json.loads(json.dumps(first.to_dict(), allow_nan=False))["comparisons"][0]["candidate"] == "c1"
    assert first.summary().height == 4
    low, high = comparison.judgment_interval
    assert high - low < comparison.two_level_interval[1] - comparison.two_level_interval[0]


def test_query_resampling_mirrors_releval_paired_bootstrap():
    qrels, runs = grid(seed=4, n_queries=25)
    design = inferred.draw_sample(inferred.sampling_frame(runs, 10), 0.4, seed=2)
    result = inferred.infer(design, qrels, runs, ["infndcg@10"], baseline="c0", n_resamples=500, seed=9)
    values = result.per_query["infndcg@10"]
    for comparison in result.comparisons:
        c = result.configurations.index(comparison.candidate)
        low, high = stats.paired_bootstrap_ci(values[:, 0], values[:, c], 500, 0.95, 9)
        p_value = stats.paired_bootstrap_p_value(values[:, 0], values[:, c], 500, 9)
        assert comparison.query_interval == pytest.approx((low, high), abs=1e-12)
        assert comparison.p_value == pytest.approx(p_value)


def test_bad_arguments():
    qrels, runs = grid()
    frame = inferred.sampling_frame(runs, 10)
    for bad in (0.0, 1.5, True, 0):
        with pytest.raises(InputError):
            inferred.draw_sample(frame, bad, seed=0)
    design = inferred.draw_sample(frame, 0.5, seed=0)
    with pytest.raises(InputError):
        inferred.infer(design, qrels, runs, ["ndcg@10"])
    with pytest.raises(InputError):
        inferred.infer(design, qrels, runs, method="jackknife")
    with pytest.raises(InputError):
        inferred.infer(design, qrels, runs, baseline="nobody")


@pytest.mark.parametrize("method", ["replacement", "rescaled"])
def test_judgment_bootstrap_gives_the_stratified_variance_of_a_linear_estimate(method):
    runs, grades = tiny_case()
    frame = inferred.sampling_frame(runs, 3)
    design = inferred.draw_sample(frame, 4, seed=1, strata=(1,), weights=(1.0, 1.0))
    query = design.queries[0]
    assert query.size == (2, 2) and query.population == (3, 4)
    ranked = inferred.rank_runs(runs)
    metric = inferred.parse_inferred_metric("infdcg@3")
    model = inferred._QueryModel(query, grades, ranked, "q", 3, (metric,), Contract())
    replicates = model.estimate(model.factors(20_000, np.random.default_rng(0), method))["infdcg@3"]
    # Unbiased variance of the stratified HT total: sum_h N_h^2 (1 - f_h) s_h^2 / n_h, y = gain x discount in the top 3.
    a_top = {"d1": 1.0, "d2": 1 / np.log2(3), "d3": 0.5}
    expected = 0.0
    for h in range(2):
        sampled = [d for d in query.sampled if query.stratum[query.doc_ids.index(d)] == h]
        y = [(2.0 ** grades[d] - 1) * a_top.get(d, 0.0) for d in sampled]
        n, big_n = query.size[h], query.population[h]
        expected += big_n**2 * (1 - n / big_n) * np.var(y, ddof=1) / n
    assert expected > 0
    assert replicates[:, 0].var() == pytest.approx(expected, rel=0.06)
