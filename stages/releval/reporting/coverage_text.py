"""Judging coverage as the reader sees it: line 7 of a pair's report, its JSON form, and the terms.

Pure: a :class:`~releval.measurement.coverage.Coverage` in, text or a dict out.
"""

from __future__ import annotations

from typing import Any

from releval.measurement import evidence, scoring
from releval.measurement.coverage import BPREF, Coverage
from releval.reporting.text import means


def terms_text(terms: scoring.CoverageTerms) -> str:
    return f"each >= {terms.min_judged:g}, gap <= {terms.max_judged_gap:g}"


def _favours(side: str) -> str:
    return f"the {side}" if side in ("baseline", "candidate") else "neither" if side == "tie" else side


def coverage_sentence(found: Coverage) -> str:
    """One line: both sides' judged@k against the terms, the condensed-list value and bpref,
    and whether they pick another winner."""
    if found.judged is None:
        return f"{found.judged_metric} not recorded per query; coverage not checked"
    head = f"{found.judged_metric} {found.judged[0]:.2f} → {found.judged[1]:.2f}"
    if found.confounded:
        head += f": COVERAGE-CONFOUNDED, {found.reason} (contract terms: {terms_text(found.terms)})"
    else:
        head += f", within the contract's terms ({terms_text(found.terms)})"
    parts = [head]
    if found.condensed is not None:
        parts.append(
            f"condensed-list {scoring.condensed_name(found.metric)} (unjudged documents removed from the ranking; "
            f"Sakai, SIGIR 2007) {means(found.condensed)}"
        )
    elif not found.metric.startswith(evidence.METRIC_PREFIX):  # passage-level metrics have no condensed list
        parts.append(f"condensed-list {scoring.condensed_name(found.metric)} not recorded")
    if found.metric != BPREF:
        parts.append(f"bpref {means(found.bpref)}" if found.bpref is not None else "bpref not scored")
    differs = found.winner_differs()
    winners = found.winners()
    if differs:
        parts.append(
            f"THE WINNER DIFFERS: {found.metric} favours {_favours(winners[found.metric])}, "
            + ", ".join(f"{name} {_favours(winners[name])}" for name in differs)
        )
    elif len(winners) > 1:
        parts.append(f"same winner under {', '.join(winners)}")
    if found.confounded:
        parts.append(f"judge the missing documents (`{scoring.POOL_MISSING}`) and rescore for a verdict")
    return "; ".join(parts)


def coverage_dict(found: Coverage) -> dict[str, Any]:
    """The JSON form of a :class:`Coverage` (`releval compare --json`'s ``coverage``)."""
    pair = lambda values: None if values is None else list(values)  # noqa: E731
    return {
        "metric": found.judged_metric,
        "terms": found.terms.to_dict(),
        "judged": pair(found.judged),
        "confounded": found.confounded,
        "reason": found.reason,
        "standard": {"metric": found.metric, "means": list(found.standard)},
        "condensed": {"metric": scoring.condensed_name(found.metric), "means": pair(found.condensed)},
        "bpref": pair(found.bpref),
        "winners": found.winners(),
        "winner_differs": found.winner_differs(),
    }
