"""report.md and the report page's intro, rendered from figures computed before
(:class:`releval.measurement.report_figures.ReportFigures`): a conclusion, the grid with intervals,
comparisons against the baseline, slices, the worst queries, the card and the warnings.

Pure: nothing here computes a statistic or scores a run; the report stage and the audit compute the
figures with :func:`releval.measurement.report_figures.report_figures` and hand them over.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from releval import paths
from releval.measurement import scoring, stats
from releval.measurement.grid import GridReport
from releval.measurement.report_figures import ReportFigures
from releval.provenance import card as cards
from releval.reporting.grid_text import grid_thin_evidence, render_grid, settle_sentence, threshold_sentence
from releval.reporting.markdown import (
    coverage_note,
    format_cell,
    metric_cell,
    saturation_note,
    table_quality_metrics,
)
from releval.reporting.pair_text import render_pair


def report_markdown(
    card: Mapping[str, Any],
    ranked: Sequence[Any],
    figures: ReportFigures,
    configs: Mapping[str, Any],
    contract: Mapping[str, Any],
    baseline: str,
    primary: str,
    warnings: Mapping[str, list[str]],
    *,
    resamples: int,
    seed: int,
    reports: str | Path = paths.REPORTS,
) -> str:
    """report.md: a conclusion, the grid with intervals, comparisons against the baseline (one
    verdict each: the grid's Holm-adjusted one, or coverage-confounded), slices, the worst
    queries, the card and the warnings. ``figures`` holds every statistic shown (with the winner at
    each relevance threshold when it was computed); ``ranked``: the observations, best first
    (:func:`releval.provenance.card.rank_observations`); ``reports``: the folder it is written to,
    named with the plots and machine figures beside it.

    The grid shows judged@k as columns and marks a saturated recall cutoff ``1.0000 (sat.)``
    (``figures.saturation``)."""

    def here(path: str) -> str:
        return paths.rebase(path, paths.REPORTS, reports).as_posix()

    lines = [
        f"# releval report: {card['dataset']}",
        "",
        *conclusion_markdown(figures.grid, configs, primary),
        "",
        f"Card `{card['card_id']}`; judgments {card['judgments']['version']}; "
        f"{card['queries']['count']} queries scored (split {card['queries']['split']}); "
        f"baseline `{baseline}`. Plots: {here(paths.REPORT_HTML)} (opens offline), {here(paths.PLOTS)}/*.png.",
        "",
        *_grid_section(ranked, figures, configs, contract, primary),
        "",
        f"Intervals: percentile bootstrap over queries, {resamples} resamples, seed {seed}. "
        f"Throughput, latency and memory depend on the machine: {here(paths.OPS_MD)}.",
        "",
    ]
    notes = [
        saturation_note(figures.saturation, table_quality_metrics(contract["metrics"])),
        coverage_note(configs, contract),
    ]
    lines += [line for note in notes if note for line in (note, "")]
    lines += _baseline_section(figures, baseline, primary)
    lines += _slices_section(ranked, figures.slices, primary)
    lines += _worst_section(figures, primary)
    lines += ["", "## Evaluation card", "", cards.card_markdown(card), ""]
    lines += _warnings_section(card, configs, warnings)
    return "\n".join(lines) + "\n"


def _grid_section(
    ranked: Sequence[Any], figures: ReportFigures, configs: Mapping[str, Any], contract: Mapping[str, Any], primary: str
) -> list[str]:
    """The grid: each configuration, best first, with its primary's interval, the other quality
    metrics, judged@k and its size and truncation."""
    ci = {row["config_id"]: row for row in figures.intervals}
    quality = table_quality_metrics(contract["metrics"])
    coverage = [m for m in contract["metrics"] if m.startswith("judged@")]
    saturated = figures.saturation["saturated"]
    header = [
        "configuration",
        f"{primary} [95% CI]",
        *[m for m in quality if m != primary],
        *coverage,
        "index MB",
        "truncated",
    ]
    lines = [
        "## Grid",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|",
    ]
    for item in ranked:
        row, ops = configs[item.config_id], configs[item.config_id].get("ops") or {}
        interval = ci.get(item.config_id) or {}
        cells = [
            f"`{item.config_id}`",
            f"{row[primary]:.4f} [{format_cell(interval.get('low'))}, {format_cell(interval.get('high'))}]",
            *[metric_cell(m, row.get(m), saturated) for m in quality if m != primary],
            *[format_cell(row.get(m), "{:.2f}") for m in coverage],
            format_cell(None if ops.get("index_bytes") is None else ops["index_bytes"] / 1e6, "{:.2f}"),
            format_cell(ops.get("truncation_rate"), "{:.1%}"),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _baseline_section(figures: ReportFigures, baseline: str, primary: str) -> list[str]:
    """The grid's comparison with the baseline, then each configuration's pair with the grid's verdict."""
    lines = [f"## Against the baseline `{baseline}`", ""]
    grid = figures.grid
    if grid is None:
        return lines + ["Only one configuration was scored; nothing to compare.", ""]
    lines += ["```", render_grid(grid), "```", ""]
    lines += [
        f"Each block's {primary} verdict is the grid's: Holm-adjusted over the {len(grid.rows)} "
        f"comparisons with `{baseline}`. Secondary metrics and slices are adjusted within their block; "
        f"a slice of fewer than {stats.MIN_SLICE_QUERIES} queries gets no verdict.",
        "",
    ]
    for pair in figures.pairs.values():
        lines += ["```", render_pair(pair, family="configurations"), "```", ""]
    return lines


def _slices_section(ranked: Sequence[Any], slices: Mapping[str, int], primary: str) -> list[str]:
    """Each configuration's primary per slice (the observations' slice means)."""
    lines = ["## Slices", ""]
    if slices:
        names = list(slices)
        lines += [
            "| configuration | " + " | ".join(f"{n} ({slices[n]})" for n in names) + " |",
            "|---|" + "---:|" * len(names),
        ]
        for item in ranked:
            obs_slices = item.observation["scores"]["slices"]
            lines.append(
                f"| `{item.config_id}` | "
                + " | ".join(format_cell((obs_slices.get(n) or {}).get("mean", {}).get(primary)) for n in names)
                + " |"
            )
        lines.append(
            f"\n{primary} per slice (in brackets: scored queries carrying it); a query may carry several "
            "slices; – : no query of the slice could be evaluated (none has a relevant judgment)."
        )
    else:
        lines.append("No slices declared (the queries carry no `slices`).")
    return lines + [""]


def _worst_section(figures: ReportFigures, primary: str) -> list[str]:
    lines = [f"## Worst queries ({primary}, mean over configurations)", ""]
    lines += ["| query | text | relevant | mean | baseline | best |", "|---|---|---:|---:|---:|---:|"]
    for query in figures.worst:
        text = " ".join(str(query.text).split())
        text = text if len(text) <= 70 else text[:69] + "…"
        lines.append(
            f"| {query.query_id} | {text.replace('|', '/')} | {query.relevant} | {query.mean:.4f} | "
            f"{format_cell(query.baseline)} | {query.best:.4f} |"
        )
    return lines


def _warnings_section(
    card: Mapping[str, Any], configs: Mapping[str, Any], warnings: Mapping[str, list[str]]
) -> list[str]:
    lines = ["## Warnings", ""]
    messages = [m for cid in configs for m in warnings.get(cid, [])]
    lines += [f"- {m}" for m in messages] if messages else ["None."]
    if card["code"]["dirty"]:
        lines.append(
            f"- the code or configuration differs from commit {card['code']['commit']} "
            f"({len(card['code']['dirty_paths'])} path(s)); commit before reporting these numbers"
        )
    return lines


def conclusion_markdown(grid: GridReport | None, configs: Mapping[str, Any], primary: str) -> list[str]:
    """report.md's opening: the best configuration, those indistinguishable from it, how often
    it wins under query resampling, what would settle it, whether the queries are too few for the
    differences from the baseline, and whether the relevance threshold changes the winner."""
    if grid is None:
        (only,) = configs
        value = configs[only][primary]
        return [f"**Conclusion:** one configuration was scored, `{only}` ({primary} {value:.4f}); nothing to compare."]
    best = grid.best
    means = {grid.baseline: grid.baseline_mean, **{row.config_id: row.mean for row in grid.rows}}
    others = [f"`{name}`" for name in best.indistinguishable[1:]]
    lines = [
        f"**Conclusion** ({primary}, {grid.n_queries} queries, paired bootstrap, Holm, alpha {best.alpha:g}):",
        "",
        f"- Best: `{best.best}` ({means[best.best]:.4f}).",
        "- Indistinguishable from it: "
        + (
            f"{len(others)} of the {len(means) - 1} others: {', '.join(others)}."
            if others
            else "none; every other configuration is significantly worse."
        ),
    ]
    wins = sorted(grid.winner_frequencies.items(), key=lambda kv: (-kv[1], kv[0]))
    top = [f"`{name}` {share:.1%}" for name, share in wins[:3] if share > 0]
    lines.append(
        f"- Highest mean in {grid.winner_frequencies.get(best.best, 0.0):.1%} of query resamples"
        + (f" (most often: {', '.join(top)})." if len(top) > 1 else ".")
    )
    lines.append(f"- To settle it: {settle_sentence(grid, lambda name: f'`{name}`')}.")
    thin = grid_thin_evidence(grid, lambda name: f"`{name}`")
    if thin is not None:
        lines.append(f"- Thin evidence: {thin}.")
    if grid.thresholds is not None:
        lines.append(f"- Winner by relevance threshold: {threshold_sentence(grid.thresholds)}.")
    confounded = grid.confounded()
    if confounded and grid.coverage_terms is not None:
        terms = grid.coverage_terms
        lines.append(
            f"- Coverage: {len(confounded)} of the {len(grid.rows)} comparisons with `{grid.baseline}` "
            f"{'is' if len(confounded) == 1 else 'are'} coverage-confounded ({grid.coverage_metric} below "
            f"{terms.min_judged:g} or more than {terms.max_judged_gap:g} apart), no verdict: "
            + ", ".join(f"`{row.config_id}`" for row in confounded)
            + f". Unjudged documents count as non-relevant; judge them (`{scoring.POOL_MISSING}`) and rescore."
        )
    changed = [row for row in grid.rows if row.coverage is not None and row.coverage.winner_differs()]
    if changed:
        lines.append(
            f"- Another measure picks the other side than {primary} against `{grid.baseline}` for "
            + ", ".join(f"`{row.config_id}` ({', '.join(row.coverage.winner_differs())})" for row in changed)
            + f". The condensed-list value ({primary}') scores the ranking with unjudged documents removed "
            "(Sakai, SIGIR 2007); bpref (trec_eval's) ignores unjudged documents and grades: it counts judged "
            "non-relevant documents ranked above each relevant one."
        )
    return lines


def intro_html(card: Mapping[str, Any], ranked: Sequence[Any], primary: str) -> str:
    """The report page's opening: what the card covers and the configurations ranked by ``primary``."""
    rows = "".join(f"<tr><td>{html.escape(r.config_id)}</td><td>{r.value:.4f}</td></tr>" for r in ranked)
    return (
        f"<p>Card <code>{card['card_id']}</code>: corpus {html.escape(card['corpus']['id'])} "
        f"({card['corpus']['documents']} documents), {card['queries']['count']} queries "
        f"(split {card['queries']['split']}), judgments {html.escape(card['judgments']['version'])}, "
        f"relevance grade &gt;= {card['judgments']['relevance']['threshold']}.</p>"
        f"<table><tr><th>configuration</th><th>{html.escape(primary)}</th></tr>{rows}</table>"
    )
