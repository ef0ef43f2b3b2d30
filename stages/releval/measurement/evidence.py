"""Passage-level truth: evidence spans resolved onto the chunks a configuration retrieved.

Document-level scoring collapses a chunk run to documents and asks "did the system find the
right page". A RAG system hands its generator the top chunks under a token budget, so here the
unit is the chunk and the truth is the passage: a judged pair's **evidence spans**
(:mod:`releval.inputs.schemas`), character ranges of the document's text, resolved to whatever
chunks a configuration produced at scoring time. A span is a property of the document, not of a
chunking: it survives a chunking change, and every chunking is scored against the same spans.

The basis. A span's offsets index the document's text as ingested, without its title; a chunk id
``doc_id#start-end`` indexes the same text (:mod:`releval.retrieval.chunking`: ``start``/``end``
locate the chunk's body; a title prepended to the chunk's text for the retrievers shifts
nothing). Chunk offsets are read from the run's chunk ids, so the chunk table is only needed for
token counts.

The terms (recorded with the numbers: :attr:`EvidenceEvaluation.terms`):

* **coverage** of a span by a chunk: the share of the span's characters inside the chunk,
  ``|chunk ∩ span| / |span|``. Not IoU: IoU divides by the union, so it penalises a large chunk for
  being large, which is the very question (chunk size) the metric must not prejudge; the cost of
  a large chunk is counted where it belongs, in tokens against the budget.
* **evidence-bearing**: a retrieved chunk is evidence-bearing for a query when it covers at least
  ``tau`` of some span of the query (``tau`` in (0, 1], default :data:`DEFAULT_TAU` = 0.5: at 0.5
  a span cut by a chunk boundary is still borne by the chunk holding its larger part, while a
  chunk that grazes a span's edge is not). A span is **covered** by a ranking prefix when one
  chunk of the prefix bears it: coverage is never summed over several chunks, so every span
  credited is readable in one piece.
* **evidence recall@k**: the share of the query's spans covered by the top k chunks.
* **evidence nDCG@k**: DCG over the chunk ranking, log2(rank+1) discount; a chunk's gain is the
  gain (``exponential`` 2^g - 1 or ``linear`` g, as the contract says) of its pair's grade when it
  bears at least one span not borne by an earlier chunk, else 0: each span is credited once,
  and a chunk is one slot of the prompt, so a chunk bearing several new spans earns one gain.
  **Ideal ranking** (IDCG): one chunk per span, spans by gain descending, cut at k -- it depends
  on the judgments only, never on a chunking, so two chunkings' nDCG for a query share one
  denominator and their paired difference is a difference of DCG. No ranking can exceed it (each
  gain earned is a distinct span's own gain), so nDCG is in [0, 1]; a chunking that packs two
  spans into one chunk cannot reach 1 at small k (one slot, one gain).
* **evidence recall at a token budget B** (``evidence_recall@512tok``): the chunks in rank order
  while their running token count stays within B -- the chunk that would exceed B is excluded
  and the prompt stops there (later, smaller chunks are not slipped in). Whole chunks, not part
  of one: a prompt builder includes a chunk or drops it, and counting the characters of a cut
  chunk would need the token-to-character map of each tokenizer and would credit a large chunk
  for text its chunking never delivered whole. A chunk larger than B alone gives recall 0 at B:
  that configuration cannot fill such a prompt. Tokens are the chunk's text as the model sees
  it, title included: the chunk table's ``n_tokens`` (:func:`chunk_tokens`) or a declared
  counter applied to each chunk's text.
* **queries**: only queries with at least one span are evaluated; a query whose relevant pairs
  carry no evidence is left out of the means and counted (``queries_without_evidence``), as
  document-level scoring counts queries without relevant documents, so documents judged without
  spans never count as misses. Within an evaluated query, a relevant pair without spans counts
  neither way. A query with spans but absent from the run scores 0 (``missing_in_run: zero``,
  the contract's default) or is left out (``exclude``).
* **which spans**: those of judgment lines whose own grade and whose pair's grade (the lower
  median of the annotators', :func:`releval.judging.judgments.aggregate`) are both at least the
  relevance threshold; a pair's spans from several annotators are pooled, identical ranges once.
  The older ``span_start``/``span_end`` pair of a line is read as one offset span.

Per-query values come back as a polars table (``query_id`` + one Float64 column per metric), the
shape :func:`releval.measurement.stats.compare_paired` and the reports take for document-level
metrics.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
import polars as pl

from releval.errors import InputError
from releval.inputs.schemas import SpanError, evidence_field, locate_span, parse_span
from releval.judging.judgments import aggregate
from releval.measurement.metrics import GAINS, MISSING_IN_RUN_POLICIES, grade_gains

DEFAULT_TAU = 0.5
DEFAULT_BUDGETS = (512, 1024, 2048)
DEFAULT_K = (10,)

SPANS_SCHEMA = pl.Schema(
    {"query_id": pl.String, "doc_id": pl.String, "grade": pl.Int64, "start": pl.Int64, "end": pl.Int64}
)
"""The resolved evidence of a judgment set (:func:`evidence_spans`): one row per distinct span,
``grade`` the pair's (aggregated) grade, ``start``/``end`` half-open offsets into the text."""

