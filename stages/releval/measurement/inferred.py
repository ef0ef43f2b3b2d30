"""Metrics estimated from a stratified random sample of the unjudged top-k pairs (sampled judging).

Judging every (query, document) pair in the union of a grid's top k is what a complete pool
costs; on a real corpus nobody pays it. TREC's answer (Yilmaz & Aslam, CIKM 2006; Yilmaz,
Kanoulas & Aslam, SIGIR 2008) is to judge a recorded random sample of the pool and estimate the
metrics, with the sampling uncertainty stated. This module is that answer for releval: the
design, the estimators and their intervals; no I/O, no printing.

**The design** (:class:`SampleDesign`, written as ``sample.json`` beside a judgment version).
The *frame* is, per query, the distinct documents in the union of the configurations' top k
that were unjudged when the sample was drawn (:func:`sampling_frame`). Each frame pair falls in
a *stratum* by its *best rank*, the highest position any configuration gives it. The default
strata are best rank 1, 2-3, 4-10 and 11-k (:data:`DEFAULT_STRATA`): relevance falls steeply
with the best rank (on the shipped pydocs data, 37% of the documents some configuration ranks
first are relevant, 6% of those first seen at ranks 2-3, under 2% below), and a stratum is
most useful where it separates such rates; ranks 1-3 carry 47% of nDCG@10's discount mass and
4-10 the rest of it. :func:`draw_sample` draws a simple random sample without replacement in
every (query, stratum) cell, deterministic given the seed. The sample size is a rate of the
frame or a total number of pairs N; it is spread over all cells in proportion to
``weight x N_h`` (largest remainders; a cell is never asked for more than it holds), every
non-empty cell getting at least ``min_per_stratum`` pairs (default 1: a stratum never sampled
could not be estimated at all) out of the same total. The default weights (:data:`DEFAULT_WEIGHTS`,
8:2:1) sample the top stratum densely: on pydocs, most relevant documents are ones some
configuration ranks first, and the ratio estimates below suffer most where these are missed.
Pairs judged before the sample (an existing pool, a qrels file) are not in the
frame: they count as certain, inclusion probability 1. A frame pair's inclusion probability
is ``pi = n_h / N_h``.

**The estimators** (:func:`infer`), per query and configuration; a judged frame pair that was
not sampled is ignored (counting it would count its stratum twice), an unjudged sampled pair is
refused, and a retrieved document neither in the frame nor judged is non-relevant (trec_eval's
"unpooled").

* ``infndcg@k`` (Yilmaz, Kanoulas & Aslam 2008): DCG@k is the Horvitz-Thompson sum over the
  sampled documents in the configuration's top k, each weighted by ``1/pi``, plus the certain
  ones: **unbiased** for the DCG@k that judging the whole frame would give. The ideal DCG comes
  from the HT estimates of the number of documents at each grade (frame, unbiased) plus the
  certain judgments, filled best grade first into ranks 1..k; a fractional count fills a
  fraction of a rank (exact for whole counts). Gain and discount are releval's contract
  (``2^g - 1`` or the grade; ``1 / log2(rank + 1)``). nDCG is their **ratio estimate**:
  consistent, not unbiased (the ideal DCG is a concave function of the counts, and a ratio's
  expectation is not the ratio of expectations); a query whose sample holds no gain scores 0.
  ``ideal="ranks"`` estimates the ideal DCG otherwise: each judged document adds its ``1/pi``-
  weighted gain at the mean discount of the ranks its grade would hold, the counts of the
  other documents estimated given it was drawn; exact for whole samples, unbiased for a lone
  relevant document of a stratum, so better where the top stratum is fully judged (pydocs at
  30% of the frame: bias +0.009 instead of +0.020) and worse where it is thinly sampled (at
  10%: -0.22 instead of -0.10).
* ``infap`` / ``infap@k``: extended inferred AP (xinfAP, Yilmaz, Kanoulas & Aslam 2008). For a
  relevant judged document at rank p, ``E[prec@p] = 1/p + (1/p) sum_h c_h (r_h + eps) /
  (n_h + 2 eps)`` over the strata h (and the certain judgments as one more stratum), with
  ``c_h`` the frame documents of stratum h above p, ``n_h``/``r_h`` the sampled/relevant
  sampled ones among them, ``eps = 1e-5``; AP is the ``1/pi``-weighted sum of these over the
  relevant judged documents divided by the HT estimate of the number of relevant documents:
  a **ratio estimate**. A stratum with frame documents above p but none of its sampled ones
  there takes the rate of all its sampled documents (``empty_stratum="stratum"``); trec_eval's
  rule, ``eps / 2 eps = 1/2``, overstates a deep stratum (2% relevant on pydocs) and AP with it.
  With that rule, one stratum and no certain judgment it is trec_eval's ``infAP`` exactly
  (:func:`inf_ap`, which reproduces m_infap.c itself).
* The share of relevant documents among a configuration's unjudged top k (the frame pairs in
  its top k, summed over queries): the HT estimate of their relevant count over their (known)
  number, **unbiased**.

**Intervals.** Judgment sampling is resampled within each query by a stratified bootstrap that
gives every sampled pair a factor per replicate (a ``B x sampled-pairs`` matrix; the estimates
are recomputed with the weights ``factor / pi``), strata with one sampled pair being collapsed
with the next for the resampling (the collapsed-strata variance) and fully judged strata kept
fixed. ``replacement`` (default): McCarthy & Snowden's with-replacement bootstrap (1985),
``m_h = (n_h - 1) / (1 - n_h/N_h)`` draws per stratum, ``factor = n_h/m_h x draws``; ``rescaled``:
Rao & Wu's (JASA 1988) with ``n_h - 1`` draws, ``factor = 1 - lambda + lambda n_h/(n_h - 1) x
draws``, ``lambda = sqrt(1 - n_h/N_h)``. For a linear estimate (infDCG, the unjudged share) both
give exactly the unbiased stratified variance with its finite-population correction (tested);
for the ratio estimates ``replacement`` does better, as its replicates can leave a sampled pair
out as another sample could (on pydocs ``rescaled`` showed about half the spread of infNDCG that
repeated samples had). ``naive`` resamples each stratum's pairs with replacement (no correction;
for comparison). (a) The interval of a configuration's mean keeps the queries fixed: it is the
one that should cover the fully judged mean on the same queries. ``interval="basic"`` (default)
reflects the percentile interval about the estimate (``2 x estimate - quantiles``), which
corrects for the bias the replicates show; ``percentile`` does not. (b) A paired comparison
reports three percentile intervals on one set of replicates: ``queries`` resamples the queries
(as :mod:`releval.measurement.stats` does, same seed, same draws) over the per-query inferred
differences, which already vary with the sampling (two-stage sampling, Davison & Hinkley 1997,
section 3.8: resample the first stage, keep the second; with a 100% sample it is
:func:`~releval.measurement.stats.paired_bootstrap_ci` exactly); ``two-level`` also resamples the
judgments of every drawn query (counts that variance twice: conservative); ``judgments`` keeps
the queries fixed. The p-value is :func:`~releval.measurement.stats.bootstrap_p_value` of the
``paired`` replicates and the verdict :func:`~releval.measurement.stats.decide` over the
comparisons of one metric.

**What to expect** (benchmarks/results/inferred.md: pydocs v3, 24 configurations, 85 queries,
a frame of 36 pairs per query, 200 samples per rate). The unbiased estimates are unbiased and
their intervals cover as they should. The ratio estimates are not: their bias is of the order
of 1 / (sampled pairs per query) and does not shrink with the number of queries, while their
noise does, so with a few pairs per query the interval of a mean over many queries covers the
fully judged value far less often than 95% (pydocs, 3.6 to 18 sampled pairs per query: bias
-0.11 to +0.04, intervals (a) covering in 10% to 75% of the samples). Differences between
configurations share most of that bias: interval (b) held the true difference in 99-100% of the
samples from 20% of the frame on. Judge the top stratum completely (an existing shallow pool,
or a rate at which the allocation reaches it), prefer paired differences to absolute values,
and read a mean's interval as the sampling noise around an estimate whose bias can be as large.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import polars as pl

from releval.errors import InputError
from releval.measurement import stats
from releval.measurement.metrics import TIE_RULES, Contract, check_qrels, check_run, grade_gains

SCHEME = "stratified simple random sampling without replacement, strata by best rank"
# Upper best-rank bound of every stratum but the last, which runs to the frame's depth k:
# [1], [2-3], [4-10], [11-k] (empty ranges beyond k are dropped).
DEFAULT_STRATA = (1, 3, 10)
# Relative sampling intensity of those strata (the tail stratum, when k > 10, takes the last).
# Neyman allocation samples a stratum in proportion to N_h x S_h: relevance, hence S_h, falls
# with the best rank (pydocs: S_h about 0.48, 0.23, 0.12 for [1], [2-3], [4-10], 4:2:1), and the
# top ranks also weigh most in nDCG and AP, hence 8:2:1. Measured on pydocs (30 seeds): at 20%
# of the frame the mean infNDCG@10 is off by +0.002 with these weights, by -0.04 with 4:1:1, by
# 0.13 with proportional allocation (1:1:1) and by 0.37 with strata [1-3], [4-10], proportional.
DEFAULT_WEIGHTS = (8.0, 2.0, 1.0, 1.0)
INFAP_EPSILON = 1e-5  # trec_eval's INFAP_EPSILON (trec_eval.h)
BOOTSTRAP_METHODS = ("replacement", "rescaled", "naive")
INTERVALS = ("basic", "percentile")
IDEAL_RULES = ("counts", "ranks")
PAIRED_METHODS = ("queries", "two-level", "judgments")
EMPTY_STRATUM_RULES = ("stratum", "trec_eval")
_JUDGMENT_STREAM = 0x5A4D  # second word of every judgment-resampling seed: a stream apart from the queries'
_BLOCK_ELEMENTS = 2**22  # replicate blocks of the infAP matrices hold about this many cells
_DESIGN_SOURCE = "sample.json"


# --------------------------------------------------------------------------- ranked runs


@dataclass(frozen=True)
class RankedRuns:
    """Several configurations' runs, ranked once: per query, each configuration's doc ids best first.

    A query a configuration did not retrieve has an empty list for it.
    """

    configurations: tuple[str, ...]
    ties: str
    lists: Mapping[str, tuple[np.ndarray, ...]]  # query_id -> one array of doc ids per configuration

    @property
    def query_ids(self) -> tuple[str, ...]:
        return tuple(sorted(self.lists))

    def ranking(self, query_id: str, configuration: int) -> np.ndarray:
        lists = self.lists.get(query_id)
        return lists[configuration] if lists is not None else np.empty(0, dtype=str)


def rank_runs(runs: Mapping[str, pl.DataFrame], ties: str = "docid-asc") -> RankedRuns:
    """Order each document-level run (query_id, doc_id, score) as releval's engine does.

    ``ties`` is the contract's rule: ``docid-asc`` (score descending, then doc_id ascending) or
    ``trec_eval`` (scores compared in single precision, then doc_id descending, byte order).
    """
    if ties not in TIE_RULES:
        raise InputError(f"must be one of {', '.join(TIE_RULES)}; got {ties!r}", field="ties")
    if not runs:
        raise InputError("no configuration", field="runs")
    names = tuple(str(name) for name in runs)
    per_query: dict[str, list[np.ndarray | None]] = {}
    for index, (name, run) in enumerate(runs.items()):
        run = check_run(run, source=f"run {name}")
        scores = run["score"].to_numpy()
        scores = scores.astype(np.float32) + np.float32(0.0) if ties == "trec_eval" else scores + 0.0
        ordered = run.with_columns(key=pl.Series(scores)).sort(
            ["query_id", "key", "doc_id"], descending=[False, True, ties == "trec_eval"]
        )
        query_col = ordered["query_id"].to_numpy()
        docs = ordered["doc_id"].to_numpy().astype(str)
        starts = np.flatnonzero(np.concatenate(([True], query_col[1:] != query_col[:-1])))
        ends = np.append(starts[1:], len(query_col))
        for start, end in zip(starts, ends):
            per_query.setdefault(str(query_col[start]), [None] * len(names))[index] = docs[start:end]
    empty = np.empty(0, dtype=str)
    lists = {q: tuple(empty if a is None else a for a in arrays) for q, arrays in per_query.items()}
    return RankedRuns(names, ties, lists)


def _ranked(runs: Mapping[str, pl.DataFrame] | RankedRuns, ties: str) -> RankedRuns:
    if isinstance(runs, RankedRuns):
        if runs.ties != ties:
            raise InputError(f"runs ranked under ties {runs.ties!r}, the contract says {ties!r}", field="ties")
        return runs
    return rank_runs(runs, ties)


# --------------------------------------------------------------------------- the frame


@dataclass(frozen=True)
class QueryFrame:
    """One query's frame: its unjudged top-k documents (sorted by doc_id) and their best ranks."""

    query_id: str
    doc_ids: tuple[str, ...]
    best_rank: tuple[int, ...]


