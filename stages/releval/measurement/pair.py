"""Paired comparison of two scored configurations: :func:`compare_sides` gives a :class:`PairReport`.

A *side* of a comparison is one configuration's per-query scores (``query_id`` plus one column
per metric) together with the full contract it was scored under (the ``contract`` block of
reports/metrics.json). Two sides are comparable only when their contracts agree on every field
that changes what a number means (:data:`IGNORED_CONTRACT_FIELDS` lists the ones that do not)
and they were scored on exactly the same queries. Differences are always
``candidate - baseline``.

Every statistic comes from :mod:`releval.measurement.stats`, and every verdict from its one
decision rule, :func:`releval.measurement.stats.decide`, applied to each family of comparisons
reported together: the secondary metrics of a pair, and its slices (a slice under
:data:`releval.measurement.stats.MIN_SLICE_QUERIES` queries gets no verdict). Judging coverage
(:mod:`releval.measurement.coverage`) comes first: a coverage-confounded comparison gets
:data:`releval.measurement.stats.COVERAGE_CONFOUNDED` for its verdict. Under a sampled judgment set
(:mod:`releval.judging.completeness`) the per-query scores of the primary are inferred estimates
(infNDCG@k, infAP: :mod:`releval.measurement.inferred`) and the paired bootstrap over them is
interval (b) of :func:`releval.measurement.inferred.infer` (queries resampled over the per-query
estimates, same seed, same draws); no coverage question is asked, a caveat names the sample. There a
metric with an inferred form the contract records (``inferred``: nDCG@k, MAP) is decided on that form
(:func:`decided_metric`): the engine's own value counts every unjudged document as non-relevant, and
under a sample most of a ranking is unjudged by design.

Figures only: :mod:`releval.reporting.pair_text` renders a report as text or JSON; the references
a user types are read by :mod:`releval.measurement.sides`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import polars as pl

from releval.errors import InputError
from releval.judging import completeness
from releval.measurement import scoring, stats
from releval.measurement.coverage import Coverage, coverage
from releval.measurement.inferred import inferred_name
from releval.measurement.metrics import contract_differences as differing_terms

# Contract fields that do not change what a per-query number means: which metrics were
# computed, which one is headlined, and how many topics the query file held (the query *set*
# is checked directly on the per-query tables instead).
# The coverage terms decide when a verdict is given, never what a number is.
IGNORED_CONTRACT_FIELDS = frozenset({"metrics", "primary", "queries", scoring.COVERAGE_KEY})
# recall@20 first: on a small corpus recall@100 is saturated (scoring.saturation) and tells no system apart.
DEFAULT_SECONDARY = ("recall@20", "recall@100", "hit@10")
INCONCLUSIVE = "inconclusive"


class NotComparable(InputError):
    """Two sides that cannot be compared; ``differences`` names every reason."""

    def __init__(self, baseline: str, candidate: str, differences: list[str]):
        self.differences = list(differences)
        InputError.__init__(self, "cannot compare: " + "; ".join(self.differences), file=f"{candidate} vs {baseline}")


@dataclass(frozen=True)
class Side:
    """One configuration's scores and where they came from."""

    ref: str  # as the user wrote it: config id, path, or REV:config_id
    source: str  # where the numbers came from, for the reader
    contract: dict[str, Any]  # the full contract (reports/metrics.json "contract")
    per_query: pl.DataFrame  # query_id + one Float64 column per metric
    run: pl.DataFrame | None = None  # document-level run (query_id, doc_id, score) if known


def config_side(
    per_query: pl.DataFrame, config_id: str, contract: Mapping[str, Any], source: str, ref: str | None = None
) -> Side:
    """The side of ``config_id`` in a long per-query table (``config_id``, ``query_id``, metrics), named
    ``ref`` (default: the id). A configuration of a table written with a diagonal concat has all-null
    columns for the metrics it was not scored on: they are not scores, and are left out."""
    rows = per_query.filter(pl.col("config_id") == config_id).drop("config_id")
    rows = rows.select([c for c in rows.columns if c == "query_id" or rows[c].null_count() < rows.height])
    return Side(ref or config_id, source, dict(contract), rows.with_columns(pl.col("query_id").cast(pl.Utf8)))


# --------------------------------------------------------------------------- comparability


def contract_differences(baseline: Mapping[str, Any], candidate: Mapping[str, Any]) -> list[str]:
    """Every contract field on which the two disagree (:func:`releval.measurement.metrics.contract_differences`,
    :data:`IGNORED_CONTRACT_FIELDS` aside), as ``"field: baseline X, candidate Y"``."""
    return [
        f"{key}: baseline {baseline.get(key, '<absent>')!r}, candidate {candidate.get(key, '<absent>')!r}"
        for key in differing_terms(baseline, candidate, ignore=IGNORED_CONTRACT_FIELDS)
    ]


