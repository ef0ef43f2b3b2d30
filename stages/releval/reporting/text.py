"""The wording every comparison renderer shares: numbers, intervals, p-values, the evaluation set
and contract lines, verdicts, Holm notes, power and thin-evidence sentences.

Pure: figures in, text out; nothing here computes a statistic.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from releval.measurement import stats
from releval.measurement.pair import IGNORED_CONTRACT_FIELDS

# Contract fields that describe the evaluation set (line 2) rather than the metric (line 3).
_EVALUATION_SET_FIELDS = ("dataset", "judgments_version", "judgments_sha256", "queries", "split", "pooling")
# Terms a reader checks first, in this order; any others follow in the order given.
_CONTRACT_ORDER = ("gain", "ties", "rel_threshold", "no_relevant", "missing_in_run", "collapse")


def signed(value: float) -> str:
    if value is None or not math.isfinite(value):
        return "±inf" if value is not None else "–"
    return f"{value:+.4f}"


def interval(bounds: Sequence[float]) -> str:
    return f"[{signed(bounds[0])}, {signed(bounds[1])}]"


def format_p(p: float) -> str:
    return f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"


def means(pair: tuple[float, float]) -> str:
    """``baseline → candidate (Δ difference)``."""
    return f"{pair[0]:.4f} → {pair[1]:.4f} (Δ {signed(pair[1] - pair[0])})"


def short(text: str | None, limit: int = 60) -> str:
    """A query's text, quoted, on one line and cut at ``limit`` characters ('' without one)."""
    if not text:
        return ""
    text = " ".join(str(text).split())
    return f' "{text[: limit - 1]}…"' if len(text) > limit else f' "{text}"'


def finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


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


def describe_contract(contract: Mapping[str, Any], metric: str) -> str:
    skip = set(_EVALUATION_SET_FIELDS) | IGNORED_CONTRACT_FIELDS
    keys = [k for k in _CONTRACT_ORDER if k in contract] + [k for k in contract if k not in _CONTRACT_ORDER]
    fields = [f"{key}={contract[key]}" for key in keys if key not in skip]
    return f"{metric} under " + "; ".join(fields) if fields else metric


def verdict_text(comparison: stats.Comparison) -> str:
    """The verdict as printed: the word, or why there is none."""
    if comparison.verdict == stats.NO_VERDICT:
        return f"too few queries for a verdict (< {stats.MIN_SLICE_QUERIES})"
    return comparison.verdict


def holm_note(comparison: stats.Comparison, family: str) -> str:
    """ ", Holm over N <family> P" when the comparison was decided in a family of several."""
    if comparison.family_size < 2 or comparison.adjusted_p_value is None:
        return ""
    return f", Holm over {comparison.family_size} {family} {format_p(comparison.adjusted_p_value)}"


def power_sentence(figure: stats.PowerFigure) -> str:
    """What would settle a comparison (:class:`~releval.measurement.stats.PowerFigure`), in one sentence
    a reader can act on (alpha and power as set)."""
    if figure.sd is None:
        return f"{figure.n_queries} quer{'y' if figure.n_queries == 1 else 'ies'}: no spread to plan from"
    head = f"SD of per-query differences {figure.sd:.4f}"
    if figure.sd == 0.0:
        return f"{head}: every query moves by the same amount, nothing more to settle"
    if figure.beyond_max:
        needed = (
            f"more than {stats.MAX_QUERIES:,} queries would be needed to detect a true difference of the observed "
            f"size {abs(figure.mean_difference):.2g}"
        )
    elif figure.queries_needed is None:
        needed = "no observed difference to detect"
    else:
        needed = (
            f"{figure.queries_needed} queries would detect a true difference of the observed size "
            f"{abs(figure.mean_difference):.4f} with {figure.power:.0%} power at alpha {figure.alpha:g} "
            f"(`{figure.command()}`)"
        )
    return f"{head}; {needed}; these {figure.n_queries} queries resolve {figure.resolvable:.4f}"


def thin_evidence(power: stats.PowerFigure, metric: str) -> str | None:
    """One sentence when the queries are too few for the difference seen
    (:attr:`~releval.measurement.stats.PowerFigure.needs_more_queries`): how many would detect it, or,
    for a difference of about zero, the smallest difference these queries resolve. None when they
    suffice or there is no spread to plan from."""
    if not power.needs_more_queries:
        return None
    n, sd = power.n_queries, f"SD of per-query differences {power.sd:.4f}"
    if power.about_zero:
        return (
            f"{n} queries; the observed {metric} difference {signed(power.mean_difference)} is about zero next to "
            f"the smallest these queries resolve, {power.resolvable:.4f} at {power.power:.0%} power ({sd}): "
            "a smaller true difference would go unseen"
        )
    return (
        f"{n} queries; to detect the observed {metric} difference of {abs(power.mean_difference):.4f} at "
        f"{power.power:.0%} power you would need about {power.queries_needed} queries ({sd}; `{power.command()}`)"
    )
