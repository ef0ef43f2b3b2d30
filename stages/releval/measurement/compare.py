"""Paired comparisons of scored configurations, grid-wide tests and the regression gate.

Pure logic: polars tables and dicts in, dataclasses and text out. The reading (reports, run
files, git revisions) is :mod:`releval.measurement.comparisons`; every statistic comes from
:mod:`releval.measurement.stats`, and every verdict from its one decision rule,
:func:`releval.measurement.stats.decide`, applied to each family of comparisons reported
together: the configurations of a grid against its baseline (report.md's blocks take the
grid's verdicts), the secondary metrics of a pair, and the slices of a pair (a slice under
:data:`releval.measurement.stats.MIN_SLICE_QUERIES` queries gets no verdict).

Judging coverage comes first: unjudged documents count as grade 0, so a side that retrieves
documents nobody judged is punished for being different (pooling bias). Every comparison reads
both sides' judged@k (k: the primary metric's cutoff, :func:`releval.measurement.scoring.coverage_metric`)
against the contract's coverage terms (:func:`releval.measurement.scoring.coverage_terms`); when
:func:`releval.measurement.scoring.coverage_verdict` finds either side too thinly judged or the two
too far apart, the verdict is :data:`releval.measurement.stats.COVERAGE_CONFOUNDED` instead of
improvement/regression/inconclusive (:class:`Coverage`), and the metric's condensed-list value
(the metric on the ranking with its unjudged documents removed; Sakai, "Alternatives to Bpref",
SIGIR 2007) and bpref are shown beside it, with a sentence when either picks a different winner.

A *side* of a comparison is one configuration's per-query scores (``query_id`` plus one column
per metric) together with the full contract it was scored under (the ``contract`` block of
reports/metrics.json). Two sides are comparable only when their contracts agree on every field
that changes what a number means (:data:`IGNORED_CONTRACT_FIELDS` lists the ones that do not)
and they were scored on exactly the same queries. Differences are always
``candidate - baseline``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import polars as pl

from releval.errors import InputError
from releval.judging import completeness
from releval.measurement import scoring, stats
from releval.measurement.metrics import Evaluation
from releval.measurement.metrics import contract_differences as differing_terms

# Contract fields that do not change what a per-query number means: which metrics were
# computed, which one is headlined, and how many topics the query file held (the query *set*
# is checked directly on the per-query tables instead).
# The coverage terms decide when a verdict is given, never what a number is.
IGNORED_CONTRACT_FIELDS = frozenset({"metrics", "primary", "queries", scoring.COVERAGE_KEY})
# Contract fields that describe the evaluation set (line 2) rather than the metric (line 3).
EVALUATION_SET_FIELDS = ("dataset", "judgments_version", "judgments_sha256", "queries", "split", "pooling")
# recall@20 first: on a small corpus recall@100 is saturated (scoring.saturation) and tells no system apart.
DEFAULT_SECONDARY = ("recall@20", "recall@100", "hit@10")
BPREF = "bpref"
THRESHOLDS = (1, 2, 3)
# An observed difference below this share of the smallest one the queries resolve counts as about
# zero: detecting it would take over (1 / 0.25)^2 = 16 times the queries, so what the queries do
# resolve is the useful figure.
ABOUT_ZERO_SHARE = 0.25
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


# --------------------------------------------------------------------------- comparability


def contract_differences(baseline: Mapping[str, Any], candidate: Mapping[str, Any]) -> list[str]:
    """Every contract field on which the two disagree (:func:`releval.measurement.metrics.contract_differences`,
    :data:`IGNORED_CONTRACT_FIELDS` aside), as ``"field: baseline X, candidate Y"``."""
    return [
        f"{key}: baseline {baseline.get(key, '<absent>')!r}, candidate {candidate.get(key, '<absent>')!r}"
        for key in differing_terms(baseline, candidate, ignore=IGNORED_CONTRACT_FIELDS)
    ]


def _preview(ids: Sequence[str], limit: int = 5) -> str:
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
        parts.append(f"{len(only_base)} only in baseline ({_preview(only_base)})")
    if only_cand:
        parts.append(f"{len(only_cand)} only in candidate ({_preview(only_cand)})")
    return (
        f"query sets differ: {len(only_base) + len(only_cand)} queries differ ("
        + "; ".join(parts)
        + f"; {len(base & cand)} shared)"
    )


def check_comparable(baseline: Side, candidate: Side, metrics: Sequence[str]) -> None:
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


def align(
    baseline: pl.DataFrame, candidate: pl.DataFrame, metric: str, query_ids: Sequence[str] | None = None
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Scores of both sides on the same queries, in query_id order (optionally a subset)."""
    joined = (
        baseline.select("query_id", pl.col(metric).alias("b"))
        .join(candidate.select("query_id", pl.col(metric).alias("c")), on="query_id")
        .sort("query_id")
    )
    if query_ids is not None:
        joined = joined.filter(pl.col("query_id").is_in(list(query_ids)))
    nulls = joined.filter(pl.col("b").is_null() | pl.col("c").is_null())
    if nulls.height:
        raise InputError(
            f"{nulls.height} queries have no score ({_preview(nulls['query_id'].to_list())})", field=metric
        )
    return (
        joined["query_id"].to_list(),
        joined["b"].to_numpy().astype(np.float64),
        joined["c"].to_numpy().astype(np.float64),
    )


# --------------------------------------------------------------------------- judging coverage