@dataclass(frozen=True)
class Frame:
    """The pairs a sample is drawn from: per query, the unjudged documents of the configurations' top k."""

    k: int
    ties: str
    configurations: tuple[str, ...]
    queries: tuple[QueryFrame, ...]  # sorted by query_id; a query with nothing unjudged has no document

    @property
    def size(self) -> int:
        return sum(len(query.doc_ids) for query in self.queries)


def sampling_frame(
    runs: Mapping[str, pl.DataFrame] | RankedRuns,
    k: int,
    judged: pl.DataFrame | None = None,
    *,
    ties: str | None = None,
    query_ids: Sequence[str] | None = None,
) -> Frame:
    """The frame of a grid: per query, the distinct documents in the union of the configurations'
    top ``k`` that ``judged`` (a qrels table, any grade) does not already judge, each with its best
    rank (the highest position any configuration gives it).

    The queries are ``query_ids`` when given (a query no run retrieved has an empty frame), else
    every query some run retrieved. ``ties``: the contract's tie rule (default: that of ranked
    ``runs``, else ``docid-asc``).
    """
    k = _whole(k, "k")
    if ties is None:
        ties = runs.ties if isinstance(runs, RankedRuns) else "docid-asc"
    ranked = _ranked(runs, ties)
    queries = sorted({str(q) for q in query_ids}) if query_ids is not None else list(ranked.query_ids)
    judged_by_query = _judged_docs(judged)
    frames = []
    for query_id in queries:
        best: dict[str, int] = {}
        for index in range(len(ranked.configurations)):
            for rank, doc in enumerate(ranked.ranking(query_id, index)[:k].tolist(), start=1):
                if rank < best.get(doc, k + 1):
                    best[doc] = rank
        already = judged_by_query.get(query_id, {})
        docs = sorted(doc for doc in best if doc not in already)
        frames.append(QueryFrame(query_id, tuple(docs), tuple(best[doc] for doc in docs)))
    return Frame(k, ties, ranked.configurations, tuple(frames))


def _judged_docs(qrels: pl.DataFrame | None) -> dict[str, dict[str, int]]:
    if qrels is None or qrels.height == 0:
        return {}
    qrels = check_qrels(qrels)
    out: dict[str, dict[str, int]] = {}
    for query_id, doc_id, grade in qrels.iter_rows():
        out.setdefault(query_id, {})[doc_id] = int(grade)
    return out


# --------------------------------------------------------------------------- the design


@dataclass(frozen=True)
class QuerySample:
    """One query's part of a design: its frame, each pair's stratum, the cell sizes and the sample."""

    query_id: str
    doc_ids: tuple[str, ...]  # the frame, sorted by doc_id
    best_rank: tuple[int, ...]
    stratum: tuple[int, ...]  # index into SampleDesign.strata, per frame document
    population: tuple[int, ...]  # N_h, per stratum of the design
    size: tuple[int, ...]  # n_h, per stratum of the design
    sampled: tuple[str, ...]  # the sampled doc ids, sorted

    def inclusion_probabilities(self) -> np.ndarray:
        """``n_h / N_h`` of each frame document's stratum."""
        population, size = np.asarray(self.population, float), np.asarray(self.size, float)
        stratum = np.asarray(self.stratum, dtype=np.int64)
        return size[stratum] / population[stratum] if stratum.size else np.empty(0)