def preview(ids: Sequence[str], limit: int = 5) -> str:
    """The first ``limit`` ids in order, and how many more."""
    ids = sorted(ids)
    shown = ", ".join(ids[:limit])
    return shown + (f", … ({len(ids) - limit} more)" if len(ids) > limit else "")


def query_set_difference(baseline_ids: Sequence[str], candidate_ids: Sequence[str]) -> str | None:
    """None when the sets are equal, else a sentence saying how many queries differ and which."""
    base, cand = set(map(str, baseline_ids)), set(map(str, candidate_ids))
    if base == cand:
        return None
    only_base, only_cand = base - cand, cand - base
    parts = []
    if only_base:
        parts.append(f"{len(only_base)} only in baseline ({preview(only_base)})")
    if only_cand:
        parts.append(f"{len(only_cand)} only in candidate ({preview(only_cand)})")
    return (
        f"query sets differ: {len(only_base) + len(only_cand)} queries differ ("
        + "; ".join(parts)
        + f"; {len(base & cand)} shared)"
    )


def _check_comparable(baseline: Side, candidate: Side, metrics: Sequence[str]) -> None:
    """Raise :class:`NotComparable` naming every difference in contract, query set or metrics."""
    problems = []
    fields = contract_differences(baseline.contract, candidate.contract)
    if fields:
        problems.append("contracts differ in " + "; ".join(fields))
    for side, name in ((baseline, "baseline"), (candidate, "candidate")):
        missing = [m for m in metrics if m not in side.per_query.columns]
        if missing:
            problems.append(
                f"{name} {side.ref} has no per-query {', '.join(missing)} "
                f"(has {', '.join(c for c in side.per_query.columns if c != 'query_id')})"
            )
        duplicated = side.per_query.height - side.per_query["query_id"].n_unique()
        if duplicated:
            problems.append(f"{name} {side.ref} has {duplicated} duplicated query row(s)")
    difference = query_set_difference(
        baseline.per_query["query_id"].to_list(), candidate.per_query["query_id"].to_list()
    )
    if difference:
        problems.append(difference)
    if problems:
        raise NotComparable(baseline.ref, candidate.ref, problems)