@dataclass(frozen=True)
class Coverage:
    """How deeply the two sides of one comparison are judged, and what that does to its verdict.

    Pairs are (baseline, candidate) means over the compared queries: ``judged`` of judged@k
    (``judged_metric``; None when a side has no per-query judged@k, and coverage is then not
    checked), ``standard`` of the compared metric, ``condensed`` of its condensed-list value
    (the metric on the ranking with its unjudged documents removed; Sakai, SIGIR 2007; None when
    a side has no ``<metric>'`` column), ``bpref`` (None when a side has no bpref).
    ``reason``: why the comparison is coverage-confounded (:func:`scoring.coverage_verdict`), None
    when it is not.
    """

    judged_metric: str
    terms: scoring.CoverageTerms
    metric: str
    names: tuple[str, str]
    judged: tuple[float, float] | None
    standard: tuple[float, float]
    condensed: tuple[float, float] | None
    bpref: tuple[float, float] | None
    reason: str | None

    @property
    def confounded(self) -> bool:
        return self.reason is not None

    def winners(self) -> dict[str, str]:
        """The side each measure favours (one of :attr:`names`, or ``tie``): the sign of its mean
        difference, for the standard value, the condensed-list value and bpref where known."""
        found = {self.metric: self._winner(self.standard)}
        if self.condensed is not None:
            found[scoring.condensed_name(self.metric)] = self._winner(self.condensed)
        if self.bpref is not None and self.metric != BPREF:
            found[BPREF] = self._winner(self.bpref)
        return found

    def _winner(self, means: tuple[float, float]) -> str:
        difference = means[1] - means[0]
        return self.names[1] if difference > 0 else self.names[0] if difference < 0 else "tie"

    def winner_differs(self) -> list[str]:
        """The alternatives (condensed-list value, bpref) that favour the other side than the standard value
        (a tie on either is no contradiction: it favours neither)."""
        winners = self.winners()
        standard = winners[self.metric]
        return [
            name
            for name, side in winners.items()
            if name != self.metric and "tie" not in (side, standard) and side != standard
        ]

    def terms_text(self) -> str:
        return f"each >= {self.terms.min_judged:g}, gap <= {self.terms.max_judged_gap:g}"

    def sentence(self) -> str:
        """One line: both sides' judged@k against the terms, the condensed-list value and bpref,
        and whether they pick another winner."""
        if self.judged is None:
            return f"{self.judged_metric} not recorded per query; coverage not checked"
        head = f"{self.judged_metric} {self.judged[0]:.2f} → {self.judged[1]:.2f}"
        if self.confounded:
            head += f": COVERAGE-CONFOUNDED, {self.reason} (contract terms: {self.terms_text()})"
        else:
            head += f", within the contract's terms ({self.terms_text()})"
        parts = [head]
        if self.condensed is not None:
            parts.append(
                f"condensed-list {scoring.condensed_name(self.metric)} (unjudged documents removed from the ranking; "
                f"Sakai, SIGIR 2007) {_means(self.condensed)}"
            )
        else:
            parts.append(f"condensed-list {scoring.condensed_name(self.metric)} not recorded")
        if self.metric != BPREF:
            parts.append(f"bpref {_means(self.bpref)}" if self.bpref is not None else "bpref not scored")
        differs = self.winner_differs()
        winners = self.winners()
        if differs:
            parts.append(
                f"THE WINNER DIFFERS: {self.metric} favours {_favours(winners[self.metric])}, "
                + ", ".join(f"{name} {_favours(winners[name])}" for name in differs)
            )
        elif len(winners) > 1:
            parts.append(f"same winner under {', '.join(winners)}")
        if self.confounded:
            parts.append(f"judge the missing documents (`{scoring.POOL_MISSING}`) and rescore for a verdict")
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        pair = lambda values: None if values is None else list(values)  # noqa: E731
        return {
            "metric": self.judged_metric,
            "terms": self.terms.to_dict(),
            "judged": pair(self.judged),
            "confounded": self.confounded,
            "reason": self.reason,
            "standard": {"metric": self.metric, "means": list(self.standard)},
            "condensed": {"metric": scoring.condensed_name(self.metric), "means": pair(self.condensed)},
            "bpref": pair(self.bpref),
            "winners": self.winners(),
            "winner_differs": self.winner_differs(),
        }


def _favours(side: str) -> str:
    return f"the {side}" if side in ("baseline", "candidate") else "neither" if side == "tie" else side


def _means(means: tuple[float, float]) -> str:
    return f"{means[0]:.4f} → {means[1]:.4f} (Δ {_signed(means[1] - means[0])})"


def coverage(
    judged_metric: str,
    terms: scoring.CoverageTerms,
    metric: str,
    means: Callable[[str], tuple[float, float] | None],
    names: tuple[str, str] = ("baseline", "candidate"),
) -> Coverage:
    """The :class:`Coverage` of one comparison; ``means(column)`` gives the (baseline, candidate)
    means of a per-query column over the compared queries, None when a side lacks it."""
    judged = means(judged_metric)
    standard = means(metric)
    if standard is None:
        raise InputError("no per-query scores to compare", field=metric)
    reason = None
    if judged is not None:
        reason = scoring.coverage_verdict(judged[0], judged[1], terms, metric=judged_metric, names=names)
    return Coverage(
        judged_metric=judged_metric,
        terms=terms,
        metric=metric,
        names=names,
        judged=judged,
        standard=standard,
        condensed=means(scoring.condensed_name(metric)),
        bpref=means(BPREF),
        reason=reason,
    )


