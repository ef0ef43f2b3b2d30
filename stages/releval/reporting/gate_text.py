"""The gate's verdict as `releval gate` prints it below the pair's report (:func:`render_gate`).

Pure: a :class:`~releval.measurement.gate.GateResult` in, text out; the decision is
:func:`releval.measurement.gate.gate_decision`'s.
"""

from __future__ import annotations

from releval.measurement import gate, scoring
from releval.measurement.pair import preview
from releval.reporting.coverage_text import terms_text
from releval.reporting.text import interval, short, signed, verdict_text


def render_gate(result: gate.GateResult) -> str:
    """Why the gate passes, fails or cannot decide: the metric's line, each broken must-never-break
    query, and the sealed holdout queries left unchecked."""
    report, margin, broken = result.report, result.margin, result.broken
    p = report.primary
    conf = f"{p.confidence:.0%}"
    summary = (
        f"{report.metric} Δ {signed(p.mean_difference)}, {conf} CI {interval(p.bootstrap_ci)}, "
        f"W/L/T {p.wins}/{p.losses}/{p.ties} ({report.candidate.ref} vs {report.baseline.ref}, "
        f"{p.n_queries} queries)"
    )
    lines = []
    if result.outcome == gate.CONFOUNDED:
        lines.append(
            f"gate: FAIL — coverage-confounded, no verdict on {report.metric}: {report.coverage.reason} "
            f"(contract terms: {terms_text(report.coverage.terms)}); the numbers measure the judging as much as "
            f"the retrieval. Judge the missing documents (`{scoring.POOL_MISSING}`), rescore and gate again: {summary}"
        )
    elif result.outcome == gate.NOT_NON_INFERIOR:
        lines.append(
            f"gate: FAIL — not shown non-inferior: the {conf} CI's lower bound {signed(p.bootstrap_ci[0])} is below "
            f"-{margin:g} (the margin): {summary}"
        )
    elif result.outcome == gate.NON_INFERIOR:
        what = f"non-inferior within margin {margin:g} (lower bound {signed(p.bootstrap_ci[0])})"
        lines.append(f"gate: PASS — {what}: {summary}" if not broken else f"metric: passes ({what}): {summary}")
    elif result.outcome == gate.REGRESSION:
        lines.append(f"gate: FAIL — significant regression: {summary}")
    else:
        what = "significant improvement" if p.verdict == "improvement" else verdict_text(p)
        lines.append(f"gate: PASS — {what}: {summary}" if not broken else f"metric: passes ({what}): {summary}")
    if report.sample_caveat is not None:
        lines.append(f"sampled judgments: {report.sample_caveat}")
    if broken:
        lines.append(
            f"gate: FAIL — {len(broken)} must-never-break quer"
            f"{'y' if len(broken) == 1 else 'ies'} without a relevant document in the "
            f"top {result.top_n}:"
        )
        for b in broken:
            where = "not retrieved" if b.best_rank is None else f"first relevant at rank {b.best_rank}"
            lines.append(f"  {b.query_id}{short(report.texts.get(b.query_id))}: {where}")
    if result.sealed:
        sealed = result.sealed
        lines.append(
            f"must-never-break: {len(sealed)} sealed holdout quer{'y' if len(sealed) == 1 else 'ies'} not checked "
            f"({preview(list(sealed))}): their judgments stay sealed until `releval holdout` opens them"
        )
    return "\n".join(lines)