_SOURCE = "<evidence>"
_CHUNK_ID = r"^(?P<doc>.+)#(?P<start>\d+)-(?P<end>\d+)$"


# --------------------------------------------------------------------------- spans


def resolve_spans(doc_text: str, spans: Sequence[Mapping[str, Any]]) -> list[tuple[int, int]]:
    """Each evidence span of one judgment as half-open offsets ``(start, end)`` into ``doc_text``
    (the document's text as ingested, without its title), in the given order.

    Anchors (``{"quote": ..., "occurrence": n}``) are located as validation locates them
    (:func:`releval.inputs.schemas.locate_span`: exact text, overlapping places counted, the
    quote alone must occur once); offsets (``{"start": S, "end": E}``) pass through, checked
    against the text's length. The first span that cannot be placed is an :class:`InputError`
    naming its field (``evidence[0].quote``).
    """
    resolved: list[tuple[int, int]] = []
    for index, raw in enumerate(spans):
        span, problems = parse_span(raw)
        if span is None:
            key, message = problems[0]
            raise InputError(message, file=_SOURCE, field=evidence_field(index, key))
        try:
            resolved.append(locate_span(doc_text, span))
        except SpanError as exc:
            raise InputError(exc.message, file=_SOURCE, field=evidence_field(index, exc.key)) from None
    return resolved