def pair_coverage(
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
            _, base, cand = align(baseline.per_query, candidate.per_query, column, query_ids)
        except InputError:  # a side without that value on some query: not recorded
            return None
        return (float(base.mean()), float(cand.mean())) if base.size else None

    return coverage(judged_metric, terms, metric, means)


def _confound(comparison: stats.Comparison, found: Coverage | None) -> stats.Comparison:
    return comparison.confounded() if found is not None and found.confounded else comparison


# --------------------------------------------------------------------------- query metadata


def query_texts(queries: pl.DataFrame | None) -> dict[str, str]:
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


def must_never_break_ids(queries: pl.DataFrame | None) -> list[str]:
    if queries is None or "must_never_break" not in queries.columns:
        return []
    flagged = queries.filter(pl.col("must_never_break").fill_null(False))
    return sorted(flagged["query_id"].cast(pl.Utf8).to_list())


# --------------------------------------------------------------------------- one pair


@dataclass(frozen=True)
class SliceResult:
    name: str
    comparison: stats.Comparison


@dataclass(frozen=True)
class PairReport:
    """Everything the five-line report and its JSON form say."""

    baseline: Side
    candidate: Side
    metric: str
    primary: stats.Comparison
    secondary: dict[str, stats.Comparison]
    slices: list[SliceResult]
    slice_name: str | None
    texts: dict[str, str]
    kind: str | None  # "ordering win", "retrieval win", ... (see :func:`win_kind`)
    power: stats.PowerFigure  # what would settle the primary comparison
    coverage: Coverage | None = None  # judging coverage of the primary comparison; None: no judged@k in the contract


def win_kind(primary: stats.Comparison, secondary: Mapping[str, stats.Comparison]) -> str | None:
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

    Coverage (:func:`pair_coverage`, under ``coverage_terms`` or the baseline contract's): when
    the compared queries are coverage-confounded, the primary and secondary verdicts are
    :data:`stats.COVERAGE_CONFOUNDED`; each slice is read on its own queries' judged@k.
    """
    secondary = [m for m in secondary if m != metric]
    check_comparable(baseline, candidate, [metric, *secondary])
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
        query_ids, base, cand = align(baseline.per_query, candidate.per_query, name, ids)
        if not query_ids:
            raise InputError("no scored query in this selection", field="slice")
        return stats.compare_paired(base, cand, query_ids, n_resamples, confidence, seed, min_queries=min_queries)

    overall = pair_coverage(baseline, candidate, metric, coverage_terms, subset)
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
            SliceResult(name, _confound(comparison, pair_coverage(baseline, candidate, metric, coverage_terms, ids)))
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
        win_kind(primary, others),
        stats.power_figure(primary.difference_sd, primary.mean_difference, primary.n_queries, alpha),
        overall,
    )


def with_primary(report: PairReport, primary: stats.Comparison) -> PairReport:
    """``report`` with its primary comparison replaced (its win kind follows)."""
    return replace(report, primary=primary, kind=win_kind(primary, report.secondary))


# --------------------------------------------------------------------------- rendering


def _signed(value: float) -> str:
    if value is None or not math.isfinite(value):
        return "±inf" if value is not None else "–"
    return f"{value:+.4f}"


def _interval(interval: Sequence[float]) -> str:
    return f"[{_signed(interval[0])}, {_signed(interval[1])}]"


def format_p(p: float) -> str:
    return f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"


def _short(text: str | None, limit: int = 60) -> str:
    if not text:
        return ""
    text = " ".join(str(text).split())
    return f' "{text[: limit - 1]}…"' if len(text) > limit else f' "{text}"'


def _change(change: stats.QueryChange | None, texts: Mapping[str, str]) -> str:
    if change is None:
        return "none"
    return f"{change.query_id}{_short(texts.get(change.query_id))} {change.baseline:.4f} → {change.candidate:.4f}"


def describe_evaluation_set(contract: Mapping[str, Any], n_queries: int, slice_name: str | None = None) -> str:
    sha = contract.get("judgments_sha256")
    parts = [
        f"dataset {contract.get('dataset', 'unknown')}",
        f"judgments {contract.get('judgments_version', 'unknown')}" + (f" (sha256 {str(sha)[:12]})" if sha else ""),
        f"{n_queries} queries compared"
        + (f" of {contract['queries']}" if isinstance(contract.get("queries"), int) else ""),
        f"split {contract.get('split', 'unknown')}" + (f", slice {slice_name}" if slice_name else ""),
        f"pooling {contract.get('pooling') or 'unknown'}",
    ]
    return ", ".join(parts)


# Terms a reader checks first, in this order; any others follow in the order given.
CONTRACT_ORDER = ("gain", "ties", "rel_threshold", "no_relevant", "missing_in_run", "collapse")


def describe_contract(contract: Mapping[str, Any], metric: str) -> str:
    skip = set(EVALUATION_SET_FIELDS) | IGNORED_CONTRACT_FIELDS
    keys = [k for k in CONTRACT_ORDER if k in contract] + [k for k in contract if k not in CONTRACT_ORDER]
    fields = [f"{key}={contract[key]}" for key in keys if key not in skip]
    return f"{metric} under " + "; ".join(fields) if fields else metric


def verdict_text(comparison: stats.Comparison) -> str:
    """The verdict as printed: the word, or why there is none."""
    if comparison.verdict == stats.NO_VERDICT:
        return f"too few queries for a verdict (< {stats.MIN_SLICE_QUERIES})"
    return comparison.verdict


def _holm(comparison: stats.Comparison, family: str) -> str:
    """ ", Holm over N <family> P" when the comparison was decided in a family of several."""
    if comparison.family_size < 2 or comparison.adjusted_p_value is None:
        return ""
    return f", Holm over {comparison.family_size} {family} {format_p(comparison.adjusted_p_value)}"


def about_zero(power: stats.PowerFigure) -> bool:
    """The observed difference is about zero next to the smallest the queries resolve (:data:`ABOUT_ZERO_SHARE`)."""
    if power.resolvable is None:
        return False
    return power.beyond_max or abs(power.mean_difference) < ABOUT_ZERO_SHARE * power.resolvable


def needs_more_queries(power: stats.PowerFigure) -> bool:
    """The queries are too few for the difference seen: it is about zero, or detecting a true
    difference of its size at the figure's power takes more queries than there are."""
    if power.sd is None or power.sd == 0.0 or power.resolvable is None:
        return False
    if about_zero(power):
        return True
    return power.queries_needed is not None and power.queries_needed > power.n_queries


def thin_evidence(power: stats.PowerFigure, metric: str) -> str | None:
    """One sentence when the queries are too few for the difference seen: how many would detect
    it, or, for a difference of about zero, the smallest difference these queries resolve. None
    when they suffice or there is no spread to plan from."""
    if not needs_more_queries(power):
        return None
    n, sd = power.n_queries, f"SD of per-query differences {power.sd:.4f}"
    if about_zero(power):
        return (
            f"{n} queries; the observed {metric} difference {_signed(power.mean_difference)} is about zero next to "
            f"the smallest these queries resolve, {power.resolvable:.4f} at {power.power:.0%} power ({sd}): "
            "a smaller true difference would go unseen"
        )
    return (
        f"{n} queries; to detect the observed {metric} difference of {abs(power.mean_difference):.4f} at "
        f"{power.power:.0%} power you would need about {power.queries_needed} queries ({sd}; `{power.command()}`)"
    )


def pair_thin_evidence(report: PairReport) -> str | None:
    """:func:`thin_evidence` of an inconclusive primary comparison (a verdict, or its absence for
    a coverage reason, is not a question of how many queries)."""
    if report.primary.verdict != INCONCLUSIVE:
        return None
    return thin_evidence(report.power, report.metric)


def grid_thin_evidence(report: GridReport, name: Callable[[str], str] = str) -> str | None:
    """When the grid's queries are too few for the differences from the baseline it calls
    inconclusive: how many queries the largest would need, and how many are about zero next to
    what the queries resolve. None when every inconclusive difference is resolvable."""
    figures = {
        row.config_id: stats.power_figure(row.difference_sd, row.mean_difference, report.n_queries, report.alpha)
        for row in report.rows
        if row.verdict == INCONCLUSIVE
    }
    short = {cid: figure for cid, figure in figures.items() if needs_more_queries(figure)}
    if not short:
        return None
    parts = []
    sizeable = {cid: f for cid, f in short.items() if not about_zero(f)}
    if sizeable:
        cid, f = max(sizeable.items(), key=lambda item: (abs(item[1].mean_difference), item[0]))
        parts.append(
            f"to detect the largest observed difference, {name(cid)}'s {_signed(f.mean_difference)}, at "
            f"{f.power:.0%} power you would need about {f.queries_needed} queries "
            f"(SD of per-query differences {f.sd:.4f}; `{f.command()}`)"
        )
    zero = {cid: f for cid, f in short.items() if about_zero(f)}
    if zero:
        low, high = min(f.resolvable for f in zero.values()), max(f.resolvable for f in zero.values())
        span = f"{low:.4f}" if f"{low:.4f}" == f"{high:.4f}" else f"{low:.4f}–{high:.4f}"
        parts.append(
            f"{len(zero)} ({', '.join(name(cid) for cid in sorted(zero))}) differ from it by about zero, "
            f"below the {span} these queries resolve at {next(iter(zero.values())).power:.0%} power"
        )
    return (
        f"{report.n_queries} queries are too few for {len(short)} of the {len(report.rows)} differences "
        f"from {name(report.baseline)} called inconclusive: " + "; ".join(parts)
    )


def render_pair(report: PairReport, family: str = "comparisons") -> str:
    """The six-line report, a seventh on judging coverage when the contract lists a judged@k
    (:meth:`Coverage.sentence`), then one line per slice when the queries carry slices.

    ``family`` names what the primary's Holm adjustment ran over, when it ran over several.
    """
    p, metric = report.primary, report.metric
    conf = f"{p.confidence:.0%}"
    secondary = (
        "; ".join(
            f"{name} {c.baseline_mean:.4f} → {c.candidate_mean:.4f}, Δ {_signed(c.mean_difference)} "
            f"{conf} CI {_interval(c.bootstrap_ci)}{_holm(c, 'metrics')} {verdict_text(c)}"
            for name, c in report.secondary.items()
        )
        or "none"
    )
    kind = f" ({report.kind})" if report.kind else ""
    verdict = verdict_text(p)
    lines = [
        f"1. candidate {report.candidate.ref} vs baseline {report.baseline.ref}",
        f"2. evaluation set: {describe_evaluation_set(report.baseline.contract, p.n_queries, report.slice_name)}",
        f"3. metric contract: {describe_contract(report.baseline.contract, metric)}",
        f"4. result: {metric} {p.baseline_mean:.4f} → {p.candidate_mean:.4f}, "
        f"Δ {_signed(p.mean_difference)}, {conf} CI {_interval(p.bootstrap_ci)} "
        f"(paired bootstrap, {p.n_resamples} query resamples, p {format_p(p.bootstrap_p_value)}"
        f"{_holm(p, family)}; paired t {_interval(p.t_interval)}); W/L/T {p.wins}/{p.losses}/{p.ties}, "
        f"sign test p {format_p(p.sign_test_p_value)} → "
        f"{verdict.upper() if p.verdict != stats.NO_VERDICT else verdict}{kind}",
        f"5. secondary: {secondary}. Worst query: {_change(p.worst_regression, report.texts)}; "
        f"best: {_change(p.best_improvement, report.texts)}",
        f"6. power: {report.power.sentence()}",
    ]
    thin = pair_thin_evidence(report)
    if thin is not None:
        lines.append(f"   thin evidence: {thin}")
    if report.coverage is not None:
        lines.append(f"7. coverage: {report.coverage.sentence()}")
    elif completeness.from_contract(report.baseline.contract).positives_only:
        lines.append(f"7. coverage: not a question here: {completeness.POSITIVES_ONLY_CAVEAT}")
    for result in report.slices:
        c = result.comparison
        if c.verdict == stats.NO_VERDICT:
            numbers = f"Δ {_signed(c.mean_difference)}, W/L/T {c.wins}/{c.losses}/{c.ties}"
        else:
            numbers = (
                f"Δ {_signed(c.mean_difference)} {conf} CI {_interval(c.bootstrap_ci)}, "
                f"W/L/T {c.wins}/{c.losses}/{c.ties}, p {format_p(c.bootstrap_p_value)}{_holm(c, 'slices')}"
            )
        lines.append(f"   slice {result.name} ({c.n_queries} queries): {numbers} → {verdict_text(c)}")
    return "\n".join(lines)


def _comparison_dict(comparison: stats.Comparison, texts: Mapping[str, str]) -> dict[str, Any]:
    data = comparison.to_dict()
    for key in ("worst_regression", "best_improvement"):
        if data[key] is not None:
            data[key]["text"] = texts.get(data[key]["query_id"])
            data[key]["difference"] = data[key]["candidate"] - data[key]["baseline"]
    return data


def pair_to_dict(report: PairReport) -> dict[str, Any]:
    """JSON-safe form of a :class:`PairReport` (infinite interval ends become null)."""
    contract = report.baseline.contract
    return {
        "baseline": {"ref": report.baseline.ref, "source": report.baseline.source},
        "candidate": {"ref": report.candidate.ref, "source": report.candidate.source},
        "evaluation_set": {
            "dataset": contract.get("dataset"),
            "judgments_version": contract.get("judgments_version"),
            "judgments_sha256": contract.get("judgments_sha256"),
            "queries": report.primary.n_queries,
            "split": contract.get("split"),
            "slice": report.slice_name,
            "pooling": contract.get("pooling"),
        },
        "contract": dict(contract),
        "metric": report.metric,
        "verdict": report.primary.verdict,
        "kind": report.kind,
        "primary": _comparison_dict(report.primary, report.texts),
        "power": report.power.to_dict(),
        "thin_evidence": pair_thin_evidence(report),
        "secondary": {name: _comparison_dict(c, report.texts) for name, c in report.secondary.items()},
        "slices": {r.name: _comparison_dict(r.comparison, report.texts) for r in report.slices},
        "minimum_slice_queries": stats.MIN_SLICE_QUERIES,
        "coverage": None if report.coverage is None else report.coverage.to_dict(),
    }


# --------------------------------------------------------------------------- the grid


@dataclass(frozen=True)
class GridRow:
    config_id: str
    mean: float
    mean_difference: float
    bootstrap_ci: tuple[float, float]
    p_bootstrap: float
    p_bootstrap_holm: float
    wins: int
    losses: int
    ties: int
    p_sign: float
    p_sign_holm: float
    verdict: stats.Verdict
    indistinguishable_from_best: bool
    difference_sd: float  # SD of the per-query differences against the baseline
    coverage: Coverage | None = None  # judging coverage against the baseline; None: no judged@k in the contract


@dataclass(frozen=True)
class ThresholdStability:
    """Winner of the grid when relevance means grade >= t, for each threshold t.

    ``means[t]`` is None where no query has a document of grade >= t (nothing to rank by);
    such thresholds have no winner and do not count as a change.
    """

    means: dict[int, dict[str, float] | None]
    winners: dict[int, str | None]

    @property
    def changes(self) -> bool:
        return len({w for w in self.winners.values() if w is not None}) > 1


@dataclass(frozen=True)
class GridReport:
    metric: str
    baseline: str
    n_queries: int
    n_resamples: int
    seed: int
    alpha: float
    baseline_mean: float
    rows: list[GridRow]  # every configuration but the baseline, in grid order
    best: stats.BestSet
    winner_frequencies: dict[str, float]
    spread: stats.ScoreSpread
    thresholds: ThresholdStability | None
    contract: dict[str, Any] = field(default_factory=dict)
    runner_up: str | None = None  # the next configuration indistinguishable from the best, if any
    settle: stats.PowerFigure | None = None  # best - runner_up: what would separate them
    coverage_metric: str | None = None  # the judged@k coverage is read from; None: the contract lists none
    coverage_terms: scoring.CoverageTerms | None = None
    baseline_judged: float | None = None  # None: not recorded per query

    def confounded(self) -> list[GridRow]:
        """The rows whose comparison with the baseline is coverage-confounded."""
        return [row for row in self.rows if row.coverage is not None and row.coverage.confounded]


def score_matrix(
    per_query: pl.DataFrame, metric: str, configs: Sequence[str] | None = None
) -> tuple[list[str], list[str], np.ndarray]:
    """(query ids, config ids, queries x configs matrix) from a long per-query table.

    Refuses configurations scored on different query sets, naming each and how many differ.
    """
    if metric not in per_query.columns:
        raise InputError(f"no per-query {metric}", field="metric")
    present = list(dict.fromkeys(per_query["config_id"].to_list()))
    configs = list(configs) if configs is not None else present
    unknown = [c for c in configs if c not in present]
    if unknown:
        raise InputError(f"unknown configuration(s) {unknown}; known: {present}", field="config_id")
    table = per_query.filter(pl.col("config_id").is_in(configs))
    all_ids = set(table["query_id"].to_list())
    problems = []
    for config in configs:
        ids = table.filter(pl.col("config_id") == config)["query_id"].to_list()
        if len(ids) != len(set(ids)):
            problems.append(f"{config} has {len(ids) - len(set(ids))} duplicated query row(s)")
        missing = all_ids - set(ids)
        if missing:
            problems.append(f"{config} lacks {len(missing)} queries ({_preview(missing)})")
    if problems:
        raise NotComparable("grid", "grid", problems)
    wide = table.pivot(on="config_id", index="query_id", values=metric).sort("query_id")
    matrix = wide.select(configs).to_numpy().astype(np.float64)
    if np.isnan(matrix).any():
        raise InputError(f"{int(np.isnan(matrix).sum())} missing per-query scores", field=metric)
    return wide["query_id"].to_list(), configs, matrix


def config_means(per_query: pl.DataFrame, column: str, configs: Sequence[str] | None = None) -> dict[str, float] | None:
    """Each configuration's mean of a per-query column; None when the column is absent or some
    configuration has no value on some query (it was not recorded for it)."""
    if column not in per_query.columns:
        return None
    try:
        _, names, matrix = score_matrix(per_query, column, configs)
    except InputError:
        return None
    return {name: float(value) for name, value in zip(names, matrix.mean(axis=0))}


def score_run(
    doc_run: pl.DataFrame,
    qrels: pl.DataFrame,
    contract: Mapping[str, Any],
    metrics: list[str] | None = None,
    **overrides: Any,
) -> Evaluation:
    """Evaluate a document-level run under ``contract`` (fields in ``overrides`` replaced)."""
    metrics = list(metrics if metrics is not None else contract.get("metrics") or [])
    if not metrics:
        raise InputError("the contract lists no metrics", field="metrics")
    return scoring.score_table(doc_run, qrels, metrics, scoring.contract_from_record(contract, **overrides))


def threshold_means(
    doc_runs: Mapping[str, pl.DataFrame],
    qrels: pl.DataFrame,
    contract: Mapping[str, Any],
    metric: str,
    thresholds: Sequence[int] = THRESHOLDS,
) -> dict[int, dict[str, float] | None]:
    """Each configuration's mean ``metric`` with relevance at grade >= t, for each threshold t.

    ``doc_runs`` (config id -> document-level run) and ``qrels`` hold only the scored queries,
    so the t = rel_threshold row reproduces the reported means. A threshold no query reaches
    (no document of that grade among the scored queries) maps to None."""
    usable = [t for t in thresholds if qrels.filter(pl.col("grade") >= t).height]
    means: dict[int, dict[str, float] | None] = {t: ({} if t in usable else None) for t in thresholds}
    for config_id, doc_run in doc_runs.items():
        for threshold in usable:
            try:
                evaluation = score_run(doc_run, qrels, contract, [metric], rel_threshold=threshold)
            except InputError as exc:
                if "no query left to evaluate" not in str(exc):
                    raise
                means[threshold] = None  # this run shares no query with a relevant document
                continue
            by_config = means[threshold]
            if by_config is not None:
                by_config[config_id] = float(evaluation.mean[metric])
    return means


def threshold_stability(means: Mapping[int, Mapping[str, float] | None]) -> ThresholdStability:
    """Winner (highest mean; first in order on an exact tie) per relevance threshold."""
    winners: dict[int, str | None] = {}
    for threshold, by_config in means.items():
        if not by_config:
            winners[int(threshold)] = None
            continue
        names = list(by_config)
        values = np.array([by_config[n] for n in names], dtype=np.float64)
        winners[int(threshold)] = names[int(np.argmax(values))]
    return ThresholdStability({int(t): dict(m) if m else None for t, m in means.items()}, winners)


def compare_grid(
    per_query: pl.DataFrame,
    baseline: str,
    metric: str,
    configs: Sequence[str] | None = None,
    n_resamples: int = 10_000,
    seed: int = 0,
    alpha: float = 0.05,
    spread_width: float = 0.01,
    threshold_means: Mapping[int, Mapping[str, float]] | None = None,
    contract: Mapping[str, Any] | None = None,
    coverage_terms: scoring.CoverageTerms | None = None,
) -> GridReport:
    """Every configuration against ``baseline``: raw and Holm-adjusted p-values (bootstrap and
    sign test), verdicts by :func:`stats.decide` over the family, the set indistinguishable from
    the best, what would separate the best from the runner-up, and stability of the winner.

    With a ``contract`` listing a judged@k, each comparison's coverage is read (:class:`Coverage`,
    under ``coverage_terms`` or the contract's): a coverage-confounded one gets
    :data:`stats.COVERAGE_CONFOUNDED` for its verdict, its p-values kept."""
    query_ids, configs, matrix = score_matrix(per_query, metric, configs)
    if baseline not in configs:
        raise InputError(f"unknown baseline {baseline!r}; known: {configs}", field="baseline")
    b = configs.index(baseline)
    others = [i for i in range(len(configs)) if i != b]
    judged_metric = scoring.coverage_metric(contract) if contract else None
    if judged_metric is not None and coverage_terms is None:
        coverage_terms = scoring.coverage_terms(contract or {}, source="metrics.json contract")
    columns = [judged_metric, scoring.condensed_name(metric), BPREF] if judged_metric else []
    column_means = {column: config_means(per_query, column, configs) for column in columns}
    judged_means = column_means.get(judged_metric) if judged_metric else None

    def row_coverage(config_id: str) -> Coverage | None:
        if judged_metric is None or coverage_terms is None:
            return None
        standard = {configs[i]: float(matrix[:, i].mean()) for i in (b, configs.index(config_id))}

        def means(column: str) -> tuple[float, float] | None:
            found = standard if column == metric else column_means.get(column)
            return None if found is None else (found[baseline], found[config_id])

        return coverage(judged_metric, coverage_terms, metric, means, (baseline, config_id))

    best = stats.indistinguishable_from_best(matrix, configs, n_resamples, alpha, seed)
    rows = []
    if others:
        grid = stats.bootstrap_many(matrix[:, b], matrix[:, others], n_resamples, 1 - alpha, seed)
        wlt = [stats.win_loss_tie(matrix[:, b], matrix[:, i]) for i in others]
        p_sign = np.array([stats.sign_test(wins, losses) for wins, losses, _ in wlt])
        p_sign_holm = stats.holm(p_sign)
        decisions = stats.decide(grid.mean_difference, grid.p_value, [len(query_ids)] * len(others), alpha)
        for k, i in enumerate(others):
            low, high = float(grid.low[k]), float(grid.high[k])
            found = row_coverage(configs[i])
            verdict = decisions[k].verdict
            if found is not None and found.confounded:
                verdict = stats.COVERAGE_CONFOUNDED
            rows.append(
                GridRow(
                    config_id=configs[i],
                    mean=float(matrix[:, i].mean()),
                    mean_difference=float(grid.mean_difference[k]),
                    bootstrap_ci=(low, high),
                    p_bootstrap=float(grid.p_value[k]),
                    p_bootstrap_holm=float(decisions[k].adjusted_p_value),
                    wins=wlt[k][0],
                    losses=wlt[k][1],
                    ties=wlt[k][2],
                    p_sign=float(p_sign[k]),
                    p_sign_holm=float(p_sign_holm[k]),
                    verdict=verdict,
                    indistinguishable_from_best=configs[i] in best.indistinguishable,
                    difference_sd=stats.difference_sd(matrix[:, b], matrix[:, i]),
                    coverage=found,
                )
            )
    runner_up = best.indistinguishable[1] if len(best.indistinguishable) > 1 else None
    settle = None
    if runner_up is not None:
        first, second = matrix[:, configs.index(best.best)], matrix[:, configs.index(runner_up)]
        settle = stats.power_figure(
            stats.difference_sd(second, first), float(np.mean(first - second)), len(query_ids), alpha
        )
    return GridReport(
        metric=metric,
        baseline=baseline,
        n_queries=len(query_ids),
        n_resamples=int(n_resamples),
        seed=seed,
        alpha=float(alpha),
        baseline_mean=float(matrix[:, b].mean()),
        rows=rows,
        best=best,
        winner_frequencies=stats.winner_frequencies(matrix, configs, n_resamples, seed),
        spread=stats.score_spread(matrix.mean(axis=0), spread_width),
        thresholds=threshold_stability(threshold_means) if threshold_means else None,
        contract=dict(contract or {}),
        runner_up=runner_up,
        settle=settle,
        coverage_metric=judged_metric,
        coverage_terms=coverage_terms if judged_metric else None,
        baseline_judged=None if judged_means is None else judged_means[baseline],
    )


def adopt_grid_verdicts(pairs: Mapping[str, PairReport], grid: GridReport) -> dict[str, PairReport]:
    """The pairs (config id -> its comparison with the grid's baseline) with the grid's Holm-adjusted
    p-value and verdict on the primary metric, so that a configuration has one verdict wherever the
    grid and its pair are shown together."""
    rows = {row.config_id: row for row in grid.rows}
    adopted = {}
    for config_id, pair in pairs.items():
        row = rows[config_id]
        decision = stats.Decision(row.verdict, row.p_bootstrap_holm, len(grid.rows))
        adopted[config_id] = with_primary(pair, pair.primary.decided(decision))
    return adopted


def settle_sentence(report: GridReport, name: Callable[[str], str] = str) -> str:
    """What would separate the best configuration from the runner-up (or that nothing needs to);
    ``name`` formats a configuration id."""
    if report.runner_up is None or report.settle is None:
        return f"{name(report.best.best)} is separated from every other configuration; nothing left to settle"
    return f"{name(report.best.best)} vs {name(report.runner_up)}: {report.settle.sentence()}"


def render_grid(report: GridReport) -> str:
    conf = f"{1 - report.alpha:.0%}"
    lines = [
        f"grid: {report.metric} vs baseline {report.baseline} on {report.n_queries} queries "
        f"({report.n_resamples} paired bootstrap resamples, seed {report.seed}; "
        f"p-values Holm-adjusted over {len(report.rows)} comparisons)"
    ]
    if report.contract:
        lines.append(f"evaluation set: {describe_evaluation_set(report.contract, report.n_queries)}")
        lines.append(f"metric contract: {describe_contract(report.contract, report.metric)}")
    width = max([len(report.baseline) + 11] + [len(r.config_id) for r in report.rows])
    judged = report.coverage_metric if report.baseline_judged is not None else None
    judged_width = len(judged or "")
    verdict_width = max([12] + [len(r.verdict) for r in report.rows])
    header = (
        f"{'configuration':<{width}}  {'mean':>7}  {'Δ':>8}  {conf + ' CI':^20}  "
        f"{'p boot':>7}  {'Holm':>7}  {'W/L/T':>11}  {'p sign':>7}  {'Holm':>7}  "
        + (f"{judged}  " if judged else "")
        + "verdict"
    )

    def judged_cell(row: GridRow | None) -> str:
        if not judged:
            return ""
        value = report.baseline_judged if row is None else row.coverage.judged[1] if row.coverage.judged else None
        return f"{format_cell_number(value, '{:.2f}'):>{judged_width}}  "

    lines += [
        "",
        header,
        "-" * len(header),
        f"{report.baseline + ' (baseline)':<{width}}  {report.baseline_mean:>7.4f}  {'':>8}  "
        f"{'':^20}  {'':>7}  {'':>7}  {'':>11}  {'':>7}  {'':>7}  {judged_cell(None)}{'—':<{verdict_width}}"
        + ("  ≈best" if report.baseline in report.best.indistinguishable else ""),
    ]
    for r in report.rows:
        mark = "  ≈best" if r.indistinguishable_from_best else ""
        lines.append(
            f"{r.config_id:<{width}}  {r.mean:>7.4f}  {_signed(r.mean_difference):>8}  "
            f"{_interval(r.bootstrap_ci):^20}  {format_p(r.p_bootstrap):>7}  "
            f"{format_p(r.p_bootstrap_holm):>7}  {f'{r.wins}/{r.losses}/{r.ties}':>11}  "
            f"{format_p(r.p_sign):>7}  {format_p(r.p_sign_holm):>7}  {judged_cell(r)}{r.verdict:<{verdict_width}}{mark}"
        )
    lines += coverage_lines(report)
    best = report.best
    lines += [
        "",
        f"best: {best.best}; statistically indistinguishable from it (bootstrap, Holm, "
        f"alpha {best.alpha:g}): {', '.join(best.indistinguishable)}",
    ]
    freqs = sorted(report.winner_frequencies.items(), key=lambda kv: (-kv[1], kv[0]))
    lines.append(
        "winner under query resampling: " + ", ".join(f"{name} {share:.1%}" for name, share in freqs if share > 0)
    )
    s = report.spread
    lines.append(
        f"score spread: {s.low:.4f}–{s.high:.4f} ({s.spread:.4f}); "
        + (
            f"NARROW: every configuration within {s.width:g}, differences too small to matter"
            if s.narrow
            else f"not narrow (width {s.width:g})"
        )
    )
    lines.append(f"winner by relevance threshold: {threshold_sentence(report.thresholds)}")
    lines.append(f"to settle the best: {settle_sentence(report)}")
    thin = grid_thin_evidence(report)
    if thin is not None:
        lines.append(f"thin evidence: {thin}")
    return "\n".join(lines)


def format_cell_number(value: float | None, fmt: str = "{:.4f}") -> str:
    return "–" if value is None else fmt.format(value)


def coverage_lines(report: GridReport) -> list[str]:
    """The grid's coverage notes: the terms, how many comparisons are coverage-confounded, and for
    each confounded or winner-changing one why, with its condensed-list value and bpref."""
    if report.coverage_metric is None or report.coverage_terms is None:
        if completeness.from_contract(report.contract).positives_only:
            return ["", f"coverage: not a question here: {completeness.POSITIVES_ONLY_CAVEAT}"]
        return []
    terms = report.coverage_terms
    head = (
        f"coverage: {report.coverage_metric} (contract terms: each >= {terms.min_judged:g}, gap <= "
        f"{terms.max_judged_gap:g}); "
    )
    if report.baseline_judged is None:
        return ["", head + "not recorded per query for every configuration; not checked"]
    confounded = report.confounded()
    noted = [
        r for r in report.rows if r.coverage is not None and (r.coverage.confounded or r.coverage.winner_differs())
    ]
    lines = [
        "",
        head
        + (
            f"{len(confounded)} of {len(report.rows)} comparisons COVERAGE-CONFOUNDED, no verdict "
            f"(judge the missing documents: `{scoring.POOL_MISSING}`)"
            if confounded
            else "every comparison within them"
        ),
    ]
    for r in noted:
        lines.append(f"  {r.config_id}: {r.coverage.sentence()}")
    return lines


def threshold_sentence(thresholds: ThresholdStability | None) -> str:
    """The winner at each relevance threshold and whether it changes."""
    if thresholds is None:
        return "not computed"
    return ", ".join(f"grade >= {k}: {w or 'no relevant documents'}" for k, w in sorted(thresholds.winners.items())) + (
        " → the WINNER CHANGES with the threshold" if thresholds.changes else " → same winner at every threshold"
    )


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def grid_to_dict(report: GridReport) -> dict[str, Any]:
    return {
        "metric": report.metric,
        "baseline": report.baseline,
        "baseline_mean": report.baseline_mean,
        "queries": report.n_queries,
        "n_resamples": report.n_resamples,
        "seed": report.seed,
        "alpha": report.alpha,
        "contract": report.contract,
        "configs": [
            {
                "config_id": r.config_id,
                "mean": r.mean,
                "mean_difference": r.mean_difference,
                "bootstrap_ci": [_finite(r.bootstrap_ci[0]), _finite(r.bootstrap_ci[1])],
                "p_bootstrap": r.p_bootstrap,
                "p_bootstrap_holm": r.p_bootstrap_holm,
                "wins": r.wins,
                "losses": r.losses,
                "ties": r.ties,
                "p_sign": r.p_sign,
                "p_sign_holm": r.p_sign_holm,
                "verdict": r.verdict,
                "indistinguishable_from_best": r.indistinguishable_from_best,
                "difference_sd": _finite(r.difference_sd),
                "coverage": None if r.coverage is None else r.coverage.to_dict(),
            }
            for r in report.rows
        ],
        "coverage": None
        if report.coverage_metric is None
        else {
            "metric": report.coverage_metric,
            "terms": None if report.coverage_terms is None else report.coverage_terms.to_dict(),
            "baseline_judged": report.baseline_judged,
            "confounded": [r.config_id for r in report.confounded()],
        },
        "best": report.best.best,
        "indistinguishable_from_best": list(report.best.indistinguishable),
        "runner_up": report.runner_up,
        "settle": None if report.settle is None else report.settle.to_dict(),
        "thin_evidence": grid_thin_evidence(report),
        "adjusted_p_vs_best": report.best.adjusted_p_values,
        "winner_frequencies": report.winner_frequencies,
        "score_spread": {
            "low": report.spread.low,
            "high": report.spread.high,
            "spread": report.spread.spread,
            "width": report.spread.width,
            "narrow": report.spread.narrow,
        },
        "thresholds": None
        if report.thresholds is None
        else {
            "winners": {str(k): v for k, v in report.thresholds.winners.items()},
            "means": {str(k): v for k, v in report.thresholds.means.items()},  # null: no relevant
            "winner_changes": report.thresholds.changes,
        },
    }


# --------------------------------------------------------------------------- the gate

GATE_PASS, GATE_FAIL, GATE_INCOMPARABLE = 0, 1, 2


@dataclass(frozen=True)
class Broken:
    """A must-never-break query without a relevant document in the candidate's top N."""

    query_id: str
    best_rank: int | None  # document rank of its best-ranked relevant document; None: not retrieved


def document_ranks(run: pl.DataFrame, ties: str = "docid-asc") -> pl.DataFrame:
    """query_id, doc_id, doc_rank (1 = best) from a run, ordered as the metric engine orders it.

    A document scores its best row (its best chunk, as after collapsing); documents are ordered
    by score descending, then doc_id ascending (``ties="trec_eval"``: descending, scores
    compared in single precision), so ranks count documents, not chunks.
    """
    docs = (
        run.select(pl.col("query_id").cast(pl.Utf8), pl.col("doc_id").cast(pl.Utf8), pl.col("score").cast(pl.Float64))
        .group_by("query_id", "doc_id")
        .agg(pl.col("score").max())
    )
    if ties == "trec_eval":
        docs = docs.with_columns(pl.col("score").cast(pl.Float32))
    docs = docs.sort(["query_id", "score", "doc_id"], descending=[False, True, ties == "trec_eval"])
    return docs.select(
        "query_id", "doc_id", pl.int_range(1, pl.len() + 1).over("query_id").cast(pl.Int64).alias("doc_rank")
    )


def must_never_break(
    flagged: Sequence[str],
    qrels: pl.DataFrame,
    run: pl.DataFrame,
    top_n: int = 3,
    rel_threshold: int = 1,
    ties: str = "docid-asc",
) -> list[Broken]:
    """Flagged queries with no document of grade >= ``rel_threshold`` in the run's top ``top_n``.

    A flagged query without any relevant judged document cannot be checked and is bad input.
    """
    if top_n < 1:
        raise InputError(f"must be >= 1, got {top_n}", field="must-rank")
    if not flagged:
        return []
    relevant = qrels.filter(pl.col("grade") >= rel_threshold).select(
        pl.col("query_id").cast(pl.Utf8), pl.col("doc_id").cast(pl.Utf8)
    )
    unjudged = sorted(set(flagged) - set(relevant["query_id"].to_list()))
    if unjudged:
        raise InputError(
            f"must-never-break quer{'y' if len(unjudged) == 1 else 'ies'} "
            f"{_preview(unjudged)} ha{'s' if len(unjudged) == 1 else 've'} no judged "
            f"document of grade >= {rel_threshold}",
            field="must_never_break",
        )
    ranks = document_ranks(run, ties).join(relevant, on=["query_id", "doc_id"])
    best = dict(ranks.group_by("query_id").agg(pl.col("doc_rank").min()).iter_rows())
    return [Broken(q, best.get(q)) for q in sorted(flagged) if best.get(q) is None or best[q] > top_n]


@dataclass(frozen=True)
class GateResult:
    code: int
    message: str


def gate_decision(
    report: PairReport,
    broken: Sequence[Broken],
    top_n: int,
    margin: float | None = None,
    sealed: Sequence[str] = (),
) -> GateResult:
    """Exit 1 on a broken must-never-break query, and on the metric: without ``margin``, on a
    significant regression (the verdict of :func:`stats.decide`); with it (non-inferiority),
    when the interval's lower bound of candidate - baseline is below ``-margin``. Else 0.

    A coverage-confounded comparison (:class:`Coverage`) neither passes nor fails on the metric:
    it exits 2 (:data:`GATE_INCOMPARABLE`, "cannot decide"), with or without ``margin``, naming
    the judging debt's command; a broken must-never-break query still exits 1. ``sealed``: flagged
    queries of the sealed holdout, not checked (their judgments are not in the working files); the
    message says so."""
    p = report.primary
    conf = f"{p.confidence:.0%}"
    summary = (
        f"{report.metric} Δ {_signed(p.mean_difference)}, {conf} CI {_interval(p.bootstrap_ci)}, "
        f"W/L/T {p.wins}/{p.losses}/{p.ties} ({report.candidate.ref} vs {report.baseline.ref}, "
        f"{p.n_queries} queries)"
    )
    lines = []
    code = GATE_PASS
    if margin is not None and not (math.isfinite(margin) and margin >= 0.0):
        raise InputError(f"must be a number >= 0, got {margin}", field="margin")
    if report.coverage is not None and report.coverage.confounded:
        code = GATE_INCOMPARABLE
        lines.append(
            f"gate: FAIL — coverage-confounded, no verdict on {report.metric}: {report.coverage.reason} "
            f"(contract terms: {report.coverage.terms_text()}); the numbers measure the judging as much as "
            f"the retrieval. Judge the missing documents (`{scoring.POOL_MISSING}`), rescore and gate again: {summary}"
        )
    elif margin is not None:
        low = p.bootstrap_ci[0]
        if not low >= -margin:
            code = GATE_FAIL
            lines.append(
                f"gate: FAIL — not shown non-inferior: the {conf} CI's lower bound {_signed(low)} is below "
                f"-{margin:g} (the margin): {summary}"
            )
        else:
            what = f"non-inferior within margin {margin:g} (lower bound {_signed(low)})"
            lines.append(f"gate: PASS — {what}: {summary}" if not broken else f"metric: passes ({what}): {summary}")
    elif p.verdict == "regression":
        code = GATE_FAIL
        lines.append(f"gate: FAIL — significant regression: {summary}")
    else:
        what = "significant improvement" if p.verdict == "improvement" else verdict_text(p)
        lines.append(f"gate: PASS — {what}: {summary}" if not broken else f"metric: passes ({what}): {summary}")
    if broken:
        code = GATE_FAIL  # absolute: the candidate's own ranking, whatever the coverage
        lines.append(
            f"gate: FAIL — {len(broken)} must-never-break quer"
            f"{'y' if len(broken) == 1 else 'ies'} without a relevant document in the "
            f"top {top_n}:"
        )
        for b in broken:
            where = "not retrieved" if b.best_rank is None else f"first relevant at rank {b.best_rank}"
            lines.append(f"  {b.query_id}{_short(report.texts.get(b.query_id))}: {where}")
    if sealed:
        lines.append(
            f"must-never-break: {len(sealed)} sealed holdout quer{'y' if len(sealed) == 1 else 'ies'} not checked "
            f"({_preview(list(sealed))}): their judgments stay sealed until `releval holdout` opens them"
        )
    return GateResult(code, "\n".join(lines))
