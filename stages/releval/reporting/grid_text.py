"""The grid-wide comparison as `releval compare --grid` prints it (:func:`render_grid`), its JSON form
(:func:`grid_to_dict`), and the sentences report.md's conclusion takes from it.

Pure: a :class:`~releval.measurement.grid.GridReport` in, text or a dict out; the figures are computed
by :func:`releval.measurement.grid.compare_grid`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from releval.judging.completeness import POSITIVES_ONLY_CAVEAT
from releval.measurement import scoring
from releval.measurement.grid import GridReport, GridRow, ThresholdStability
from releval.reporting.coverage_text import coverage_dict, coverage_sentence
from releval.reporting.text import (
    describe_contract,
    describe_evaluation_set,
    finite,
    format_p,
    interval,
    power_sentence,
    signed,
)


def grid_thin_evidence(report: GridReport, name: Callable[[str], str] = str) -> str | None:
    """When the grid's queries are too few for the differences from the baseline it calls
    inconclusive (:meth:`~releval.measurement.grid.GridReport.thin`): how many queries the largest would
    need, and how many are about zero next to what the queries resolve. None when every inconclusive
    difference is resolvable."""
    short = report.thin()
    if not short:
        return None
    parts = []
    sizeable = {cid: f for cid, f in short.items() if not f.about_zero}
    if sizeable:
        cid, f = max(sizeable.items(), key=lambda item: (abs(item[1].mean_difference), item[0]))
        parts.append(
            f"to detect the largest observed difference, {name(cid)}'s {signed(f.mean_difference)}, at "
            f"{f.power:.0%} power you would need about {f.queries_needed} queries "
            f"(SD of per-query differences {f.sd:.4f}; `{f.command()}`)"
        )
    zero = {cid: f for cid, f in short.items() if f.about_zero}
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


def settle_sentence(report: GridReport, name: Callable[[str], str] = str) -> str:
    """What would separate the best configuration from the runner-up (or that nothing needs to);
    ``name`` formats a configuration id."""
    if report.runner_up is None or report.settle is None:
        return f"{name(report.best.best)} is separated from every other configuration; nothing left to settle"
    return f"{name(report.best.best)} vs {name(report.runner_up)}: {power_sentence(report.settle)}"


def threshold_sentence(thresholds: ThresholdStability | None, note: str | None = None) -> str:
    """The winner at each relevance threshold and whether it changes; without them, ``note`` (why not)."""
    if thresholds is None:
        return note or "not computed"
    return ", ".join(f"grade >= {k}: {w or 'no relevant documents'}" for k, w in sorted(thresholds.winners.items())) + (
        " → the WINNER CHANGES with the threshold" if thresholds.changes else " → same winner at every threshold"
    )


def _cell_number(value: float | None, fmt: str = "{:.4f}") -> str:
    return "–" if value is None else fmt.format(value)


def _coverage_lines(report: GridReport) -> list[str]:
    """The grid's coverage notes: the terms, how many comparisons are coverage-confounded, and for
    each confounded or winner-changing one why, with its condensed-list value and bpref; under a sampled
    judgment set, the sample's caveat instead."""
    if report.coverage_metric is None or report.coverage_terms is None:
        if report.positives_only:
            return ["", f"coverage: not a question here: {POSITIVES_ONLY_CAVEAT}"]
        if report.sample_caveat is not None:
            return ["", f"sampled judgments: {report.sample_caveat}"]
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
        lines.append(f"  {r.config_id}: {coverage_sentence(r.coverage)}")
    return lines


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
        return f"{_cell_number(value, '{:.2f}'):>{judged_width}}  "

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
            f"{r.config_id:<{width}}  {r.mean:>7.4f}  {signed(r.mean_difference):>8}  "
            f"{interval(r.bootstrap_ci):^20}  {format_p(r.p_bootstrap):>7}  "
            f"{format_p(r.p_bootstrap_holm):>7}  {f'{r.wins}/{r.losses}/{r.ties}':>11}  "
            f"{format_p(r.p_sign):>7}  {format_p(r.p_sign_holm):>7}  {judged_cell(r)}{r.verdict:<{verdict_width}}{mark}"
        )
    lines += _coverage_lines(report)
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
    lines.append(f"winner by relevance threshold: {threshold_sentence(report.thresholds, report.thresholds_note)}")
    lines.append(f"to settle the best: {settle_sentence(report)}")
    thin = grid_thin_evidence(report)
    if thin is not None:
        lines.append(f"thin evidence: {thin}")
    return "\n".join(lines)


def grid_to_dict(report: GridReport) -> dict[str, Any]:
    """JSON-safe form of a :class:`~releval.measurement.grid.GridReport` (`releval compare --grid --json`)."""
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
                "bootstrap_ci": [finite(r.bootstrap_ci[0]), finite(r.bootstrap_ci[1])],
                "p_bootstrap": r.p_bootstrap,
                "p_bootstrap_holm": r.p_bootstrap_holm,
                "wins": r.wins,
                "losses": r.losses,
                "ties": r.ties,
                "p_sign": r.p_sign,
                "p_sign_holm": r.p_sign_holm,
                "verdict": r.verdict,
                "indistinguishable_from_best": r.indistinguishable_from_best,
                "difference_sd": finite(r.difference_sd),
                "coverage": None if r.coverage is None else coverage_dict(r.coverage),
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
        "sample": None
        if report.sample_caveat is None
        else {
            **(report.contract.get("sample") or {}),
            "caveat": report.sample_caveat,
            "thresholds": report.thresholds_note,
        },
    }
