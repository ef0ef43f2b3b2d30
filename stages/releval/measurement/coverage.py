"""Judging coverage of one comparison, and what it does to the verdict.

Unjudged documents count as grade 0, so a side that retrieves documents nobody judged is punished
for being different (pooling bias). Every comparison reads both sides' judged@k (k: the primary
metric's cutoff, :func:`releval.measurement.scoring.coverage_metric`) against the contract's
coverage terms (:func:`releval.measurement.scoring.coverage_terms`); when
:func:`releval.measurement.scoring.coverage_verdict` finds either side too thinly judged or the two
too far apart, the verdict is :data:`releval.measurement.stats.COVERAGE_CONFOUNDED` instead of
improvement/regression/inconclusive, and the metric's condensed-list value (the metric on the
ranking with its unjudged documents removed; Sakai, "Alternatives to Bpref", SIGIR 2007) and bpref
are read beside it, to say when either picks a different winner.

Figures only; :mod:`releval.reporting.coverage_text` says them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from releval.errors import InputError
from releval.measurement import scoring

BPREF = "bpref"


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