def _align(
    baseline: pl.DataFrame, candidate: pl.DataFrame, metric: str, query_ids: Sequence[str] | None = None
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Scores of both sides on the same queries, in query_id order (optionally a subset).

    A query unscored on both sides is not a question the metric asks (passage-level metrics score
    only the queries with evidence spans) and is left out; unscored on one side only is an error."""
    ids = baseline["query_id"]
    if ids.equals(candidate["query_id"]) and ids.null_count() == 0 and ids.is_unique().all():
        return _align_same_queries(ids, baseline[metric], candidate[metric], metric, query_ids)
    joined = (
        baseline.select("query_id", pl.col(metric).alias("b"))
        .join(candidate.select("query_id", pl.col(metric).alias("c")), on="query_id")
        .sort("query_id")
    )
    if query_ids is not None:
        joined = joined.filter(pl.col("query_id").is_in(list(query_ids)))
    joined = joined.filter(pl.col("b").is_not_null() | pl.col("c").is_not_null())
    nulls = joined.filter(pl.col("b").is_null() | pl.col("c").is_null())
    if nulls.height:
        raise InputError(f"{nulls.height} queries have no score ({preview(nulls['query_id'].to_list())})", field=metric)
    return (
        joined["query_id"].to_list(),
        joined["b"].to_numpy().astype(np.float64),
        joined["c"].to_numpy().astype(np.float64),
    )


def _align_same_queries(
    ids: pl.Series, base: pl.Series, cand: pl.Series, metric: str, query_ids: Sequence[str] | None
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """:func:`_align` of two tables over the same unique queries in the same row order (every table of one grid),
    in numpy: the same result without a join. A report aligns about a thousand pairs, and polars' per-call cost
    made that a second of its time."""
    id_array = ids.to_numpy()
    base_null, cand_null = base.is_null().to_numpy(), cand.is_null().to_numpy()
    keep = ~(base_null & cand_null)
    if query_ids is not None:
        wanted = set(query_ids)
        keep &= np.fromiter((query_id in wanted for query_id in id_array), dtype=bool, count=len(id_array))
    order = np.argsort(id_array, kind="stable")
    rows = order[keep[order]]
    one_sided = base_null[rows] | cand_null[rows]
    if one_sided.any():
        missing = id_array[rows][one_sided].tolist()
        raise InputError(f"{len(missing)} queries have no score ({preview(missing)})", field=metric)
    return (
        id_array[rows].tolist(),
        base.to_numpy()[rows].astype(np.float64),
        cand.to_numpy()[rows].astype(np.float64),
    )


# --------------------------------------------------------------------------- judging coverage


def _pair_coverage(
    baseline: Side,
    candidate: Side,
    metric: str,
    terms: scoring.CoverageTerms | None = None,
    query_ids: Sequence[str] | None = None,
) -> Coverage | None:
    """The coverage of comparing two sides on ``metric`` over ``query_ids`` (default: all shared);
    None when the baseline's contract lists no judged@k. ``terms`` default to the baseline's
    contract's (:func:`scoring.coverage_terms`)."""
    judged_metric = scoring.coverage_metric(baseline.contract)
    if judged_metric is None:
        return None
    if terms is None:
        terms = scoring.coverage_terms(baseline.contract, source=baseline.source)

    def means(column: str) -> tuple[float, float] | None:
        if column not in baseline.per_query.columns or column not in candidate.per_query.columns:
            return None
        try:
            _, base, cand = _align(baseline.per_query, candidate.per_query, column, query_ids)
        except InputError:  # a side without that value on some query: not recorded
            return None
        return (float(base.mean()), float(cand.mean())) if base.size else None

    return coverage(judged_metric, terms, metric, means)


def _confound(comparison: stats.Comparison, found: Coverage | None) -> stats.Comparison:
    return comparison.confounded() if found is not None and found.confounded else comparison


# --------------------------------------------------------------------------- query metadata


def query_texts(queries: pl.DataFrame | None) -> dict[str, str]:
    """query_id -> text (empty when the queries have no ``text`` column)."""
    if queries is None or "text" not in queries.columns:
        return {}
    return dict(zip(queries["query_id"].cast(pl.Utf8).to_list(), queries["text"].to_list()))


def query_slices(queries: pl.DataFrame | None) -> dict[str, list[str]]:
    """slice name -> query ids carrying it (empty when queries have no ``slices`` column)."""
    if queries is None or "slices" not in queries.columns:
        return {}
    found: dict[str, list[str]] = {}
    for query_id, names in zip(queries["query_id"].cast(pl.Utf8).to_list(), queries["slices"].to_list()):
        for name in names or []:
            found.setdefault(str(name), []).append(query_id)
    return dict(sorted(found.items()))


# --------------------------------------------------------------------------- one pair


@dataclass(frozen=True)
class SliceResult:
    name: str
    comparison: stats.Comparison


@dataclass(frozen=True)
class PairReport:
    """Every figure the six-line report and its JSON form say (:mod:`releval.reporting.pair_text`)."""

    baseline: Side
    candidate: Side
    metric: str
    primary: stats.Comparison
    secondary: dict[str, stats.Comparison]
    slices: list[SliceResult]
    slice_name: str | None
    texts: dict[str, str]
    kind: str | None  # "ordering win", "retrieval win", ... (see :func:`_win_kind`)
    power: stats.PowerFigure  # what would settle the primary comparison
    coverage: Coverage | None = None  # judging coverage of the primary comparison; None: no judged@k in the contract

    @property
    def positives_only(self) -> bool:
        """The judgments declare only positives (BEIR/MTEB qrels): coverage is no question, a caveat stands instead."""
        return completeness.from_contract(self.baseline.contract).positives_only

    @property
    def sampled(self) -> bool:
        """The judgments are a stratified sample of the pool: the figures are inferred estimates (coverage is
        no question; the paired interval includes the sampling uncertainty), a caveat says so."""
        return completeness.from_contract(self.baseline.contract).sampled

    @property
    def sample_caveat(self) -> str | None:
        """The line a comparison under a sampled set carries (:func:`completeness.sampled_caveat`); else None."""
        found = completeness.from_contract(self.baseline.contract)
        if not found.sampled:
            return None
        sample = found.sample or {}
        return completeness.sampled_caveat(sample.get("pairs", "?"), sample.get("rate"))

    @property
    def thin(self) -> bool:
        """The primary comparison is inconclusive and the queries are too few for the difference seen
        (a verdict, or its absence for a coverage reason, is not a question of how many queries)."""
        return self.primary.verdict == INCONCLUSIVE and self.power.needs_more_queries

    def with_primary(self, primary: stats.Comparison) -> PairReport:
        """This report with its primary comparison replaced (its win kind follows)."""
        return replace(self, primary=primary, kind=_win_kind(primary, self.secondary))


def decided_metric(contract: Mapping[str, Any], metric: str) -> str:
    """The metric a comparison under ``contract`` decides on when ``metric`` is asked: under a sampled
    judgment set, its inferred form when the contract records one (ndcg@10 -> infndcg@10, map -> infap);
    else ``metric`` itself."""
    if not completeness.from_contract(contract).sampled:
        return metric
    name = inferred_name(metric)
    return name if name is not None and name in (contract.get(scoring.INFERRED_KEY) or []) else metric


def _win_kind(primary: stats.Comparison, secondary: Mapping[str, stats.Comparison]) -> str | None:
    """Tell an ordering change from a retrieval change using the recall@k secondaries.

    A significant primary change with every recall@k inconclusive moved the same documents up
    or down (ordering); a recall@k change in the same direction means different documents were
    found (retrieval). None when the primary is not an improvement or a regression (inconclusive,
    coverage-confounded, no verdict) or no recall@k was compared.
    """
    recalls = [c for m, c in secondary.items() if m.startswith("recall@")]
    if primary.verdict not in ("improvement", "regression") or not recalls:
        return None
    word = "win" if primary.verdict == "improvement" else "loss"
    if any(c.verdict == primary.verdict for c in recalls):
        return f"retrieval {word}"
    return f"ordering {word}"


def compare_sides(
    baseline: Side,
    candidate: Side,
    metric: str,
    secondary: Sequence[str] = (),
    queries: pl.DataFrame | None = None,
    slice_name: str | None = None,
    n_resamples: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
    coverage_terms: scoring.CoverageTerms | None = None,
) -> PairReport:
    """Paired comparison of two sides on ``metric`` with secondaries and per-slice differences.

    ``slice_name`` restricts every number to the queries carrying that slice; otherwise, when
    queries carry slices, each slice is compared on its own beside the overall result. The
    secondaries form one family and the slices another (see :func:`stats.decide`); a slice
    under :data:`stats.MIN_SLICE_QUERIES` queries, alone or beside the others, gets no verdict.

    Under a sampled judgment set ``metric`` is decided on its inferred form (:func:`decided_metric`).

    Coverage (under ``coverage_terms`` or the baseline contract's): when the compared queries are
    coverage-confounded, the primary and secondary verdicts are :data:`stats.COVERAGE_CONFOUNDED`;
    each slice is read on its own queries' judged@k.
    """
    metric = decided_metric(baseline.contract, metric)
    secondary = [m for m in secondary if m != metric]
    _check_comparable(baseline, candidate, [metric, *secondary])
    slices = query_slices(queries)
    subset = None
    if slice_name is not None:
        if slice_name not in slices:
            raise InputError(
                f"no query carries slice {slice_name!r}"
                + (f"; slices: {', '.join(slices)}" if slices else "; the queries carry no slices"),
                field="slice",
            )
        subset = slices[slice_name]

    alpha = stats.alpha_of(confidence)
    min_queries = stats.MIN_SLICE_QUERIES if slice_name is not None else 1

    def one(name: str, ids=subset) -> stats.Comparison:
        query_ids, base, cand = _align(baseline.per_query, candidate.per_query, name, ids)
        if not query_ids:
            raise InputError("no scored query in this selection", field="slice")
        return stats.compare_paired(base, cand, query_ids, n_resamples, confidence, seed, min_queries=min_queries)

    overall = _pair_coverage(baseline, candidate, metric, coverage_terms, subset)
    primary = _confound(one(metric), overall)
    decided_secondary = stats.decide_family([one(name) for name in secondary], alpha, min_queries)
    others = {name: _confound(comparison, overall) for name, comparison in zip(secondary, decided_secondary)}
    per_slice = []
    if slice_name is None:
        scored = set(baseline.per_query["query_id"].to_list())
        found = {name: [q for q in ids if q in scored] for name, ids in slices.items()}
        found = {name: ids for name, ids in found.items() if ids}
        decided = stats.decide_family([one(metric, ids) for ids in found.values()], alpha, stats.MIN_SLICE_QUERIES)
        per_slice = [
            SliceResult(name, _confound(comparison, _pair_coverage(baseline, candidate, metric, coverage_terms, ids)))
            for (name, ids), comparison in zip(found.items(), decided)
        ]
    return PairReport(
        baseline,
        candidate,
        metric,
        primary,
        others,
        per_slice,
        slice_name,
        query_texts(queries),
        _win_kind(primary, others),
        stats.power_figure(primary.difference_sd, primary.mean_difference, primary.n_queries, alpha),
        overall,
    )
