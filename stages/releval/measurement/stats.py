"""Paired statistics over per-query scores: intervals, tests, multiple comparisons, power.

Conventions, everywhere in this module:

* Scores are numpy float64 arrays aligned by query; the caller aligns them. A score matrix has
  one row per query and one column per configuration.
* A difference is always ``candidate - baseline``: positive means the candidate is better.
* The bootstrap resamples *queries* with replacement (never individual judgments), and every
  column of a matrix sees the same resampled query sets, so comparisons stay paired.
* Every random function takes a ``seed``; the same inputs and seed give the same answer.
* Verdicts come from one rule, :func:`decide`: the bootstrap p-value (Holm-adjusted over the
  comparisons reported together) below alpha, read by the sign of the mean difference; a
  comparison whose sides are not judged deeply and evenly enough
  (:func:`releval.measurement.scoring.coverage_verdict`) gets :data:`COVERAGE_CONFOUNDED`
  instead, whatever its p-value.
* Edge cases return defined values instead of NaN: with fewer than two queries nothing can be
  said about variability, so intervals are ``(-inf, inf)`` and p-values 1; with zero variance
  the interval collapses onto the (constant) difference.

Bootstrap p-value (two-sided, percentile-based; the dual of the percentile interval):

    p = min(1, 2 * (1 + min(#{d* <= 0}, #{d* >= 0})) / (B + 1))

where ``d*`` are the B bootstrap replicates of the mean difference. The ``+1`` terms count the
observed sample as one of the resamples (Davison & Hinkley 1997, eq. 4.11), so a Monte Carlo
p-value is never exactly 0. If p < 1 - confidence, the percentile interval at that confidence
excludes 0; the converse holds up to the quantile interpolation at the interval's end.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Literal

import numpy as np

from releval.errors import InputError

# Resample blocks hold at most this many (resample, query) cells: ~16 MiB per int64 block.
MAX_BLOCK_ELEMENTS = 2**21
# A slice of fewer queries than this gets its numbers but no verdict: a bootstrap over a
# handful of queries cannot tell a difference from the luck of which queries were drawn.
MIN_SLICE_QUERIES = 10
NO_VERDICT = "too few queries"
# Query counts beyond this are not a plan: the power answer says "more than" instead.
MAX_QUERIES = 10**9
# An observed difference below this share of the smallest one the queries resolve counts as about
# zero: detecting it would take over (1 / 0.25)^2 = 16 times the queries, so what the queries do
# resolve is the useful figure.
ABOUT_ZERO_SHARE = 0.25

# The verdict of a comparison whose sides are not judged deeply or evenly enough to be told
# apart: unjudged documents count as grade 0, so the less-judged side is punished for being
# different (pooling bias), and a better/worse verdict would measure the judging, not the system.
COVERAGE_CONFOUNDED = "coverage-confounded"

Verdict = Literal["improvement", "regression", "inconclusive", "too few queries", "coverage-confounded"]


# --------------------------------------------------------------------------- input checks


def _vector(values, field: str) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1:
        raise InputError(f"expected one score per query (1-D), got shape {array.shape}", field=field)
    if array.size == 0:
        raise InputError("no queries", field=field)
    if not np.all(np.isfinite(array)):
        raise InputError(f"{int(np.sum(~np.isfinite(array)))} non-finite score(s)", field=field)
    return array


def _paired(baseline, candidate) -> tuple[np.ndarray, np.ndarray]:
    base, cand = _vector(baseline, "baseline"), _vector(candidate, "candidate")
    if base.shape != cand.shape:
        raise InputError(f"{cand.size} scores but baseline has {base.size}", field="candidate")
    return base, cand


def _matrix(values, field: str) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim == 1:
        array = array[:, None]
    if array.ndim != 2 or array.shape[0] == 0 or array.shape[1] == 0:
        raise InputError(f"expected a (queries x configurations) matrix, got shape {array.shape}", field=field)
    if not np.all(np.isfinite(array)):
        raise InputError(f"{int(np.sum(~np.isfinite(array)))} non-finite score(s)", field=field)
    return array


def _names(names: Sequence[str], n_columns: int) -> list[str]:
    names = [str(name) for name in names]
    if len(names) != n_columns:
        raise InputError(f"{len(names)} names for {n_columns} configurations", field="names")
    if len(set(names)) != len(names):
        raise InputError("configuration names are not unique", field="names")
    return names


def _open_unit(value: float, field: str) -> float:
    value = float(value)
    if not 0.0 < value < 1.0:
        raise InputError(f"must lie strictly between 0 and 1, got {value}", field=field)
    return value


def _positive_int(value: int, field: str, minimum: int = 1) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError):
        number = None
    if number is None or number != value or number < minimum:
        raise InputError(f"must be an integer >= {minimum}, got {value}", field=field)
    return number


# --------------------------------------------------------------------------- bootstrap core


def _resample_counts(n_queries: int, n_resamples: int, rng: np.random.Generator, max_block_elements: int):
    """Yield (rows, n_queries) blocks: how often each query is drawn in each resample."""
    block_rows = max(1, max_block_elements // n_queries)
    for start in range(0, n_resamples, block_rows):
        rows = min(block_rows, n_resamples - start)
        # int64 draws are unbuffered, so the stream does not depend on the block size.
        drawn = rng.integers(0, n_queries, size=(rows, n_queries), dtype=np.int64)
        drawn += (np.arange(rows, dtype=np.int64) * n_queries)[:, None]
        yield np.bincount(drawn.ravel(), minlength=rows * n_queries).reshape(rows, n_queries)


@functools.lru_cache(maxsize=8)
def _one_block_counts(n_queries: int, n_resamples: int, seed: int) -> np.ndarray:
    """The resample counts of a seed that fit one block, drawn once per process: a report compares hundreds of
    pairs on the same queries (and on its slices' subsets: 7 sizes on the default grid) with the same seed, and
    drawing the counts was a third of its statistics' time. At most 8 blocks of MAX_BLOCK_ELEMENTS int64s are
    kept (128 MiB; 20 MiB on the default grid). Read-only, so no caller can change what the next one gets."""
    (counts,) = _resample_counts(n_queries, n_resamples, np.random.default_rng(seed), n_queries * n_resamples)
    counts.flags.writeable = False
    return counts


def bootstrap_means(
    columns, n_resamples: int = 10_000, seed: int = 0, *, max_block_elements: int = MAX_BLOCK_ELEMENTS
) -> np.ndarray:
    """Means of each column over ``n_resamples`` query resamples: shape (n_resamples, n_columns).

    All columns share the same resampled query sets. Each resample is a row of multinomial
    counts, so the means are one matrix product per block; memory is bounded by
    ``max_block_elements`` and the result does not depend on it.
    """
    data = _matrix(columns, "columns")
    n_resamples = _positive_int(n_resamples, "n_resamples")
    n_queries = data.shape[0]
    if isinstance(seed, (int, np.integer)) and n_queries * n_resamples <= max_block_elements:
        means = _one_block_counts(n_queries, n_resamples, int(seed)) @ data
    else:
        rng = np.random.default_rng(seed)
        means = np.empty((n_resamples, data.shape[1]))
        start = 0
        for counts in _resample_counts(n_queries, n_resamples, rng, max_block_elements):
            means[start : start + len(counts)] = counts @ data
            start += len(counts)
    means /= n_queries
    # Summation order leaves rounding noise around exact zeros (e.g. +0.1 and -0.1 drawn equally
    # often); snap it so ties at 0 count as ties in p-values and interval ends.
    noise = n_queries * np.finfo(np.float64).eps * np.max(np.abs(data), axis=0)
    means[np.abs(means) <= noise] = 0.0
    return means


def percentile_interval(replicates, confidence: float = 0.95) -> tuple:
    """Equal-tailed percentile interval of bootstrap replicates (per column for a matrix)."""
    confidence = _open_unit(confidence, "confidence")
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(np.asarray(replicates, dtype=np.float64), [tail, 1.0 - tail], axis=0)
    return low, high


def bootstrap_p_value(replicates):
    """Two-sided percentile bootstrap p-value for "mean difference = 0" (see module docstring)."""
    replicates = np.asarray(replicates, dtype=np.float64)
    n_resamples = replicates.shape[0]
    at_or_below = np.sum(replicates <= 0.0, axis=0)
    at_or_above = np.sum(replicates >= 0.0, axis=0)
    return np.minimum(1.0, 2.0 * (1 + np.minimum(at_or_below, at_or_above)) / (n_resamples + 1))


def _bootstrap_summary(differences: np.ndarray, n_resamples: int, confidence: float, seed):
    """(low, high, p_value) arrays, one entry per column of a differences matrix."""
    confidence = _open_unit(confidence, "confidence")
    n_resamples = _positive_int(n_resamples, "n_resamples")
    n_columns = differences.shape[1]
    if differences.shape[0] < 2:
        return np.full(n_columns, -np.inf), np.full(n_columns, np.inf), np.ones(n_columns)
    replicates = bootstrap_means(differences, n_resamples, seed)
    low, high = percentile_interval(replicates, confidence)
    return low, high, bootstrap_p_value(replicates)


# --------------------------------------------------------------------------- one pair


def paired_bootstrap_ci(
    baseline, candidate, n_resamples: int = 10_000, confidence: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``candidate - baseline``."""
    base, cand = _paired(baseline, candidate)
    low, high, _ = _bootstrap_summary((cand - base)[:, None], n_resamples, confidence, seed)
    return float(low[0]), float(high[0])


def paired_bootstrap_p_value(baseline, candidate, n_resamples: int = 10_000, seed: int = 0) -> float:
    """Two-sided percentile bootstrap p-value; same resamples as :func:`paired_bootstrap_ci`."""
    base, cand = _paired(baseline, candidate)
    _, _, p_value = _bootstrap_summary((cand - base)[:, None], n_resamples, 0.95, seed)
    return float(p_value[0])


def paired_t_interval(baseline, candidate, confidence: float = 0.95) -> tuple[float, float, float]:
    """Student t interval of the mean of ``candidate - baseline`` and the paired t-test p-value.

    Degenerate inputs: one query gives ``(-inf, inf, 1.0)``; zero variance gives the limit of
    the t interval, ``(d, d, 1.0)`` when every difference is 0 and ``(d, d, 0.0)`` otherwise.
    """
    from scipy import stats  # scipy.stats takes 0.6-1.5 s to import: only the stages that run a t or sign test pay it

    base, cand = _paired(baseline, candidate)
    confidence = _open_unit(confidence, "confidence")
    differences = cand - base
    if differences.size < 2:
        return -math.inf, math.inf, 1.0
    # Constant differences up to the rounding of the subtraction count as zero variance.
    rounding = 4 * np.finfo(np.float64).eps * max(np.max(np.abs(base)), np.max(np.abs(cand)))
    if np.ptp(differences) <= rounding:
        d = float(differences.mean())
        return d, d, 1.0 if d == 0.0 else 0.0
    result = stats.ttest_rel(cand, base)
    interval = result.confidence_interval(confidence_level=confidence)
    return float(interval.low), float(interval.high), float(result.pvalue)


def win_loss_tie(baseline, candidate, tol: float = 0.0) -> tuple[int, int, int]:
    """Queries where the candidate beats / loses to / ties the baseline by more than ``tol``."""
    base, cand = _paired(baseline, candidate)
    if not tol >= 0.0:
        raise InputError(f"must be >= 0, got {tol}", field="tol")
    differences = cand - base
    wins, losses = int(np.sum(differences > tol)), int(np.sum(differences < -tol))
    return wins, losses, differences.size - wins - losses


def sign_test(wins: int, losses: int) -> float:
    """Exact two-sided sign test on the non-tied queries (binomial, p = 0.5).

    No non-tied query means no evidence either way: p = 1.
    """
    wins, losses = _positive_int(wins, "wins", 0), _positive_int(losses, "losses", 0)
    if wins + losses == 0:
        return 1.0
    return _sign_test_p(wins, losses)


@functools.lru_cache(maxsize=4096)
def _sign_test_p(wins: int, losses: int) -> float:
    """scipy's exact binomial test, once per (wins, losses): a report asks for the same counts many times."""
    from scipy import stats  # as in paired_t_interval

    return float(stats.binomtest(wins, wins + losses, 0.5, alternative="two-sided").pvalue)


def holm(p_values) -> np.ndarray:
    """Holm–Bonferroni step-down adjusted p-values, in the input order (monotone, capped at 1)."""
    p = np.asarray(p_values, dtype=np.float64)
    if p.ndim != 1:
        raise InputError(f"expected a 1-D array, got shape {p.shape}", field="p_values")
    if not np.all((p >= 0.0) & (p <= 1.0)):
        raise InputError("p-values must lie in [0, 1]", field="p_values")
    order = np.argsort(p, kind="stable")
    multipliers = np.arange(p.size, 0, -1)
    stepped = np.maximum.accumulate(np.minimum(1.0, multipliers * p[order]))
    adjusted = np.empty_like(p)
    adjusted[order] = stepped
    return adjusted


# --------------------------------------------------------------------------- the decision rule


def alpha_of(confidence: float) -> float:
    """The test level that goes with an interval's confidence (0.95 -> 0.05, not 0.050000000000000044)."""
    return round(1.0 - _open_unit(confidence, "confidence"), 12)


@dataclass(frozen=True)
class Decision:
    """The verdict on one comparison of a family, and the adjusted p-value it rests on."""

    verdict: Verdict
    adjusted_p_value: float | None  # Holm over the family; None when no verdict is given
    family_size: int  # comparisons the adjustment ran over


def decide(mean_differences, p_values, n_queries, alpha: float = 0.05, min_queries: int = 1) -> list[Decision]:
    """releval's one decision rule, for a family of comparisons reported together.

    A comparison on fewer than ``min_queries`` queries gets :data:`NO_VERDICT` and leaves the
    family. The others' two-sided bootstrap p-values are Holm-adjusted over the family; an
    adjusted p-value below ``alpha`` is an improvement or a regression by the sign of the mean
    difference, anything else is inconclusive. A family of one is the plain test. Every verdict
    releval prints (compare, compare --grid, gate, report.md) comes from here, except that a
    comparison whose judging coverage confounds it (:func:`releval.measurement.scoring.coverage_verdict`)
    has its verdict replaced by :data:`COVERAGE_CONFOUNDED` (:meth:`Comparison.confounded`), its
    p-values kept.
    """
    differences = np.asarray(mean_differences, dtype=np.float64)
    p = np.asarray(p_values, dtype=np.float64)
    counts = np.asarray(n_queries, dtype=np.int64)
    if not differences.shape == p.shape == counts.shape or p.ndim != 1:
        raise InputError("one mean difference, p-value and query count per comparison", field="p_values")
    alpha = _open_unit(alpha, "alpha")
    members = np.flatnonzero(counts >= min_queries)
    adjusted = np.full(p.size, np.nan)
    adjusted[members] = holm(p[members])
    decisions = []
    for k in range(p.size):
        if counts[k] < min_queries:
            decisions.append(Decision(NO_VERDICT, None, int(members.size)))
            continue
        significant = adjusted[k] < alpha and differences[k] != 0.0
        word: Verdict = "inconclusive" if not significant else "improvement" if differences[k] > 0 else "regression"
        decisions.append(Decision(word, float(adjusted[k]), int(members.size)))
    return decisions


# --------------------------------------------------------------------------- many configurations


@dataclass(frozen=True)
class GridBootstrap:
    """Per-candidate bootstrap results against one baseline (arrays aligned with the columns)."""

    mean_difference: np.ndarray
    low: np.ndarray
    high: np.ndarray
    p_value: np.ndarray
    confidence: float
    n_resamples: int


def bootstrap_many(
    baseline, candidates_matrix, n_resamples: int = 10_000, confidence: float = 0.95, seed: int = 0
) -> GridBootstrap:
    """Bootstrap intervals and p-values of every candidate column against one baseline.

    One vectorised pass over shared resamples; with the same seed a column gets the answer
    :func:`paired_bootstrap_ci` gives for that pair (up to floating-point rounding).
    """
    base = _vector(baseline, "baseline")
    candidates = _matrix(candidates_matrix, "candidates_matrix")
    if candidates.shape[0] != base.size:
        raise InputError(f"{candidates.shape[0]} query rows but baseline has {base.size}", field="candidates_matrix")
    differences = candidates - base[:, None]
    low, high, p_value = _bootstrap_summary(differences, n_resamples, confidence, seed)
    return GridBootstrap(differences.mean(axis=0), low, high, p_value, float(confidence), int(n_resamples))


@dataclass(frozen=True)
class BestSet:
    """The best-mean configuration and those the paired test cannot separate from it."""

    best: str
    indistinguishable: tuple[str, ...]  # best first, then by decreasing mean
    adjusted_p_values: dict[str, float]  # Holm-adjusted, for every configuration but the best
    alpha: float


def indistinguishable_from_best(
    score_matrix, names: Sequence[str], n_resamples: int = 10_000, alpha: float = 0.05, seed: int = 0
) -> BestSet:
    """Configurations whose bootstrap test against the best, Holm-adjusted, has p > ``alpha``.

    The best is the highest mean (the first column on an exact tie); each other column is
    tested against it with the paired bootstrap p-value and the family is Holm-adjusted.
    """
    scores = _matrix(score_matrix, "score_matrix")
    names = _names(names, scores.shape[1])
    alpha = _open_unit(alpha, "alpha")
    means = scores.mean(axis=0)
    best = int(np.argmax(means))
    others = [i for i in range(len(names)) if i != best]
    adjusted = np.empty(0)
    if others:
        grid = bootstrap_many(scores[:, best], scores[:, others], n_resamples, 1 - alpha, seed)
        adjusted = holm(grid.p_value)
    kept = [best] + [i for i, p in zip(others, adjusted) if p > alpha]
    kept.sort(key=lambda i: (i != best, -means[i], i))
    return BestSet(
        best=names[best],
        indistinguishable=tuple(names[i] for i in kept),
        adjusted_p_values={names[i]: float(p) for i, p in zip(others, adjusted)},
        alpha=alpha,
    )


def winner_frequencies(
    score_matrix, names: Sequence[str], n_resamples: int = 10_000, seed: int = 0
) -> dict[str, float]:
    """How often each configuration has the highest mean over bootstrap resamples of the queries.

    Configurations tied for the highest mean in a resample share that win equally, so
    identical configurations split their wins instead of the first one taking all of them.
    The frequencies sum to 1.
    """
    scores = _matrix(score_matrix, "score_matrix")
    names = _names(names, scores.shape[1])
    means = bootstrap_means(scores, n_resamples, seed)
    noise = scores.shape[0] * np.finfo(np.float64).eps * max(1.0, float(np.max(np.abs(scores))))
    winners = means >= means.max(axis=1, keepdims=True) - noise
    shares = winners / winners.sum(axis=1, keepdims=True)
    return {name: float(share) for name, share in zip(names, shares.mean(axis=0))}


@dataclass(frozen=True)
class ScoreSpread:
    """Range of configuration means; ``narrow`` when they all fit inside ``width``."""

    low: float
    high: float
    spread: float
    width: float
    narrow: bool


def score_spread(means, width: float = 0.01) -> ScoreSpread:
    """Flag an evaluation whose configuration means all sit within an absolute band.

    ``narrow`` is ``max - min < width`` with at least two configurations. This is a statement
    about practical size, separate from significance: a grid can be significantly ordered and
    still too close to matter. The default 0.01 is one point on a [0, 1] metric such as
    nDCG@10; set ``width`` to the smallest difference that matters for the metric at hand.
    """
    values = _vector(means, "means")
    width = float(width)
    if not width > 0.0:
        raise InputError(f"must be > 0, got {width}", field="width")
    low, high = float(values.min()), float(values.max())
    return ScoreSpread(low, high, high - low, width, values.size >= 2 and high - low < width)


# --------------------------------------------------------------------------- power


def _power_inputs(sd: float, alpha: float, power: float) -> tuple[float, float, float]:
    sd = float(sd)
    if not (math.isfinite(sd) and sd > 0.0):
        raise InputError(f"must be a positive number, got {sd}", field="sd")
    alpha, power = _open_unit(alpha, "alpha"), _open_unit(power, "power")
    if power <= alpha:
        # A two-sided test already rejects with probability alpha when there is no difference.
        raise InputError(f"must exceed alpha ({alpha}), got {power}", field="power")
    return sd, alpha, power


def paired_t_power(sd: float, delta: float, n: int, alpha: float = 0.05) -> float:
    """Exact power of the two-sided paired t-test (noncentral t) with ``n`` queries.

    ``sd`` is the standard deviation of the per-query differences, ``delta`` their true mean.
    """
    from scipy import stats  # as in paired_t_interval

    df = n - 1
    noncentrality = abs(delta) * math.sqrt(n) / sd
    critical = stats.t.ppf(1.0 - alpha / 2.0, df)
    upper = stats.nct.sf(critical, df, noncentrality)
    lower = stats.nct.cdf(-critical, df, noncentrality)
    # scipy's nct.cdf underflows to NaN deep in the tail (large noncentrality), where the chance
    # of rejecting in the wrong direction is negligible.
    return float(upper + (lower if math.isfinite(lower) else 0.0))


def _normal_queries(sd: float, delta: float, alpha: float, power: float) -> float:
    """The normal approximation ``((z_{1-alpha/2} + z_power) * sd / delta)^2`` (unrounded)."""
    from scipy import stats  # as in paired_t_interval

    z = stats.norm.ppf(1.0 - alpha / 2.0) + stats.norm.ppf(power)
    return float((z * sd / delta) ** 2)


def queries_needed(sd: float, delta: float, alpha: float = 0.05, power: float = 0.8) -> int:
    """Smallest number of queries (>= 2) giving the two-sided paired t-test the wanted power.

    Starts from the normal approximation ``((z_{1-alpha/2} + z_power) * sd / delta)^2`` and
    refines it with the exact noncentral-t power, stepping to the smallest sufficient n.
    """
    sd, alpha, power = _power_inputs(sd, alpha, power)
    delta = float(delta)
    if not (math.isfinite(delta) and delta != 0.0):
        raise InputError(f"must be a nonzero number, got {delta}", field="delta")
    n = max(2, math.ceil(_normal_queries(sd, delta, alpha, power)))
    if n > MAX_QUERIES:
        raise InputError(
            f"needs more than {MAX_QUERIES:,} queries: {abs(delta):g} is too small for sd {sd:g}", field="delta"
        )
    while paired_t_power(sd, delta, n, alpha) < power:
        n += 1
    while n > 2 and paired_t_power(sd, delta, n - 1, alpha) >= power:
        n -= 1
    return n


def minimum_detectable_difference(sd: float, n: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """Smallest true mean difference the two-sided paired t-test detects with the wanted power.

    Solves the exact noncentral-t power equation for ``delta`` (same units as ``sd``).
    """
    from scipy import optimize, stats  # as in paired_t_interval

    sd, alpha, power = _power_inputs(sd, alpha, power)
    n = _positive_int(n, "n", 2)
    z = stats.norm.ppf(1.0 - alpha / 2.0) + stats.norm.ppf(power)
    high = 2.0 * z * sd / math.sqrt(n)
    while paired_t_power(sd, high, n, alpha) < power:
        high *= 2.0
    return float(
        optimize.brentq(lambda d: paired_t_power(sd, d, n, alpha) - power, 0.0, high, xtol=1e-12 * sd, rtol=1e-12)
    )


@dataclass(frozen=True)
class PowerFigure:
    """What would settle a comparison: `releval power` run on its own per-query differences."""

    sd: float | None  # standard deviation of the per-query differences (n - 1); None below 2 queries
    mean_difference: float
    n_queries: int
    alpha: float
    power: float
    queries_needed: int | None  # to detect a true difference of the observed size; None: see the next two
    resolvable: float | None  # smallest true difference these n queries detect; None: no spread
    beyond_max: bool = False  # the observed difference needs more than MAX_QUERIES queries

    def command(self) -> str | None:
        """The `releval power` call that gives :attr:`queries_needed`."""
        if self.queries_needed is None or self.sd is None:
            return None
        return f"releval power --sd {self.sd:.4g} --delta {abs(self.mean_difference):.4g}"

    @property
    def about_zero(self) -> bool:
        """The observed difference is about zero next to the smallest the queries resolve (:data:`ABOUT_ZERO_SHARE`)."""
        if self.resolvable is None:
            return False
        return self.beyond_max or abs(self.mean_difference) < ABOUT_ZERO_SHARE * self.resolvable

    @property
    def needs_more_queries(self) -> bool:
        """The queries are too few for the difference seen: it is about zero, or detecting a true
        difference of its size at the figure's power takes more queries than there are."""
        if self.sd is None or self.sd == 0.0 or self.resolvable is None:
            return False
        if self.about_zero:
            return True
        return self.queries_needed is not None and self.queries_needed > self.n_queries

    def to_dict(self) -> dict:
        return {**asdict(self), "command": self.command()}


def power_figure(
    sd: float, mean_difference: float, n_queries: int, alpha: float = 0.05, power: float = 0.8
) -> PowerFigure:
    """:func:`queries_needed` for the observed mean difference and :func:`minimum_detectable_difference`
    for the observed number of queries, both at the observed SD of the per-query differences
    (:func:`difference_sd`; NaN below two queries)."""
    alpha, power = _open_unit(alpha, "alpha"), _open_unit(power, "power")
    n, delta = int(n_queries), float(mean_difference)
    if n < 2 or not math.isfinite(sd):
        return PowerFigure(None, delta, n, alpha, power, None, None)
    if sd == 0.0:
        return PowerFigure(0.0, delta, n, alpha, power, None, None)
    resolvable = minimum_detectable_difference(sd, n, alpha, power)
    if delta != 0.0 and _normal_queries(sd, delta, alpha, power) > MAX_QUERIES:
        return PowerFigure(sd, delta, n, alpha, power, None, resolvable, beyond_max=True)
    needed = queries_needed(sd, delta, alpha, power) if delta != 0.0 else None
    return PowerFigure(sd, delta, n, alpha, power, needed, resolvable)


def difference_sd(baseline, candidate) -> float:
    """Standard deviation (n - 1) of the per-query differences ``candidate - baseline``.

    NaN below two queries; 0 for differences constant up to the rounding of the subtraction
    (the criterion :func:`paired_t_interval` uses).
    """
    base, cand = _paired(baseline, candidate)
    differences = cand - base
    if differences.size < 2:
        return math.nan
    rounding = 4 * np.finfo(np.float64).eps * max(np.max(np.abs(base)), np.max(np.abs(cand)))
    if np.ptp(differences) <= rounding:
        return 0.0
    return float(np.std(differences, ddof=1))


# --------------------------------------------------------------------------- one comparison


@dataclass(frozen=True)
class QueryChange:
    """One query's score under the baseline (old) and the candidate (new)."""

    query_id: str
    baseline: float
    candidate: float

    @property
    def difference(self) -> float:
        return self.candidate - self.baseline


@dataclass(frozen=True)
class Comparison:
    """Everything a paired comparison of two configurations reports; no I/O, no formatting."""

    n_queries: int
    baseline_mean: float
    candidate_mean: float
    mean_difference: float
    confidence: float
    bootstrap_ci: tuple[float, float]
    bootstrap_p_value: float
    t_interval: tuple[float, float]
    t_p_value: float
    wins: int
    losses: int
    ties: int
    sign_test_p_value: float
    worst_regression: QueryChange | None  # largest loss; None when no query lost
    best_improvement: QueryChange | None  # largest win; None when no query won
    verdict: Verdict
    n_resamples: int
    seed: int
    difference_sd: float  # SD of the per-query differences (n - 1); NaN below 2 queries
    adjusted_p_value: float | None  # bootstrap p-value, Holm-adjusted over the family; None: no verdict
    family_size: int  # comparisons reported together with this one (1: on its own)

    def decided(self, decision: Decision) -> Comparison:
        """This comparison with the verdict of :func:`decide` over the family it is reported in."""
        return replace(
            self,
            verdict=decision.verdict,
            adjusted_p_value=decision.adjusted_p_value,
            family_size=decision.family_size,
        )

    def confounded(self) -> Comparison:
        """This comparison with the :data:`COVERAGE_CONFOUNDED` verdict, numbers and p-values kept
        (see :func:`releval.measurement.scoring.coverage_verdict`); one too small for a verdict keeps
        :data:`NO_VERDICT`."""
        return self if self.verdict == NO_VERDICT else replace(self, verdict=COVERAGE_CONFOUNDED)

    def to_dict(self) -> dict:
        """A JSON-safe dict: tuples become lists, infinite interval ends become None."""

        def clean(value):
            if isinstance(value, dict):
                return {key: clean(item) for key, item in value.items()}
            if isinstance(value, (tuple, list)):
                return [clean(item) for item in value]
            if isinstance(value, float) and not math.isfinite(value):
                return None
            return value

        return clean(asdict(self))


def decide_family(comparisons: Sequence[Comparison], alpha: float = 0.05, min_queries: int = 1) -> list[Comparison]:
    """The comparisons with the verdicts :func:`decide` gives them as one family."""
    if not comparisons:
        return []
    decisions = decide(
        [c.mean_difference for c in comparisons],
        [c.bootstrap_p_value for c in comparisons],
        [c.n_queries for c in comparisons],
        alpha,
        min_queries,
    )
    return [c.decided(d) for c, d in zip(comparisons, decisions)]


def _extreme_change(differences: np.ndarray, mask: np.ndarray, pick, query_ids, base, cand):
    if not mask.any():
        return None
    index = int(pick(np.where(mask, differences, np.nan)))
    return QueryChange(query_ids[index], float(base[index]), float(cand[index]))


def compare_paired(
    baseline,
    candidate,
    query_ids: Sequence[str],
    n_resamples: int = 10_000,
    confidence: float = 0.95,
    seed: int = 0,
    tol: float = 0.0,
    min_queries: int = 1,
) -> Comparison:
    """Paired comparison of ``candidate`` against ``baseline`` over the same queries.

    The verdict is :func:`decide` on this comparison alone at alpha ``1 - confidence`` (no
    verdict below ``min_queries``); :meth:`Comparison.decided` replaces it when the comparison is
    reported in a family. ``tol`` is the margin within which a query counts as a tie (for W/L/T,
    the sign test and the extreme queries).
    """
    base, cand = _paired(baseline, candidate)
    query_ids = [str(query_id) for query_id in query_ids]
    if len(query_ids) != base.size:
        raise InputError(f"{len(query_ids)} query ids for {base.size} scores", field="query_ids")
    differences = cand - base
    low, high, p_boot = _bootstrap_summary(differences[:, None], n_resamples, confidence, seed)
    t_low, t_high, t_p = paired_t_interval(base, cand, confidence)
    wins, losses, ties = win_loss_tie(base, cand, tol)
    mean_difference = float(differences.mean())
    decision = decide([mean_difference], p_boot, [base.size], alpha_of(confidence), min_queries)[0]
    return Comparison(
        n_queries=int(base.size),
        baseline_mean=float(base.mean()),
        candidate_mean=float(cand.mean()),
        mean_difference=mean_difference,
        confidence=float(confidence),
        bootstrap_ci=(float(low[0]), float(high[0])),
        bootstrap_p_value=float(p_boot[0]),
        t_interval=(t_low, t_high),
        t_p_value=t_p,
        wins=wins,
        losses=losses,
        ties=ties,
        sign_test_p_value=sign_test(wins, losses),
        worst_regression=_extreme_change(differences, differences < -tol, np.nanargmin, query_ids, base, cand),
        best_improvement=_extreme_change(differences, differences > tol, np.nanargmax, query_ids, base, cand),
        verdict=decision.verdict,
        n_resamples=int(n_resamples),
        seed=seed,
        difference_sd=difference_sd(base, cand),
        adjusted_p_value=decision.adjusted_p_value,
        family_size=decision.family_size,
    )