@dataclass(frozen=True)
class SampleDesign:
    """A recorded stratified sample of a frame: what was drawn, how, and with what seed.

    Round-trips through JSON (:meth:`to_json`, :meth:`from_json`); ``rate`` is the share of the
    frame asked for, ``requested`` the pairs it came to (or the N asked for) and
    :attr:`sample_size` what was drawn (more when ``min_per_stratum`` raised small cells).
    """

    k: int
    ties: str
    strata: tuple[tuple[int, int], ...]  # inclusive best-rank ranges
    weights: tuple[float, ...]  # relative sampling intensity per stratum
    rate: float
    requested: int
    min_per_stratum: int
    seed: int
    configurations: tuple[str, ...]
    queries: tuple[QuerySample, ...]
    scheme: str = SCHEME

    @property
    def frame_size(self) -> int:
        return sum(len(query.doc_ids) for query in self.queries)

    @property
    def sample_size(self) -> int:
        return sum(len(query.sampled) for query in self.queries)

    def pairs(self) -> pl.DataFrame:
        """Every frame pair: query_id, doc_id, best_rank, stratum, sampled, inclusion_probability."""
        rows = []
        for query in self.queries:
            chosen = set(query.sampled)
            probabilities = query.inclusion_probabilities()
            for i, doc in enumerate(query.doc_ids):
                rows.append(
                    (query.query_id, doc, query.best_rank[i], query.stratum[i], doc in chosen, float(probabilities[i]))
                )
        schema = {
            "query_id": pl.String,
            "doc_id": pl.String,
            "best_rank": pl.Int64,
            "stratum": pl.Int64,
            "sampled": pl.Boolean,
            "inclusion_probability": pl.Float64,
        }
        return pl.DataFrame(rows, schema=schema, orient="row")

    def sampled_pairs(self) -> pl.DataFrame:
        """The pairs to judge (the sampled rows of :meth:`pairs`)."""
        return self.pairs().filter(pl.col("sampled")).drop("sampled")

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["strata"] = [list(bounds) for bounds in self.strata]
        return json.loads(json.dumps(out))  # tuples become lists

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, sort_keys=True) + "\n"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SampleDesign:
        """Inverse of :meth:`to_dict`; an inconsistent record (sizes that do not add up, a sampled
        pair outside the frame) is an InputError."""
        try:
            queries = tuple(
                QuerySample(
                    query_id=str(q["query_id"]),
                    doc_ids=tuple(str(d) for d in q["doc_ids"]),
                    best_rank=tuple(int(r) for r in q["best_rank"]),
                    stratum=tuple(int(s) for s in q["stratum"]),
                    population=tuple(int(n) for n in q["population"]),
                    size=tuple(int(n) for n in q["size"]),
                    sampled=tuple(str(d) for d in q["sampled"]),
                )
                for q in data["queries"]
            )
            design = cls(
                k=int(data["k"]),
                ties=str(data["ties"]),
                strata=tuple((int(low), int(high)) for low, high in data["strata"]),
                weights=tuple(float(w) for w in data["weights"]),
                rate=float(data["rate"]),
                requested=int(data["requested"]),
                min_per_stratum=int(data["min_per_stratum"]),
                seed=int(data["seed"]),
                configurations=tuple(str(c) for c in data["configurations"]),
                queries=queries,
                scheme=str(data.get("scheme", SCHEME)),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise InputError(f"not a sample design: {error!r}", file=_DESIGN_SOURCE) from error
        design.check()
        return design

    @classmethod
    def from_json(cls, text: str) -> SampleDesign:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise InputError(f"not JSON: {error}", file=_DESIGN_SOURCE) from error
        return cls.from_dict(data)

    def check(self) -> None:
        """Refuse a design whose parts disagree (each query's sizes, strata and sample)."""
        n_strata = len(self.strata)
        if len(self.weights) != n_strata:
            raise InputError(f"{len(self.weights)} weights for {n_strata} strata", file=_DESIGN_SOURCE, field="weights")
        if self.ties not in TIE_RULES:
            raise InputError(f"unknown tie rule {self.ties!r}", file=_DESIGN_SOURCE, field="ties")
        seen = set()
        for query in self.queries:
            where = f"queries[{query.query_id}]"
            if query.query_id in seen:
                raise InputError("query listed twice", file=_DESIGN_SOURCE, field=where)
            seen.add(query.query_id)
            n_docs = len(query.doc_ids)
            if not (len(query.best_rank) == len(query.stratum) == n_docs) or len(set(query.doc_ids)) != n_docs:
                raise InputError("doc_ids, best_rank and stratum differ in length", file=_DESIGN_SOURCE, field=where)
            if len(query.population) != n_strata or len(query.size) != n_strata:
                raise InputError("one population and size per stratum", file=_DESIGN_SOURCE, field=where)
            stratum = np.asarray(query.stratum, dtype=np.int64)
            if stratum.size and (stratum.min() < 0 or stratum.max() >= n_strata):
                raise InputError("stratum index out of range", file=_DESIGN_SOURCE, field=where)
            if list(np.bincount(stratum, minlength=n_strata)) != list(query.population):
                raise InputError("population does not count the frame", file=_DESIGN_SOURCE, field=where)
            index = {doc: i for i, doc in enumerate(query.doc_ids)}
            if any(doc not in index for doc in query.sampled) or len(set(query.sampled)) != len(query.sampled):
                raise InputError("a sampled pair is not in the frame", file=_DESIGN_SOURCE, field=where)
            drawn = np.bincount([query.stratum[index[doc]] for doc in query.sampled], minlength=n_strata)
            if list(drawn) != list(query.size):
                raise InputError("size does not count the sample", file=_DESIGN_SOURCE, field=where)


def strata_ranges(bounds: Sequence[int], k: int) -> tuple[tuple[int, int], ...]:
    """Inclusive best-rank ranges from upper bounds: ``(1, 3, 10)`` at k = 20 gives
    ``(1, 1), (2, 3), (4, 10), (11, 20)``; ranges beyond ``k`` are dropped, the last is cut at k."""
    k = _whole(k, "k")
    uppers = [_whole(b, "strata") for b in bounds]
    if any(b <= a for a, b in zip(uppers, uppers[1:])):
        raise InputError(f"stratum bounds must increase, got {list(bounds)}", field="strata")
    ranges, low = [], 1
    for upper in [*uppers, k]:
        high = min(upper, k)
        if high >= low:
            ranges.append((low, high))
        low = max(low, high + 1)
    return tuple(ranges)


def draw_sample(
    frame: Frame,
    rate_or_n: float | int,
    seed: int,
    strata: Sequence[int] = DEFAULT_STRATA,
    *,
    weights: Sequence[float] | None = None,
    min_per_stratum: int = 1,
) -> SampleDesign:
    """Draw a stratified random sample of ``frame``; the same arguments give the same sample.

    ``rate_or_n``: a float in (0, 1] is the share of the frame to judge; an int is the number of
    pairs (the frame's size at most). ``strata``: upper best-rank bounds (:func:`strata_ranges`).
    ``weights``: relative sampling intensity per resulting stratum (default: the leading entries
    of :data:`DEFAULT_WEIGHTS`, the last one repeated). Allocation: :func:`allocate`. Each query
    draws from its own stream, seeded by ``seed`` and its query_id, so a query's sample does not
    depend on the others' (its allocation does, through the rounding).
    """
    seed = _seed(seed)
    ranges = strata_ranges(strata, frame.k)
    if weights is None:
        weights = [DEFAULT_WEIGHTS[min(i, len(DEFAULT_WEIGHTS) - 1)] for i in range(len(ranges))]
    weights = tuple(float(w) for w in weights)
    if len(weights) != len(ranges) or not all(math.isfinite(w) and w > 0 for w in weights):
        raise InputError(f"one positive weight per stratum {list(ranges)}, got {list(weights)}", field="weights")
    min_per_stratum = _whole(min_per_stratum, "min_per_stratum", minimum=0)
    total = frame.size
    if isinstance(rate_or_n, (bool, np.bool_)):
        raise InputError(f"a rate in (0, 1] or a number of pairs, got {rate_or_n!r}", field="rate_or_n")
    if isinstance(rate_or_n, (int, np.integer)):
        requested = min(_whole(rate_or_n, "rate_or_n"), total)
        rate = requested / total if total else 0.0
    else:
        rate = float(rate_or_n)
        if not 0.0 < rate <= 1.0:
            raise InputError(f"a rate must lie in (0, 1], got {rate_or_n!r}", field="rate_or_n")
        requested = int(round(rate * total))
    upper = np.array([high for _, high in ranges])
    stratum_of = [np.searchsorted(upper, np.asarray(q.best_rank, dtype=np.int64)) for q in frame.queries]
    population = np.array([np.bincount(s, minlength=len(ranges)) for s in stratum_of], dtype=np.int64)
    population = population.reshape(len(frame.queries), len(ranges))
    sizes = allocate(population, requested, weights, min_per_stratum)
    samples = []
    for query, stratum, size in zip(frame.queries, stratum_of, sizes):
        rng = np.random.default_rng([seed, _query_key(query.query_id)])
        chosen = []
        for h in range(len(ranges)):
            members = np.flatnonzero(stratum == h)
            if size[h]:
                chosen.extend(members[rng.choice(members.size, size=int(size[h]), replace=False)].tolist())
        samples.append(
            QuerySample(
                query_id=query.query_id,
                doc_ids=query.doc_ids,
                best_rank=query.best_rank,
                stratum=tuple(int(s) for s in stratum),
                population=tuple(int(n) for n in population[len(samples)]),
                size=tuple(int(n) for n in size),
                sampled=tuple(sorted(query.doc_ids[i] for i in chosen)),
            )
        )
    return SampleDesign(
        k=frame.k,
        ties=frame.ties,
        strata=ranges,
        weights=weights,
        rate=rate,
        requested=requested,
        min_per_stratum=min_per_stratum,
        seed=seed,
        configurations=frame.configurations,
        queries=tuple(samples),
    )


def allocate(population: np.ndarray, total: int, weights: Sequence[float], min_per_stratum: int = 1) -> np.ndarray:
    """Sample sizes per (query, stratum) cell for ``total`` pairs over the cells' ``population``.

    Each cell's quota is ``total x w_h N_h / sum(w N)``, kept between ``min(N_h,
    min_per_stratum)`` and ``N_h``: a cell whose quota falls outside is set to that bound and the
    rest of the total is shared again among the others, in the same proportions, until none
    does. Quotas are rounded down and the pairs left over go to the largest remainders (the
    first cells on a tie). The sizes add up to ``total`` (at most the frame's size) unless the
    minimums alone exceed it; then every non-empty cell gets its minimum.
    """
    population = np.asarray(population, dtype=np.int64)
    cells = population.ravel().astype(np.float64)
    lower = np.minimum(cells, float(min_per_stratum))
    budget = float(min(total, cells.sum()))
    if lower.sum() >= budget:
        return lower.astype(np.int64).reshape(population.shape)
    intensity = (np.asarray(weights, dtype=np.float64)[None, :] * population).ravel()
    quota = np.zeros_like(cells)
    free = cells > 0
    while free.any():
        share = np.where(free, budget * intensity / intensity[free].sum(), 0.0)
        clamp = free & (share >= cells)  # over a cell's size: first, as capping frees pairs for the others
        bound = cells
        if not clamp.any():
            clamp, bound = free & (share < lower), lower
        if not clamp.any():
            quota[free] = share[free]
            break
        quota[clamp] = bound[clamp]
        budget -= bound[clamp].sum()
        free &= ~clamp
    sizes = np.floor(quota + 1e-9).astype(np.int64)
    left = int(min(total, cells.sum())) - int(sizes.sum())
    if left > 0:
        remainder = np.where(sizes < cells, quota - sizes, -np.inf)
        sizes[np.argsort(-remainder, kind="stable")[:left]] += 1
    return sizes.reshape(population.shape)


def _query_key(query_id: str) -> int:
    return int.from_bytes(hashlib.sha256(query_id.encode("utf-8")).digest()[:8], "little")


def _whole(value: Any, field: str, minimum: int = 1) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise InputError(f"must be a whole number >= {minimum}, got {value!r}", field=field)
    return int(value)


def _seed(value: Any) -> int:
    return _whole(value, "seed", minimum=0)


# --------------------------------------------------------------------------- trec_eval's infAP


def inf_ap(qrels: pl.DataFrame, run: pl.DataFrame, *, relevance_level: int = 1) -> pl.DataFrame:
    """trec_eval's ``infAP`` per query (m_infap.c, Yilmaz & Aslam, CIKM 2006), as pytrec_eval gives it.

    ``qrels``: query_id, doc_id, grade; a negative grade (-1) is a pooled document left unjudged
    (the sample's complement); a document absent from the qrels is unpooled. ``run``: query_id,
    doc_id, score, ranked as trec_eval ranks (``Contract.trec_eval()``'s ties: scores in single
    precision, then doc_id descending). Walking the ranking, a judged relevant document at rank
    p = j + 1 adds 1 when j = 0, else ``1/p + (j/p) (pooled above / j) (rel above + eps) /
    (judged above + 2 eps)`` with eps = 1e-5; the sum is divided by the query's judged relevant
    documents (grade >= ``relevance_level``), 0 without any. Queries: those in both the run and
    the qrels (trec_eval without ``-c``). Returns query_id, infap sorted by query_id.
    """
    relevance_level = _whole(relevance_level, "relevance_level")
    for column in ("query_id", "doc_id", "grade"):
        if column not in qrels.columns:
            raise InputError(f"missing column (have: {', '.join(qrels.columns)})", file="qrels table", field=column)
    qrels = qrels.select(pl.col("query_id").cast(pl.String), pl.col("doc_id").cast(pl.String), pl.col("grade"))
    if qrels.select(pl.struct("query_id", "doc_id").is_duplicated().any()).item():
        raise InputError("duplicate (query_id, doc_id)", file="qrels table")
    ranked = rank_runs({"run": run}, "trec_eval")
    grades: dict[str, dict[str, int]] = {}
    for query_id, doc_id, grade in qrels.iter_rows():
        grades.setdefault(query_id, {})[doc_id] = int(grade)
    rows = []
    for query_id in ranked.query_ids:
        judged = grades.get(query_id)
        if judged is None:
            continue
        num_rel = sum(1 for g in judged.values() if g >= relevance_level)
        total, rel_so_far, nonrel_so_far, unjudged_so_far = 0.0, 0, 0, 0
        for j, doc in enumerate(ranked.ranking(query_id, 0).tolist()):
            grade = judged.get(doc)
            if grade is None:
                continue
            if grade < 0:
                unjudged_so_far += 1
            elif grade < relevance_level:
                nonrel_so_far += 1
            else:
                rel_so_far += 1
                if j == 0:
                    total += 1.0
                else:
                    pooled = rel_so_far - 1 + nonrel_so_far + unjudged_so_far
                    rate = (rel_so_far - 1 + INFAP_EPSILON) / (rel_so_far - 1 + nonrel_so_far + 2 * INFAP_EPSILON)
                    total += 1.0 / (j + 1.0) + (j / (j + 1.0)) * (pooled / j) * rate
        rows.append((query_id, total / num_rel if num_rel else total))
    return pl.DataFrame(rows, schema={"query_id": pl.String, "infap": pl.Float64}, orient="row")


# --------------------------------------------------------------------------- inferred metrics


@dataclass(frozen=True)
class InferredMetric:
    """A parsed inferred metric name: ``infndcg@10`` -> ("ndcg", 10); ``infdcg@10`` -> ("dcg", 10)
    (the HT estimate of DCG@k, unbiased); ``infap`` -> ("ap", None)."""

    kind: str
    k: int | None

    @property
    def name(self) -> str:
        return f"inf{self.kind}" + ("" if self.k is None else f"@{self.k}")


def parse_inferred_metric(name: str) -> InferredMetric:
    base, has_cutoff, cutoff = str(name).strip().lower().partition("@")
    kinds = {"infndcg": "ndcg", "infdcg": "dcg", "infap": "ap"}
    if base not in kinds:
        raise InputError(
            f"unknown inferred metric {name!r}; known: infndcg@k, infdcg@k, infap, infap@k", field="metrics"
        )
    if has_cutoff and (not cutoff.isdecimal() or int(cutoff) <= 0):
        raise InputError(f"metric {name!r}: the cutoff must be a whole number > 0", field="metrics")
    if base in ("infndcg", "infdcg") and not has_cutoff:
        raise InputError(f"metric {name!r} needs a cutoff, e.g. {base}@10", field="metrics")
    return InferredMetric(kinds[base], int(cutoff) if has_cutoff else None)


@dataclass(frozen=True)
class InferredComparison:
    """One configuration against the baseline under an inferred metric (``candidate - baseline``).

    ``interval``/``p_value`` come from the replicates of the ``paired`` method; the three
    intervals are on the same resamples (module doc): ``query_interval`` resamples queries over
    the per-query estimates, ``two_level_interval`` also the judgments, ``judgment_interval``
    only the judgments (queries fixed). ``verdict`` is :func:`releval.measurement.stats.decide`
    over the metric's family of comparisons (Holm-adjusted).
    """

    metric: str
    baseline: str
    candidate: str
    n_queries: int
    mean_difference: float
    interval: tuple[float, float]
    p_value: float
    paired: str
    query_interval: tuple[float, float]
    two_level_interval: tuple[float, float]
    judgment_interval: tuple[float, float]
    verdict: str
    adjusted_p_value: float | None
    family_size: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class InferredEvaluation:
    """Inferred metrics of several configurations from one sample, with their intervals.

    Arrays are aligned with ``configurations`` (``per_query`` is queries x configurations).
    ``low``/``high``: interval (a) of each mean, queries fixed, judgment sampling resampled.
    ``unjudged``: frame pairs in each configuration's top k (k = the design's), summed over the
    queries; ``unpooled``: its top-k documents neither judged nor in the frame (counted as
    non-relevant); ``relevant_share``: the HT estimate of the share of relevant documents among
    its unjudged top k, with ``share_low``/``share_high`` (same bootstrap). ``relevant``: per
    query, the HT estimate of its relevant documents (grade >= rel_threshold) in the frame plus
    the certain ones (unbiased; infAP's denominator). ``bootstrap_bias``: per metric and
    configuration, the mean of the replicates of interval (a) less the estimate (what the basic
    interval corrects for).
    """

    metrics: tuple[str, ...]
    configurations: tuple[str, ...]
    query_ids: tuple[str, ...]
    per_query: dict[str, np.ndarray]
    mean: dict[str, np.ndarray]
    low: dict[str, np.ndarray]
    high: dict[str, np.ndarray]
    unjudged: np.ndarray
    unpooled: np.ndarray
    relevant_share: np.ndarray
    share_low: np.ndarray
    share_high: np.ndarray
    relevant: np.ndarray
    bootstrap_bias: dict[str, np.ndarray]
    comparisons: tuple[InferredComparison, ...]
    contract: Contract
    method: str
    interval: str
    n_resamples: int
    confidence: float
    seed: int
    sample_size: int
    frame_size: int

    def summary(self) -> pl.DataFrame:
        """One row per configuration: each metric's mean and interval, then the unjudged share."""
        columns: dict[str, Any] = {"configuration": list(self.configurations)}
        for name in self.metrics:
            columns[name] = self.mean[name]
            columns[f"{name} low"] = self.low[name]
            columns[f"{name} high"] = self.high[name]
        columns.update(
            unjudged=self.unjudged,
            unpooled=self.unpooled,
            relevant_share=self.relevant_share,
            share_low=self.share_low,
            share_high=self.share_high,
        )
        return pl.DataFrame(columns)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict (a share without unjudged documents, NaN, becomes None)."""

        def floats(values: np.ndarray) -> list[float | None]:
            return [_number(v) for v in values]

        return {
            "contract": self.contract.to_dict(),
            "metrics": list(self.metrics),
            "method": self.method,
            "interval": self.interval,
            "n_resamples": self.n_resamples,
            "confidence": self.confidence,
            "seed": self.seed,
            "sample_size": self.sample_size,
            "frame_size": self.frame_size,
            "queries": len(self.query_ids),
            "configurations": {
                name: {
                    **{
                        metric: {
                            "mean": float(self.mean[metric][i]),
                            "interval": [float(self.low[metric][i]), float(self.high[metric][i])],
                        }
                        for metric in self.metrics
                    },
                    "unjudged": int(self.unjudged[i]),
                    "unpooled": int(self.unpooled[i]),
                    "relevant_share": _number(self.relevant_share[i]),
                    "share_interval": [_number(self.share_low[i]), _number(self.share_high[i])],
                }
                for i, name in enumerate(self.configurations)
            },
            "per_query": {
                metric: {q: floats(row) for q, row in zip(self.query_ids, self.per_query[metric])}
                for metric in self.metrics
            },
            "comparisons": [comparison.to_dict() for comparison in self.comparisons],
        }


def _number(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def infer(
    design: SampleDesign,
    judgments: pl.DataFrame,
    runs: Mapping[str, pl.DataFrame] | RankedRuns,
    metrics: Sequence[str] = ("infndcg@10", "infap"),
    contract: Contract = Contract(),
    *,
    baseline: str | None = None,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    method: str = "replacement",
    interval: str = "basic",
    paired: str = "queries",
    empty_stratum: str = "stratum",
    ideal: str = "counts",
    query_ids: Sequence[str] | None = None,
) -> InferredEvaluation:
    """Inferred metrics of every configuration of ``runs`` from the sample ``design`` and its
    ``judgments`` (the sampled pairs' grades plus any certain ones), with their intervals.

    The queries are the design's (or ``query_ids``, a subset of them), each weighing equally in
    a mean; a configuration absent from a query scores 0 there. The contract's gain, tie rule and
    rel_threshold apply (its query policies do not: which queries have a relevant document is
    itself estimated). ``baseline``: compare every other configuration with it (module doc,
    interval (b)); ``paired`` picks the replicates behind each comparison's interval, p-value
    and verdict. Replicates: ``n_resamples`` per interval, judgment sampling resampled by
    ``method`` (:data:`BOOTSTRAP_METHODS`), queries as :mod:`releval.measurement.stats` does with
    ``seed``; ``interval``: basic or percentile interval (a). ``empty_stratum`` and ``ideal``:
    the infAP and ideal-DCG variants of the module doc. Metrics: ``infndcg@k``, ``infdcg@k``,
    ``infap``, ``infap@k`` (:func:`parse_inferred_metric`).
    """
    wanted = tuple(dict.fromkeys(parse_inferred_metric(name) for name in metrics))
    if not wanted:
        raise InputError("no metric requested", field="metrics")
    if method not in BOOTSTRAP_METHODS:
        raise InputError(f"must be one of {', '.join(BOOTSTRAP_METHODS)}; got {method!r}", field="method")
    if ideal not in IDEAL_RULES:
        raise InputError(f"must be one of {', '.join(IDEAL_RULES)}; got {ideal!r}", field="ideal")
    if interval not in INTERVALS:
        raise InputError(f"must be one of {', '.join(INTERVALS)}; got {interval!r}", field="interval")
    if paired not in PAIRED_METHODS:
        raise InputError(f"must be one of {', '.join(PAIRED_METHODS)}; got {paired!r}", field="paired")
    if empty_stratum not in EMPTY_STRATUM_RULES:
        raise InputError(
            f"must be one of {', '.join(EMPTY_STRATUM_RULES)}; got {empty_stratum!r}", field="empty_stratum"
        )
    n_resamples = _whole(n_resamples, "n_resamples")
    seed = _seed(seed)
    tail = stats.alpha_of(confidence) / 2.0
    design.check()
    ranked = _ranked(runs, contract.ties)
    names = ranked.configurations
    base = None
    if baseline is not None:
        if baseline not in names:
            raise InputError(f"{baseline!r} is not among the configurations", field="baseline")
        base = names.index(baseline)
    by_query = {query.query_id: query for query in design.queries}
    if query_ids is None:
        queries = [query.query_id for query in design.queries]
    else:
        queries = sorted({str(q) for q in query_ids})
        missing = [q for q in queries if q not in by_query]
        if missing:
            raise InputError(f"{len(missing)} queries not in the design, e.g. {missing[0]!r}", field="query_ids")
    if not queries:
        raise InputError("no query to evaluate", field="query_ids")
    judged = _judged_docs(judgments)
    unjudged_sampled = [(q, doc) for q in queries for doc in by_query[q].sampled if doc not in judged.get(q, {})]
    if unjudged_sampled:
        q, doc = unjudged_sampled[0]
        raise InputError(
            f"{len(unjudged_sampled)} sampled pair(s) have no judgment, e.g. ({q!r}, {doc!r}): judge the sample first",
            field="judgments",
        )

    n_queries, n_configs = len(queries), len(names)
    counts = _query_counts(n_queries, n_resamples, seed)  # exactly stats' resampled query sets
    point = {m.name: np.zeros((n_queries, n_configs)) for m in wanted}
    fixed = {m.name: np.zeros((n_resamples, n_configs)) for m in wanted}
    two_level = {m.name: np.zeros((n_resamples, n_configs)) for m in wanted}
    share_numerator = np.zeros((n_resamples, n_configs))
    share_point = np.zeros(n_configs)
    unjudged = np.zeros(n_configs, dtype=np.int64)
    unpooled = np.zeros(n_configs, dtype=np.int64)
    relevant = np.zeros(n_queries)
    for qi, query_id in enumerate(queries):
        model = _QueryModel(
            by_query[query_id], judged.get(query_id, {}), ranked, query_id, design.k, wanted, contract, empty_stratum,
            ideal,
        )  # fmt: skip
        unjudged += model.unjudged
        unpooled += model.unpooled
        estimates = model.estimate(np.ones((1, model.n_units)))
        for name, values in estimates.items():
            point[name][qi] = values[0]
        share_point += model.share_numerator(np.ones((1, model.n_units)))[0]
        relevant[qi] = float(model.base_weight @ model.relevant) + model.certain_relevant
        rng = np.random.default_rng([seed, _JUDGMENT_STREAM, _query_key(query_id)])
        factors = model.factors(n_resamples, rng, method)
        block = max(1, _BLOCK_ELEMENTS // max(1, model.width))
        for start in range(0, n_resamples, block):
            rows = slice(start, min(start + block, n_resamples))
            replicate = model.estimate(factors[rows])
            for name, values in replicate.items():
                fixed[name][rows] += values
                if base is not None:
                    two_level[name][rows] += counts[rows, qi, None] * (values - values[:, [base]])
            share_numerator[rows] += model.share_numerator(factors[rows])

    mean, low, high, bootstrap_bias = {}, {}, {}, {}
    for m in wanted:
        name = m.name
        fixed[name] /= n_queries
        mean[name] = point[name].mean(axis=0)
        bootstrap_bias[name] = fixed[name].mean(axis=0) - mean[name]
        low[name], high[name] = np.quantile(fixed[name], [tail, 1.0 - tail], axis=0)
        if interval == "basic":  # reflected about the estimate: corrects for the bias the replicates show
            low[name], high[name] = 2.0 * mean[name] - high[name], 2.0 * mean[name] - low[name]
    with np.errstate(invalid="ignore", divide="ignore"):
        denominator = np.where(unjudged > 0, unjudged, np.nan)
        relevant_share = share_point / denominator
        share_low, share_high = np.quantile(share_numerator / denominator, [tail, 1.0 - tail], axis=0)

    comparisons: list[InferredComparison] = []
    if base is not None:
        for m in wanted:
            comparisons.extend(
                _comparisons(
                    m.name,
                    names,
                    base,
                    point[m.name],
                    fixed[m.name],
                    two_level[m.name] / n_queries,
                    counts,
                    paired,
                    float(confidence),
                )
            )
    return InferredEvaluation(
        metrics=tuple(m.name for m in wanted),
        configurations=names,
        query_ids=tuple(queries),
        per_query=point,
        mean=mean,
        low=low,
        high=high,
        unjudged=unjudged,
        unpooled=unpooled,
        relevant_share=relevant_share,
        share_low=share_low,
        share_high=share_high,
        relevant=relevant,
        bootstrap_bias=bootstrap_bias,
        comparisons=tuple(comparisons),
        contract=contract,
        method=method,
        interval=interval,
        n_resamples=n_resamples,
        confidence=float(confidence),
        seed=seed,
        sample_size=sum(len(by_query[q].sampled) for q in queries),
        frame_size=sum(len(by_query[q].doc_ids) for q in queries),
    )


def _query_counts(n_queries: int, n_resamples: int, seed: int) -> np.ndarray:
    """How often each query is drawn in each resample: the draws of
    :func:`releval.measurement.stats.bootstrap_means` with the same seed (its int64 draws are
    unbuffered, so one block of all the resamples is the same stream as its blocks)."""
    rng = np.random.default_rng(seed)
    drawn = rng.integers(0, n_queries, size=(n_resamples, n_queries), dtype=np.int64)
    drawn += (np.arange(n_resamples, dtype=np.int64) * n_queries)[:, None]
    return np.bincount(drawn.ravel(), minlength=n_resamples * n_queries).reshape(n_resamples, n_queries)


def _snap(means: np.ndarray, data: np.ndarray) -> np.ndarray:
    """Rounding noise around exact zeros set to zero, as stats.bootstrap_means does."""
    noise = data.shape[0] * np.finfo(np.float64).eps * np.max(np.abs(data), axis=0)
    means = means.copy()
    means[np.abs(means) <= noise] = 0.0
    return means


def _comparisons(
    name: str,
    names: tuple[str, ...],
    base: int,
    point: np.ndarray,
    fixed: np.ndarray,
    two_level: np.ndarray,
    counts: np.ndarray,
    paired: str,
    confidence: float,
) -> list[InferredComparison]:
    """Every configuration against ``names[base]`` under one metric, decided as one family."""
    differences = point - point[:, [base]]
    replicates = {
        "queries": _snap(counts @ differences / differences.shape[0], differences),
        "two-level": _snap(two_level, differences),
        "judgments": _snap(fixed - fixed[:, [base]], differences),
    }
    intervals = {key: stats.percentile_interval(values, confidence) for key, values in replicates.items()}
    p_values = stats.bootstrap_p_value(replicates[paired])
    candidates = [c for c in range(len(names)) if c != base]
    mean_differences = differences.mean(axis=0)
    decisions = stats.decide(
        mean_differences[candidates],
        p_values[candidates],
        [differences.shape[0]] * len(candidates),
        stats.alpha_of(confidence),
    )

    def interval(key: str, c: int) -> tuple[float, float]:
        return float(intervals[key][0][c]), float(intervals[key][1][c])

    return [
        InferredComparison(
            metric=name,
            baseline=names[base],
            candidate=names[c],
            n_queries=int(differences.shape[0]),
            mean_difference=float(mean_differences[c]),
            interval=interval(paired, c),
            p_value=float(p_values[c]),
            paired=paired,
            query_interval=interval("queries", c),
            two_level_interval=interval("two-level", c),
            judgment_interval=interval("judgments", c),
            verdict=decision.verdict,
            adjusted_p_value=decision.adjusted_p_value,
            family_size=decision.family_size,
        )
        for c, decision in zip(candidates, decisions)
    ]


# --------------------------------------------------------------------------- one query's estimators


@dataclass(frozen=True)
class _AveragePrecision:
    """The fixed parts of xinfAP for one query and every configuration (module doc): one target per
    relevant judged document in a configuration's ranking, one column per (target, stratum) with
    frame documents above the target."""

    position: np.ndarray  # (T,) 1-based rank of the target
    own: np.ndarray  # (T,) its sampled unit, -1 for a certain judgment
    certain_term: np.ndarray  # (T,) certain above x (relevant certain above + eps) / (certain above + 2 eps)
    frame_above: np.ndarray  # (P,) frame documents of the column's stratum above its target
    column_stratum: np.ndarray  # (P,) the column's stratum
    judged_above: np.ndarray  # (units, P) 1 where the unit is of the column's stratum and above its target
    relevant_above: np.ndarray  # (units, P) the same for relevant units
    column_target: np.ndarray  # (P, T) 1 where the column belongs to the target
    target_config: np.ndarray  # (T, configurations) 1 where the target is in that configuration's ranking


class _QueryModel:
    """One query: its sampled units and certain judgments, and every configuration's ranking
    reduced to the matrices the estimators multiply the replicate factors with.

    The configurations' rankings are handled as one concatenation (``row``: configuration and
    0-based position), so that each lookup is one vectorised operation for the whole grid.
    """

    def __init__(
        self,
        sample: QuerySample,
        judged: Mapping[str, int],
        ranked: RankedRuns,
        query_id: str,
        k_frame: int,
        metrics: tuple[InferredMetric, ...],
        contract: Contract,
        empty_stratum: str = "stratum",
        ideal: str = "counts",
    ) -> None:
        self.sample, self.metrics, self.contract = sample, metrics, contract
        self.empty_stratum, self.ideal = empty_stratum, ideal
        threshold = contract.rel_threshold
        frame_docs = np.asarray(sample.doc_ids, dtype=str)
        frame_stratum = np.asarray(sample.stratum, dtype=np.int64)
        self.n_strata = len(sample.population)
        sampled = np.flatnonzero(np.isin(frame_docs, np.asarray(sample.sampled, dtype=str)))
        self.n_units = sampled.size
        unit_of = np.full(frame_docs.size, -1, dtype=np.int64)
        unit_of[sampled] = np.arange(sampled.size)
        self.unit_stratum = frame_stratum[sampled]
        population = np.asarray(sample.population, dtype=np.float64)
        size = np.asarray(sample.size, dtype=np.float64)
        self.base_weight = population[self.unit_stratum] / size[self.unit_stratum]
        self.sampling_fraction = size[self.unit_stratum] / population[self.unit_stratum]
        self.grade = np.array([judged[doc] for doc in frame_docs[sampled].tolist()], dtype=np.int64)
        self.relevant = (self.grade >= threshold).astype(np.float64)
        frame_set = set(sample.doc_ids)
        certain = {doc: grade for doc, grade in judged.items() if doc not in frame_set}
        certain_docs = np.asarray(sorted(certain), dtype=str)
        certain_grade = np.array([certain[doc] for doc in certain_docs.tolist()], dtype=np.int64)
        self.certain_relevant = int((certain_grade >= threshold).sum())

        n_configs = self.n_configs = len(ranked.configurations)
        lists = [ranked.ranking(query_id, c) for c in range(n_configs)]
        lengths = np.array([docs.size for docs in lists], dtype=np.int64)
        docs = np.concatenate(lists) if lengths.sum() else np.empty(0, dtype=str)
        config = np.repeat(np.arange(n_configs), lengths)
        start = np.repeat(np.cumsum(lengths) - lengths, lengths)
        position = np.arange(docs.size) - start  # 0-based rank within the configuration
        frame_index = _lookup(frame_docs, docs)
        certain_index = _lookup(certain_docs, docs)
        unit = _at(unit_of, frame_index, -1)
        stratum = _at(frame_stratum, frame_index, -1)
        grade_certain = _at(certain_grade, certain_index, -1)

        top = position < k_frame
        self.unjudged = np.bincount(config[top & (frame_index >= 0)], minlength=n_configs)
        self.unpooled = np.bincount(config[top & (frame_index < 0) & (certain_index < 0)], minlength=n_configs)
        # Relevance of the sampled units among each configuration's unjudged top k (frame pairs in it).
        self.share = np.zeros((self.n_units, n_configs))
        in_top = top & (unit >= 0)
        self.share[unit[in_top], config[in_top]] = self.relevant[unit[in_top]]

        self.ndcg: dict[int, tuple[np.ndarray, ...]] = {}
        self.ap: dict[int | None, _AveragePrecision] = {}
        unit_gain = grade_gains(self.grade, contract.gain)
        certain_gain = grade_gains(certain_grade, contract.gain)
        levels = np.unique(np.concatenate([self.grade[unit_gain > 0], certain_grade[certain_gain > 0]]))[::-1]
        discount = 1.0 / np.log2(position + 2.0)
        for metric in metrics:
            if metric.kind in ("ndcg", "dcg") and metric.k not in self.ndcg:
                k = int(metric.k)
                values = np.zeros((self.n_units, n_configs))
                rows = (position < k) & (unit >= 0)
                values[unit[rows], config[rows]] = unit_gain[unit[rows]] * discount[rows]
                rows = (position < k) & (grade_certain >= 0)
                certain_dcg = np.bincount(
                    config[rows], weights=grade_gains(grade_certain[rows], contract.gain) * discount[rows],
                    minlength=n_configs,
                )  # fmt: skip
                onehot = (self.grade[:, None] == levels[None, :]).astype(np.float64)
                certain_counts = (certain_grade[:, None] == levels[None, :]).sum(axis=0).astype(np.float64)
                cumulative = np.concatenate(([0.0], np.cumsum(1.0 / np.log2(np.arange(1, k + 1) + 1.0))))
                level_gain = grade_gains(levels, contract.gain)
                self.ndcg[k] = (values, certain_dcg, onehot, certain_counts, level_gain, cumulative)
            if metric.kind == "ap" and metric.k not in self.ap:
                rows = np.ones(docs.size, dtype=bool) if metric.k is None else position < metric.k
                self.ap[metric.k] = self._average_precision(
                    config[rows], position[rows], unit[rows], stratum[rows], grade_certain[rows]
                )
        if ideal == "ranks":
            self._ideal_ranks(certain_grade, unit_gain, certain_gain)
        self.width = max([1] + [ap.judged_above.shape[1] for ap in self.ap.values()])

    def _average_precision(
        self, config: np.ndarray, position: np.ndarray, unit: np.ndarray, stratum: np.ndarray, certain: np.ndarray
    ) -> _AveragePrecision:
        """xinfAP's fixed parts over the rows (configuration, position) of the cut rankings."""
        threshold, n_strata, n_configs = self.contract.rel_threshold, self.n_strata, self.n_configs
        certain_relevant = certain >= threshold
        is_target = certain_relevant | (_at(self.grade, unit, -1) >= threshold)
        targets = np.flatnonzero(is_target)
        n_targets = targets.size
        # Counts above a row: cumulative sums over the concatenation, less the count where its configuration starts.
        first = np.flatnonzero(np.concatenate(([True], config[1:] != config[:-1]))) if config.size else targets
        block_start = np.repeat(first, np.diff(np.append(first, config.size))) if config.size else targets

        def above(flags: np.ndarray) -> np.ndarray:
            cumulative = np.concatenate((np.zeros((1,) + flags.shape[1:]), np.cumsum(flags, axis=0)))
            return cumulative[targets] - cumulative[block_start[targets]]

        in_stratum = (stratum[:, None] == np.arange(n_strata)[None, :]).astype(np.float64)
        frame_above = above(in_stratum)  # (T, H)
        certain_above = above((certain >= 0).astype(np.float64))
        certain_relevant_above = above(certain_relevant.astype(np.float64))
        certain_term = certain_above * (certain_relevant_above + INFAP_EPSILON) / (certain_above + 2 * INFAP_EPSILON)
        # Sampled units above each target, in its configuration's ranking.
        unit_rows = np.flatnonzero(unit >= 0)
        over = (config[unit_rows][None, :] == config[targets][:, None]) & (
            position[unit_rows][None, :] < position[targets][:, None]
        )
        judged = np.zeros((self.n_units, n_targets, n_strata))
        t_index, r_index = np.nonzero(over)
        judged[unit[unit_rows[r_index]], t_index, stratum[unit_rows[r_index]]] = 1.0
        active = np.flatnonzero(frame_above.ravel() > 0)  # (target, stratum) columns with frame documents above
        judged = judged.reshape(self.n_units, -1)[:, active]
        column_target = np.zeros((active.size, n_targets))
        column_target[np.arange(active.size), active // n_strata] = 1.0
        target_config = np.zeros((n_targets, n_configs))
        target_config[np.arange(n_targets), config[targets]] = 1.0
        return _AveragePrecision(
            position=position[targets] + 1.0,
            own=np.where(certain_relevant[targets], -1, unit[targets]),
            certain_term=certain_term,
            frame_above=frame_above.ravel()[active],
            column_stratum=active % n_strata,
            judged_above=judged,
            relevant_above=judged * self.relevant[:, None],
            column_target=column_target,
            target_config=target_config,
        )

    # ---- replicate factors

    def factors(self, n_resamples: int, rng: np.random.Generator, method: str) -> np.ndarray:
        """(n_resamples, units) bootstrap factors of the sampled units (mean 1; see module doc)."""
        out = np.ones((n_resamples, self.n_units))
        if self.n_units == 0:
            return out
        varying = [h for h in range(self.n_strata) if 0 < self.sample.size[h] < self.sample.population[h]]
        if method == "naive":
            groups = [[h] for h in varying]
        else:
            groups, current = [], []
            for h in varying:
                current.append(h)
                if sum(self.sample.size[s] for s in current) >= 2:
                    groups.append(current)
                    current = []
            if current:
                if groups:
                    groups[-1].extend(current)
                else:
                    groups.append(current)
        for group in groups:
            members = np.flatnonzero(np.isin(self.unit_stratum, group))
            n = members.size
            if method == "naive":
                out[:, members] = rng.multinomial(n, np.full(n, 1.0 / n), size=n_resamples)
                continue
            if n < 2:
                continue  # one sampled pair in the whole query's varying strata: no variance can be estimated
            if method == "replacement":
                out[:, members] = _replacement_factors(
                    n, float(self.sampling_fraction[members].mean()), n_resamples, rng
                )
                continue
            draws = rng.multinomial(n - 1, np.full(n, 1.0 / n), size=n_resamples)
            scale = np.sqrt(1.0 - self.sampling_fraction[members])
            out[:, members] = 1.0 - scale + scale * (n / (n - 1.0)) * draws
        return out

    # ---- estimates

    def share_numerator(self, factors: np.ndarray) -> np.ndarray:
        return (factors * self.base_weight) @ self.share

    def estimate(self, factors: np.ndarray) -> dict[str, np.ndarray]:
        """Each metric's estimate per replicate row of ``factors``: name -> (rows, configurations)."""
        weights = factors * self.base_weight
        out = {}
        for metric in self.metrics:
            if metric.kind in ("ndcg", "dcg"):
                out[metric.name] = self._ndcg(weights, int(metric.k), metric.kind == "ndcg", factors)
            else:
                out[metric.name] = self._ap(factors, weights, self.ap[metric.k])
        return out

    def _ideal_ranks(self, certain_grade: np.ndarray, unit_gain: np.ndarray, certain_gain: np.ndarray) -> None:
        """The fixed parts of the ``ranks`` ideal DCG: for each judged document with gain, how the
        other documents' weights count those graded above it and alike (see :func:`infer`)."""
        n = self.n_units
        same = self.unit_stratum[:, None] == self.unit_stratum[None, :]
        size = np.asarray(self.sample.size, dtype=np.float64)[self.unit_stratum]
        population = np.asarray(self.sample.population, dtype=np.float64)[self.unit_stratum]
        # Given unit i in the sample, another unit j of its stratum was drawn with (n_h - 1) / (N_h - 1).
        conditional = np.divide(population - 1.0, size - 1.0, out=np.zeros(n), where=size > 1)
        others = np.where(same, conditional[None, :], self.base_weight[None, :])
        np.fill_diagonal(others, 0.0)
        above = self.grade[None, :] > self.grade[:, None]
        alike = self.grade[None, :] == self.grade[:, None]
        levels = np.unique(certain_grade[certain_gain > 0])
        self.ranks = (
            (others * above).T,  # (n, n): factors @ this = weight of others graded above unit i
            (others * alike).T,
            (certain_grade[None, :] > self.grade[:, None]).sum(axis=1).astype(np.float64),
            (certain_grade[None, :] == self.grade[:, None]).sum(axis=1).astype(np.float64),
            unit_gain,
            (self.grade[:, None] > levels[None, :]).astype(np.float64),  # (n, levels with certain documents)
            (self.grade[:, None] == levels[None, :]).astype(np.float64),
            (certain_grade[:, None] > levels[None, :]).sum(axis=0).astype(np.float64),
            (certain_grade[:, None] == levels[None, :]).sum(axis=0).astype(np.float64),
            grade_gains(levels, self.contract.gain),
        )

    def _ideal_by_ranks(self, factors: np.ndarray, weights: np.ndarray, k: int, cumulative: np.ndarray) -> np.ndarray:
        above, alike, certain_above, certain_alike, gain, level_above, level_alike, c_above, c_alike, c_gain = (
            self.ranks
        )

        def block(start: np.ndarray, count: np.ndarray) -> np.ndarray:
            """Mean discount of ``count`` ranks after ``start`` (fractional counts fill fractions of ranks)."""
            return (_filled_discount(start + count, cumulative, k) - _filled_discount(start, cumulative, k)) / count

        start = factors @ above + certain_above
        count = 1.0 + factors @ alike + certain_alike
        ideal = (weights * gain * block(start, count)).sum(axis=1)
        if c_gain.size:
            start = weights @ level_above + c_above
            count = weights @ level_alike + c_alike
            ideal += (c_alike * c_gain * block(start, count)).sum(axis=1)
        return ideal

    def _ndcg(
        self, weights: np.ndarray, k: int, normalised: bool = True, factors: np.ndarray | None = None
    ) -> np.ndarray:
        values, certain_dcg, onehot, certain_counts, level_gain, cumulative = self.ndcg[k]
        dcg = weights @ values + certain_dcg
        if not normalised:
            return dcg
        if level_gain.size == 0:
            return np.zeros_like(dcg)
        if self.ideal == "ranks":
            ideal = self._ideal_by_ranks(factors, weights, k, cumulative)
            return np.divide(dcg, ideal[:, None], out=np.zeros_like(dcg), where=ideal[:, None] > 0)
        counts = weights @ onehot + certain_counts
        filled = _filled_discount(np.cumsum(counts, axis=1), cumulative, k)
        previous = np.hstack([np.zeros((filled.shape[0], 1)), filled[:, :-1]])
        ideal = (filled - previous) @ level_gain
        return np.divide(dcg, ideal[:, None], out=np.zeros_like(dcg), where=ideal[:, None] > 0)

    def _ap(self, factors: np.ndarray, weights: np.ndarray, ap: _AveragePrecision) -> np.ndarray:
        rows = factors.shape[0]
        relevant_total = weights @ self.relevant + self.certain_relevant
        if ap.position.size == 0:
            return np.zeros((rows, self.n_configs))
        judged = factors @ ap.judged_above
        relevant = factors @ ap.relevant_above
        rate = (relevant + INFAP_EPSILON) / (judged + 2 * INFAP_EPSILON)
        if self.empty_stratum == "stratum":
            # No sampled document of the column's stratum above the target: the stratum's own rate.
            in_stratum = (self.unit_stratum[:, None] == np.arange(self.n_strata)[None, :]).astype(np.float64)
            stratum_rate = (factors @ (in_stratum * self.relevant[:, None]) + INFAP_EPSILON) / (
                factors @ in_stratum + 2 * INFAP_EPSILON
            )
            rate = np.where(judged > 0, rate, stratum_rate[:, ap.column_stratum])
        estimated_above = (rate * ap.frame_above) @ ap.column_target
        expected = (1.0 + estimated_above + ap.certain_term) / ap.position
        own = np.ones((rows, ap.own.size))
        sampled = ap.own >= 0
        own[:, sampled] = weights[:, ap.own[sampled]]
        numerator = (own * expected) @ ap.target_config
        return np.divide(
            numerator, relevant_total[:, None], out=np.zeros_like(numerator), where=relevant_total[:, None] > 0
        )


def _replacement_factors(n: int, fraction: float, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """McCarthy & Snowden's with-replacement bootstrap of one stratum: ``m = (n - 1) / (1 - f)``
    draws among its ``n`` sampled units, factor ``n / m`` per draw; a fractional m is m_lo or
    m_lo + 1 at random, with E[1/m] kept at ``(1 - f) / (n - 1)``, so a linear estimate gets the
    unbiased stratified variance. Factors can be 0: a replicate can leave a unit out, as a sample can."""
    target = (n - 1.0) / (1.0 - fraction)
    low = max(1, int(math.floor(target)))
    high = low + 1
    p_low = 1.0 if target == low else (1.0 / target - 1.0 / high) / (1.0 / low - 1.0 / high)
    uniform = np.full(n, 1.0 / n)
    factors = (n / low) * rng.multinomial(low, uniform, size=n_resamples)
    use_high = rng.random(n_resamples) >= p_low
    factors[use_high] = (n / high) * rng.multinomial(high, uniform, size=int(use_high.sum()))
    return factors


def _at(values: np.ndarray, index: np.ndarray, fill: int) -> np.ndarray:
    """``values[index]``, ``fill`` where the index is -1."""
    if values.size == 0:
        return np.full(index.shape, fill, dtype=np.int64)
    return np.where(index >= 0, values[np.maximum(index, 0)], fill)


def _lookup(sorted_docs: np.ndarray, docs: np.ndarray) -> np.ndarray:
    """Index of each of ``docs`` in ``sorted_docs``, -1 where absent."""
    if sorted_docs.size == 0 or docs.size == 0:
        return np.full(docs.size, -1, dtype=np.int64)
    at = np.minimum(np.searchsorted(sorted_docs, docs), sorted_docs.size - 1)
    return np.where(sorted_docs[at] == docs, at, -1).astype(np.int64)


def _filled_discount(cumulative_counts: np.ndarray, cumulative_discount: np.ndarray, k: int) -> np.ndarray:
    """Sum of the discounts of ranks 1..x for each (fractional) x, capped at k: a fraction of a
    rank gets that fraction of its discount."""
    x = np.clip(cumulative_counts, 0.0, float(k))
    whole = np.minimum(np.floor(x).astype(np.int64), k)
    fraction = x - whole
    next_discount = np.where(whole < k, 1.0 / np.log2(whole + 2.0), 0.0)
    return cumulative_discount[whole] + fraction * next_discount


# --------------------------------------------------------------------------- a scored grid's inferred figures


def inferred_name(metric: str) -> str | None:
    """The inferred metric that estimates ``metric`` from a sample: ndcg@k -> infndcg@k, map / ap -> infap,
    ap@k -> infap@k; None for a metric with no inferred form here."""
    base, _, cutoff = str(metric).strip().lower().partition("@")
    if base == "ndcg" and cutoff:
        return f"infndcg@{cutoff}"
    if base in ("map", "ap"):
        return "infap" if not cutoff else f"infap@{cutoff}"
    return None


def inferred_metrics(metrics: Sequence[str], primary: str | None = None) -> tuple[str, ...]:
    """The inferred metrics a sampled set's scoring reports: the inferred form of each metric that has one
    (:func:`inferred_name`), the primary's first, and infAP always."""
    names = [inferred_name(primary)] if primary else []
    names += [inferred_name(m) for m in metrics]
    return tuple(dict.fromkeys([n for n in names if n] + ["infap"]))


@dataclass(frozen=True)
class ScoredInference:
    """A grid's inferred figures as the score stage stores them: per configuration, its per-query
    estimates (query_id + one column per inferred metric; a query outside the design is left out) and
    its summary (each metric's mean with interval (a), the unjudged and unpooled counts, the estimated
    share of relevant documents among its unjudged top k with its interval)."""

    evaluation: InferredEvaluation
    per_query: dict[str, pl.DataFrame]
    summary: dict[str, dict[str, Any]]


def infer_scored(
    design: SampleDesign,
    qrels: pl.DataFrame,
    runs: Mapping[str, pl.DataFrame],
    metrics: Sequence[str],
    contract: Contract,
    query_ids: Sequence[str],
    *,
    n_resamples: int = 1000,
    seed: int = 0,
) -> ScoredInference:
    """:func:`infer` of every configuration of ``runs`` (config id -> document run) over the scored
    ``query_ids`` the design holds, in the shape the score stage stores (:class:`ScoredInference`)."""
    held = {query.query_id for query in design.queries}
    queries = sorted({str(q) for q in query_ids} & held)
    if not queries:
        raise InputError("no scored query is in the sample design", file=_DESIGN_SOURCE, field="queries")
    evaluation = infer(design, qrels, runs, metrics, contract, n_resamples=n_resamples, seed=seed, query_ids=queries)
    per_query, summary = {}, {}
    for c, name in enumerate(evaluation.configurations):
        columns: dict[str, Any] = {"query_id": list(evaluation.query_ids)}
        for metric in evaluation.metrics:
            columns[metric] = evaluation.per_query[metric][:, c]
        per_query[name] = pl.DataFrame(
            columns, schema={"query_id": pl.String, **{m: pl.Float64 for m in evaluation.metrics}}
        )
        summary[name] = {
            **{
                metric: {
                    "mean": float(evaluation.mean[metric][c]),
                    "interval": [float(evaluation.low[metric][c]), float(evaluation.high[metric][c])],
                }
                for metric in evaluation.metrics
            },
            "unjudged": int(evaluation.unjudged[c]),
            "unpooled": int(evaluation.unpooled[c]),
            "relevant_share": _number(evaluation.relevant_share[c]),
            "share_interval": [_number(evaluation.share_low[c]), _number(evaluation.share_high[c])],
            "queries": len(evaluation.query_ids),
        }
    return ScoredInference(evaluation, per_query, summary)