def judgment_spans(row: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The evidence spans of one judgment row: its ``evidence`` list, or its older
    ``span_start``/``span_end`` pair read as one offset span; [] when it has neither."""
    if row.get("evidence"):
        return list(row["evidence"])
    if row.get("span_start") is not None and row.get("span_end") is not None:
        return [{"start": int(row["span_start"]), "end": int(row["span_end"])}]
    return []


def evidence_spans(
    judgments: pl.DataFrame,
    doc_texts: Mapping[str, str],
    *,
    rel_threshold: int = 1,
    qrels: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """The resolved spans of a judgment table (:data:`releval.tables.JUDGMENTS`), :data:`SPANS_SCHEMA`.

    A span enters when its line's grade and its pair's grade (``qrels``, by default the lower
    median of the annotators' grades: :func:`releval.judging.judgments.aggregate`) are both >=
    ``rel_threshold``. Several annotators' spans of one pair are one pair's evidence, as several
    grades are one grade: an adjudicator's evidence (a line of an annotator whose name contains
    :data:`ADJUDICATOR` that carries ``evidence``, an empty list included: "no passage"), when
    there is one, replaces the judges' it settled; otherwise every
    annotator's spans are pooled and overlapping or touching ranges merged into one, so that two
    judges marking the same passage a few characters apart give one span, not two. ``doc_texts``:
    doc_id -> text (:func:`releval.judging.judgments.doc_texts`); spans of documents it lacks are
    left out, as the qrels of a corpus subset leave their documents out. Rows sorted by query,
    doc, start, end.
    """
    _check_threshold(rel_threshold)
    if "evidence" not in judgments.columns:
        judgments = judgments.with_columns(pl.lit(None).alias("evidence"))
    carrying = judgments.filter(
        (pl.col("grade") >= rel_threshold) & (pl.col("evidence").is_not_null() | pl.col("span_start").is_not_null())
    )
    # pairs an adjudicator's evidence settled, spans or none
    settling = carrying.filter(
        pl.col("annotator").str.contains(ADJUDICATOR, literal=True) & pl.col("evidence").is_not_null()
    )
    settled_pairs = set(settling.select("query_id", "doc_id").iter_rows())
    if carrying.height == 0:
        return pl.DataFrame(schema=SPANS_SCHEMA)
    pair_grades = aggregate(judgments) if qrels is None else qrels
    grades = {(q, d): g for q, d, g in pair_grades.select("query_id", "doc_id", "grade").iter_rows()}
    by_pair: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for row in carrying.iter_rows(named=True):
        pair = (row["query_id"], row["doc_id"])
        grade = grades.get(pair)
        if grade is None or grade < rel_threshold or row["doc_id"] not in doc_texts:
            continue
        try:
            resolved = resolve_spans(doc_texts[row["doc_id"]], judgment_spans(row))
        except InputError as exc:
            raise InputError(
                f"query {pair[0]!r}, doc {pair[1]!r}: {exc.detail}",
                file=_SOURCE,
                line=row.get("line"),
                field=exc.field if row.get("evidence") else "span_end",
            ) from None
        settles = ADJUDICATOR in str(row.get("annotator") or "") and row.get("evidence") is not None
        if pair in settled_pairs and not settles:
            continue
        by_pair.setdefault(pair, []).extend(resolved)
    rows = []
    for pair, found in by_pair.items():
        for start, end in merged(found):
            rows.append((*pair, int(grades[pair]), start, end))
    return pl.DataFrame(sorted(rows), schema=SPANS_SCHEMA, orient="row")


ADJUDICATOR = "adjudicator"  # in an annotator's name: its spans settle the pair's


def merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``spans`` with overlapping or touching ranges joined, sorted."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


# --------------------------------------------------------------------------- chunks


def coverage(chunk: tuple[int, int], span: tuple[int, int]) -> float:
    """The share of ``span``'s characters inside ``chunk`` (both half-open ``(start, end)`` in one
    document's text): 1.0 when the chunk holds the whole span, 0.0 when they do not meet."""
    start, end = span
    if end <= start:
        raise InputError(f"an empty or reversed span ({start}, {end})", file=_SOURCE, field="span")
    return max(0, min(chunk[1], end) - max(chunk[0], start)) / (end - start)


def bears(chunk: tuple[int, int], span: tuple[int, int], tau: float = DEFAULT_TAU) -> bool:
    """Whether ``chunk`` covers at least ``tau`` of ``span``'s characters, compared exactly
    (``tau`` read as the decimal it is written as: 0.3 of 10 characters is 3, not 3.0000000000000004)."""
    numerator, denominator = _tau_fraction(tau)
    overlap = max(0, min(chunk[1], span[1]) - max(chunk[0], span[0]))
    return overlap * denominator >= numerator * (span[1] - span[0])


def chunk_offsets(run: pl.DataFrame) -> pl.DataFrame:
    """``run`` with ``chunk_start``/``chunk_end``, read from its chunk ids ``doc_id#start-end``
    (:mod:`releval.retrieval.chunking`: offsets of the chunk's body into the document's text).

    A chunk id that is not of that form, or names another document than its row's ``doc_id``
    (an external run's ids carry no offsets), is an :class:`InputError` naming the row.
    """
    parts = run["chunk_id"].str.extract_groups(_CHUNK_ID)
    with_offsets = run.with_columns(
        parts.struct.field("start").cast(pl.Int64).alias("chunk_start"),
        parts.struct.field("end").cast(pl.Int64).alias("chunk_end"),
        (parts.struct.field("doc") == pl.col("doc_id")).fill_null(False).alias("_ok"),
    )
    bad = with_offsets.with_row_index("_row", offset=1).filter(
        ~pl.col("_ok") | (pl.col("chunk_start") >= pl.col("chunk_end"))
    )
    if bad.height:
        row = bad.row(0, named=True)
        raise InputError(
            f"chunk id {row['chunk_id']!r} is not {row['doc_id']}#start-end with start < end: evidence "
            "metrics need the character offsets of a releval chunking's ids (an external run has none)",
            file="<run>",
            line=row["_row"],
            field="chunk_id",
        )
    return with_offsets.drop("_ok")


def chunk_tokens(chunks: pl.DataFrame, counter: Callable[[str], int] | None = None) -> dict[str, int]:
    """chunk_id -> the tokens a chunk takes in a prompt: the chunk table's ``n_tokens`` (content
    tokens of the chunk's text alone, title included: :mod:`releval.retrieval.chunking`), or
    ``counter`` applied to each chunk's ``text`` (the model's own tokenizer, or a declared one)."""
    if counter is None:
        return dict(zip(chunks["chunk_id"].to_list(), chunks["n_tokens"].to_list()))
    return {chunk_id: int(counter(text)) for chunk_id, text in zip(chunks["chunk_id"].to_list(), chunks["text"])}


# --------------------------------------------------------------------------- metrics


METRIC_PREFIX = "evidence_"  # every passage-level metric's name starts with it


def recall_name(k: int) -> str:
    return f"{METRIC_PREFIX}recall@{k}"


def ndcg_name(k: int) -> str:
    return f"{METRIC_PREFIX}ndcg@{k}"


def budget_name(budget: int) -> str:
    """``evidence_recall@512tok``: a budget in tokens, never confused with a rank cut-off."""
    return f"{METRIC_PREFIX}recall@{budget}tok"


def metric_names(k_values: Sequence[int] = DEFAULT_K, budgets: Sequence[int] = ()) -> list[str]:
    """The per-query columns of :func:`evaluate_evidence`, in order: recall@k and nDCG@k for each
    k, then recall at each budget."""
    names = [name for k in k_values for name in (recall_name(k), ndcg_name(k))]
    return names + [budget_name(budget) for budget in budgets]


@dataclass(frozen=True)
class EvidenceEvaluation:
    """Passage-level scores of one chunk run against evidence spans."""

    per_query: pl.DataFrame  # query_id + one Float64 column per metric (metric_names), by query_id
    mean: dict[str, float | None]  # None when no query is evaluated
    counts: dict[str, Any]
    terms: dict[str, Any] = field(default_factory=dict)


def evaluate_evidence(
    run: pl.DataFrame,
    spans: pl.DataFrame,
    *,
    k_values: Sequence[int] = DEFAULT_K,
    budgets: Sequence[int] = (),
    tokens: Mapping[str, int] | None = None,
    tau: float = DEFAULT_TAU,
    gain: str = "exponential",
    missing_in_run: str = "zero",
    judged_query_ids: Iterable[str] | None = None,
) -> EvidenceEvaluation:
    """Evidence recall@k, nDCG@k and recall at token budgets of a chunk-level run (see the module doc).

    ``run``: :data:`releval.tables.CHUNK_RUN` (``query_id, chunk_id, doc_id, score, rank``;
    ordered by ``rank``, ties by chunk_id). ``spans``: :func:`evidence_spans`. ``tokens``:
    chunk_id -> tokens (:func:`chunk_tokens`), needed for ``budgets``. ``judged_query_ids``: the
    judged queries, whose ones without evidence are counted (default: the run's queries).
    """
    k_values, budgets = _positive("k_values", k_values), _positive("budgets", budgets)
    _check_tau(tau)
    if gain not in GAINS:
        raise InputError(f"must be one of {', '.join(GAINS)}; got {gain!r}", file=_SOURCE, field="gain")
    if missing_in_run not in MISSING_IN_RUN_POLICIES:
        raise InputError(
            f"must be one of {', '.join(MISSING_IN_RUN_POLICIES)}; got {missing_in_run!r}",
            file=_SOURCE,
            field="missing_in_run",
        )
    if budgets and tokens is None:
        raise InputError("token budgets need each chunk's token count (chunk_tokens)", file=_SOURCE, field="tokens")
    spans = spans.select(SPANS_SCHEMA.names()).cast(dict(SPANS_SCHEMA))
    if spans.filter(pl.col("end") <= pl.col("start")).height:
        raise InputError("a span with end <= start", file=_SOURCE, field="spans")

    with_spans = sorted(set(spans["query_id"].to_list()))
    in_run = set(run["query_id"].to_list())
    judged = set(judged_query_ids) if judged_query_ids is not None else in_run
    without_evidence = sorted(judged - set(with_spans))
    missing = [query for query in with_spans if query not in in_run]
    evaluated = [query for query in with_spans if query in in_run or missing_in_run == "zero"]

    ranked = _ranked(run, evaluated, budgets, tokens)
    first = _first_bearing(ranked, spans, tau)  # span_id -> first position bearing it
    names = metric_names(k_values, budgets)
    values = {name: np.zeros(len(evaluated)) for name in names}
    gains = grade_gains(spans["grade"].to_numpy(), gain)
    query_of_span = spans["query_id"].to_list()
    span_ids_of: dict[str, list[int]] = {}
    for span_id, query in enumerate(query_of_span):
        span_ids_of.setdefault(query, []).append(span_id)
    last_in_budget = _last_in_budget(ranked, budgets)
    for index, query in enumerate(evaluated):
        ids = span_ids_of[query]
        firsts = np.array([first.get(span_id, math.inf) for span_id in ids], dtype=np.float64)
        for k in k_values:
            values[recall_name(k)][index] = float(np.mean(firsts <= k))
            values[ndcg_name(k)][index] = _ndcg(firsts, gains[ids], k)
        for budget in budgets:
            values[budget_name(budget)][index] = float(np.mean(firsts <= last_in_budget.get((query, budget), 0)))
    per_query = pl.DataFrame(
        {"query_id": evaluated, **values}, schema={"query_id": pl.String, **{name: pl.Float64 for name in names}}
    )
    return EvidenceEvaluation(
        per_query=per_query,
        mean={name: (float(np.mean(values[name])) if evaluated else None) for name in names},
        counts={
            "queries_evaluated": len(evaluated),
            "queries_with_evidence": len(with_spans),
            "queries_without_evidence": len(without_evidence),
            "queries_without_evidence_ids": without_evidence,
            "queries_missing_from_run": len(missing),
            "queries_missing_from_run_ids": missing,
            "spans": int(spans.filter(pl.col("query_id").is_in(evaluated)).height),
        },
        terms=evidence_terms(tau, gain, missing_in_run, budgets),
    )


def evidence_terms(
    tau: float = DEFAULT_TAU, gain: str = "exponential", missing_in_run: str = "zero", budgets: Sequence[int] = ()
) -> dict[str, Any]:
    """The conventions behind evidence numbers, to be written next to them like a contract."""
    return {
        "tau": tau,
        "gain": gain,
        "missing_in_run": missing_in_run,
        "budgets": list(budgets),
        "span_basis": "character offsets into the document's text as ingested, without its title",
        "coverage": "share of a span's characters inside one chunk (not IoU)",
        "evidence_bearing": "a chunk covering at least tau of some span of the query",
        "covered": "a span borne by one chunk of the ranking prefix",
        "ndcg_gain": "the pair's grade gain for a chunk bearing a span not borne earlier, else 0",
        "idcg": "one chunk per span, spans by gain descending, cut at k",
        "budget": "whole chunks in rank order while the running token count stays within B",
        "no_evidence": "queries without spans are left out of the means and counted",
    }


def _ranked(
    run: pl.DataFrame, queries: list[str], budgets: Sequence[int], tokens: Mapping[str, int] | None
) -> pl.DataFrame:
    """The run's rows of ``queries`` with their 1-based position (rank order, ties by chunk_id),
    chunk offsets and, with budgets, the running token count."""
    ranked = (
        run.filter(pl.col("query_id").is_in(queries))
        .select("query_id", "chunk_id", "doc_id", "rank")
        .sort("query_id", "rank", "chunk_id")
        .with_columns(pl.int_range(1, pl.len() + 1).over("query_id").cast(pl.Int64).alias("position"))
    )
    ranked = chunk_offsets(ranked)
    if budgets:
        assert tokens is not None
        counts = [tokens.get(chunk_id) for chunk_id in ranked["chunk_id"].to_list()]
        unknown = [chunk_id for chunk_id, count in zip(ranked["chunk_id"].to_list(), counts) if count is None]
        if unknown:
            raise InputError(
                f"{len(unknown)} retrieved chunk(s) have no token count (first: {unknown[0]!r}): "
                "the tokens come from another chunking than the run's",
                file=_SOURCE,
                field="tokens",
            )
        negative = [(chunk_id, count) for chunk_id, count in zip(ranked["chunk_id"].to_list(), counts) if count < 0]
        if negative:
            raise InputError(f"a negative token count: {negative[0]}", file=_SOURCE, field="tokens")
        ranked = ranked.with_columns(pl.Series("tokens", counts, dtype=pl.Int64)).with_columns(
            pl.col("tokens").cum_sum().over("query_id").alias("running_tokens")
        )
    return ranked


def _first_bearing(ranked: pl.DataFrame, spans: pl.DataFrame, tau: float) -> dict[int, int]:
    """span_id (the span's row in ``spans``) -> the first position of a chunk bearing it."""
    numerator, denominator = _tau_fraction(tau)
    keyed = spans.with_row_index("span_id").with_columns(pl.col("span_id").cast(pl.Int64))
    overlap = pl.max_horizontal(
        pl.min_horizontal("chunk_end", "end") - pl.max_horizontal("chunk_start", "start"), pl.lit(0)
    )
    borne = (
        ranked.join(keyed, on=["query_id", "doc_id"], how="inner")
        .filter(overlap * denominator >= numerator * (pl.col("end") - pl.col("start")))
        .group_by("span_id")
        .agg(pl.col("position").min())
    )
    return dict(borne.iter_rows())


def _last_in_budget(ranked: pl.DataFrame, budgets: Sequence[int]) -> dict[tuple[str, int], int]:
    """(query, budget) -> the last position whose running token count is within the budget
    (absent: not even the first chunk fits)."""
    out: dict[tuple[str, int], int] = {}
    for budget in budgets:
        within = ranked.filter(pl.col("running_tokens") <= budget).group_by("query_id").agg(pl.col("position").max())
        out.update(((query, budget), int(position)) for query, position in within.iter_rows())
    return out


def _ndcg(firsts: np.ndarray, gains: np.ndarray, k: int) -> float:
    """nDCG@k of one query: ``firsts[i]`` the first position bearing span i (inf: none), ``gains[i]``
    its gain. A position earns the gain of the spans first borne there once (they share one pair,
    so one gain); the ideal places one span per position by gain descending."""
    earned: dict[float, float] = {}
    for position, value in zip(firsts, gains):
        if position <= k:
            earned[position] = max(earned.get(position, 0.0), float(value))
    dcg = sum(value / math.log2(position + 1) for position, value in earned.items())
    ideal = np.sort(gains)[::-1][:k]
    idcg = float(np.sum(ideal / np.log2(np.arange(2, ideal.size + 2))))
    return dcg / idcg if idcg > 0 else 0.0


def _positive(name: str, values: Sequence[int]) -> list[int]:
    checked = []
    for value in values:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
            raise InputError(f"must be whole numbers > 0, found {value!r}", file=_SOURCE, field=name)
        checked.append(int(value))
    return list(dict.fromkeys(checked))


def _check_tau(tau: float) -> None:
    if isinstance(tau, bool) or not isinstance(tau, (int, float)) or not 0 < tau <= 1:
        raise InputError(f"must be a share of a span's characters in (0, 1], found {tau!r}", file=_SOURCE, field="tau")


def _tau_fraction(tau: float) -> tuple[int, int]:
    _check_tau(tau)
    exact = Fraction(str(tau))
    return exact.numerator, exact.denominator


def _check_threshold(rel_threshold: int) -> None:
    if isinstance(rel_threshold, bool) or not isinstance(rel_threshold, int) or rel_threshold < 1:
        raise InputError(f"must be an integer >= 1, got {rel_threshold!r}", file=_SOURCE, field="rel_threshold")
