"""The regression gate: a pair's verdict, its margin and the must-never-break queries, decided as an exit code.

:func:`gate_decision` gives a :class:`GateResult` (the code and every fact behind it);
:func:`releval.reporting.gate_text.render_gate` says it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from releval.errors import InputError
from releval.measurement.pair import PairReport, preview
from releval.measurement.scoring import document_ranks

GATE_PASS, GATE_FAIL, GATE_INCOMPARABLE = 0, 1, 2

# How the metric came out (:attr:`GateResult.outcome`).
CONFOUNDED = "coverage-confounded"  # neither passes nor fails: exit 2
NOT_NON_INFERIOR = "not non-inferior"  # with a margin: the interval's lower bound is below -margin
NON_INFERIOR = "non-inferior"
REGRESSION = "regression"  # without a margin: a significant regression
PASSES = "passes"  # without a margin: anything but a significant regression


@dataclass(frozen=True)
class Broken:
    """A must-never-break query without a relevant document in the candidate's top N."""

    query_id: str
    best_rank: int | None  # document rank of its best-ranked relevant document; None: not retrieved


def must_never_break_ids(queries: pl.DataFrame | None) -> list[str]:
    """The queries flagged ``must_never_break``, sorted (none when the column is absent)."""
    if queries is None or "must_never_break" not in queries.columns:
        return []
    flagged = queries.filter(pl.col("must_never_break").fill_null(False))
    return sorted(flagged["query_id"].cast(pl.Utf8).to_list())


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
            f"{preview(unjudged)} ha{'s' if len(unjudged) == 1 else 've'} no judged "
            f"document of grade >= {rel_threshold}",
            field="must_never_break",
        )
    ranks = document_ranks(run, ties).join(relevant, on=["query_id", "doc_id"])
    best = dict(ranks.group_by("query_id").agg(pl.col("doc_rank").min()).iter_rows())
    return [Broken(q, best.get(q)) for q in sorted(flagged) if best.get(q) is None or best[q] > top_n]


@dataclass(frozen=True)
class GateResult:
    """The gate's exit code and what decided it."""

    code: int
    report: PairReport  # the comparison gated
    outcome: str  # how the metric came out: CONFOUNDED, NOT_NON_INFERIOR, NON_INFERIOR, REGRESSION or PASSES
    top_n: int  # must-never-break queries need a relevant document in this top N
    margin: float | None = None  # non-inferiority margin; None: fail on a significant regression only
    broken: tuple[Broken, ...] = ()
    sealed: tuple[str, ...] = ()  # flagged queries of the sealed holdout, not checked


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

    A coverage-confounded comparison (:class:`~releval.measurement.coverage.Coverage`) neither passes
    nor fails on the metric: it exits 2 (:data:`GATE_INCOMPARABLE`, "cannot decide"), with or without
    ``margin``; a broken must-never-break query still exits 1. ``sealed``: flagged queries of the sealed
    holdout, not checked (their judgments are not in the working files)."""
    if margin is not None and not (math.isfinite(margin) and margin >= 0.0):
        raise InputError(f"must be a number >= 0, got {margin}", field="margin")
    p = report.primary
    if report.coverage is not None and report.coverage.confounded:
        outcome, code = CONFOUNDED, GATE_INCOMPARABLE
    elif margin is not None:
        low = p.bootstrap_ci[0]
        outcome = NON_INFERIOR if low >= -margin else NOT_NON_INFERIOR
        code = GATE_PASS if outcome == NON_INFERIOR else GATE_FAIL
    elif p.verdict == "regression":
        outcome, code = REGRESSION, GATE_FAIL
    else:
        outcome, code = PASSES, GATE_PASS
    if broken:
        code = GATE_FAIL  # absolute: the candidate's own ranking, whatever the coverage
    return GateResult(code, report, outcome, top_n, margin, tuple(broken), tuple(sealed))
