"""The report as one document (:func:`report_document`), written as report.md (:func:`report_markdown`)
and as report.html (:func:`releval.reporting.report_html.render_html`), from figures computed before
(:class:`releval.measurement.report_figures.ReportFigures`): a conclusion, the grid with intervals,
comparisons against the baseline, slices, the worst queries, the card and the warnings; the page
adds the plots, the verdict table and the per-query view (:class:`PageViews`).

Adding a section: write a function returning a :class:`~releval.reporting.document.Section` (its
figures computed in :func:`releval.measurement.report_figures.report_figures` and read here from
``figures``) and name it once in :func:`report_document`'s list; report.md and report.html both show
it (``media="html"`` keeps it to the page).

Pure: nothing here computes a statistic or scores a run; the report stage and the audit compute the
figures with :func:`releval.measurement.report_figures.report_figures` and hand them over.

Under a sampled judgment set the report reads the inferred form of the primary throughout
(:func:`releval.measurement.pair.decided_metric`: ndcg@10 -> infndcg@10; the grid best first by it) and
its opening carries the sample's caveat (:func:`releval.judging.completeness.contract_sample_caveat`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from releval import paths
from releval.judging import completeness
from releval.measurement import scoring, stats
from releval.measurement.chunk_budget import ChunkPair, split_config
from releval.measurement.explain import Explanation, ShownDocument
from releval.measurement.operations import MONEY_COLUMNS
from releval.measurement.grid import GridReport
from releval.measurement.pair import decided_metric
from releval.measurement.report_figures import ReportFigures
from releval.provenance import card as cards
from releval.reporting.document import (
    HTML,
    Badge,
    Block,
    Bullets,
    Details,
    Figure,
    Paragraph,
    Plain,
    Preformatted,
    Ranked,
    Rankings,
    ReportDocument,
    Section,
    Table,
    markdown,
)
from releval.reporting.grid_text import grid_thin_evidence, render_grid, settle_sentence, threshold_sentence
from releval.reporting.markdown import (
    coverage_note,
    format_cell,
    metric_cell,
    saturation_note,
    table_quality_metrics,
)
from releval.reporting.pair_text import render_pair
from releval.reporting.plots import plot_title
from releval.reporting.text import format_p, interval, signed


@dataclass(frozen=True)
class PageViews:
    """What only report.html shows, made before rendering: each plot's PNG by name
    (:data:`releval.reporting.plots.PLOTS`) and the per-query contrasts of pairs of configurations
    (:func:`releval.measurement.explain.explain_pairs`), the one to open first first."""

    plots: Mapping[str, bytes] = field(default_factory=dict)
    contrasts: Sequence[Explanation] = ()


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
    """report.md: :func:`report_document` written as Markdown."""
    return markdown(
        report_document(
            card,
            ranked,
            figures,
            configs,
            contract,
            baseline,
            primary,
            warnings,
            resamples=resamples,
            seed=seed,
            reports=reports,
        )
    )


def report_document(
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
    page: PageViews | None = None,
) -> ReportDocument:
    """The report: a conclusion, the grid with intervals, comparisons against the baseline (one
    verdict each: the grid's Holm-adjusted one, or coverage-confounded), slices, the worst
    queries, the card and the warnings. ``figures`` holds every statistic shown (with the winner at
    each relevance threshold when it was computed); ``ranked``: the observations, best first
    (:func:`releval.provenance.card.rank_observations`); ``reports``: the folder it is written to,
    named with the plots and machine figures beside it; ``page``: what only report.html shows.

    The grid shows judged@k as columns and marks a saturated recall cutoff ``1.0000 (sat.)``
    (``figures.saturation``). Under a sampled judgment set ``primary`` is read in its inferred form and
    ``ranked`` reordered by it (see the module's docstring)."""
    page = page or PageViews()
    caveat = completeness.contract_sample_caveat(contract)
    if caveat is not None:
        primary = decided_metric(contract, primary)
        ranked = sorted(ranked, key=lambda item: (-float(configs[item.config_id][primary]), item.config_id))

    def here(path: str) -> str:
        return paths.rebase(path, paths.REPORTS, reports).as_posix()

    sections = [
        _opening(card, figures, configs, baseline, primary, page, here, caveat),
        _grid_section(ranked, figures, configs, contract, primary, resamples, seed, here),
        _baseline_section(figures, baseline, primary),
        _chunk_size_section(figures.chunk_sizes, contract, primary),
        _slices_section(ranked, figures.slices, primary, figures.slice_means),
        _worst_section(figures, primary),
        _per_query_section(page.contrasts, primary),
        _plots_section(page.plots, primary, baseline),
        _card_section(card),
        _warnings_section(card, configs, warnings),
    ]
    return ReportDocument(f"releval report: {card['dataset']}", tuple(s for s in sections if s is not None))


def _opening(
    card: Mapping[str, Any],
    figures: ReportFigures,
    configs: Mapping[str, Any],
    baseline: str,
    primary: str,
    page: PageViews,
    here,
    caveat: str | None = None,
) -> Section:
    """The conclusion, the difference plot beside it on the page, and what the numbers are made of;
    ``caveat``: the sample's, under a sampled judgment set."""
    lead, bullets = conclusion(figures.grid, configs, primary)
    blocks: list[Block] = [Paragraph(lead)]
    if bullets:
        blocks.append(Bullets(tuple(bullets)))
    if caveat is not None:
        blocks.append(Paragraph(f"Sampled judgments: {caveat}."))
    if "difference_ci" in page.plots and figures.grid is not None:
        grid = figures.grid
        blocks.append(
            Figure(
                "difference_ci",
                plot_title("difference_ci", primary, baseline, 1 - grid.alpha),
                f"Each configuration's mean {primary} difference from `{baseline}` on the same {grid.n_queries} "
                "queries, with its paired bootstrap interval: right of the line is better. The colour is the "
                f"verdict, Holm-adjusted over the {len(grid.rows)} comparisons; bold: indistinguishable from the "
                "best. Marginal intervals of each configuration (the grid's column) overlap even where a paired "
                "difference is clear: read this plot, not them.",
                page.plots["difference_ci"],
                f"{Path(paths.PLOTS).name}/difference_ci.png",
                aside=True,
            )
        )
    blocks.append(
        Paragraph(
            f"Card `{card['card_id']}`; judgments {card['judgments']['version']}; "
            f"{card['queries']['count']} queries scored (split {card['queries']['split']}); "
            f"baseline `{baseline}`. Plots: {here(paths.REPORT_HTML)} (opens offline), {here(paths.PLOTS)}/*.png."
        )
    )
    return Section(None, tuple(blocks), anchor="conclusion", nav="Conclusion")


def _grid_section(
    ranked: Sequence[Any],
    figures: ReportFigures,
    configs: Mapping[str, Any],
    contract: Mapping[str, Any],
    primary: str,
    resamples: int,
    seed: int,
    here,
) -> Section:
    """The grid: each configuration, best first, with its primary's interval, the other quality
    metrics, judged@k and its size and truncation; how the intervals were made, and the notes on
    saturated cutoffs and coverage."""
    ci = {row["config_id"]: row for row in figures.intervals}
    quality = table_quality_metrics(contract["metrics"])
    inferred = [m for m in contract.get(scoring.INFERRED_KEY) or [] if m != primary]  # a sampled set's others
    coverage = [m for m in contract["metrics"] if m.startswith("judged@")]
    saturated = figures.saturation["saturated"]
    header = [
        "configuration",
        f"{primary} [95% CI]",
        *inferred,
        *[m for m in quality if m != primary],
        *coverage,
        "index MB",
        "truncated",
    ]
    money = [(key, label) for key, label in MONEY_COLUMNS if any(key in (c.get("ops") or {}) for c in configs.values())]
    header += [label for _, label in money]
    rows = []
    for item in ranked:
        row, ops = configs[item.config_id], configs[item.config_id].get("ops") or {}
        interval = ci.get(item.config_id) or {}
        cells = [
            f"`{item.config_id}`",
            f"{row[primary]:.4f} [{format_cell(interval.get('low'))}, {format_cell(interval.get('high'))}]",
            *[format_cell(row.get(m)) for m in inferred],
            *[metric_cell(m, row.get(m), saturated) for m in quality if m != primary],
            *[format_cell(row.get(m), "{:.2f}") for m in coverage],
            format_cell(None if ops.get("index_bytes") is None else ops["index_bytes"] / 1e6, "{:.2f}"),
            format_cell(ops.get("truncation_rate"), "{:.1%}"),
            *[format_cell(ops.get(key), "{:.6f}") for key, _ in money],
        ]
        rows.append(tuple(cells))
    blocks: list[Block] = [
        Table(tuple(header), tuple(rows), ("left",) + ("right",) * (len(header) - 1)),
        Paragraph(
            f"Intervals: percentile bootstrap over queries, {resamples} resamples, seed {seed}. "
            f"Throughput, latency and memory depend on the machine: {here(paths.OPS_MD)}."
            + (
                " Index cost and cost per 1,000 queries: at each priced model's declared price per 1M input tokens, "
                "from the tokens its endpoint reported; blank where no price is declared."
                if money
                else ""
            )
        ),
    ]
    notes = [
        saturation_note(figures.saturation, table_quality_metrics(contract["metrics"])),
        coverage_note(configs, contract),
    ]
    blocks += [Paragraph(note) for note in notes if note]
    return Section("Grid", tuple(blocks), anchor="grid")


def _baseline_section(figures: ReportFigures, baseline: str, primary: str) -> Section:
    """The grid's comparison with the baseline (on the page, first as a verdict table), then each
    configuration's pair with the grid's verdict."""
    heading = f"Against the baseline `{baseline}`"
    grid = figures.grid
    if grid is None:
        return Section(
            heading, (Paragraph("Only one configuration was scored; nothing to compare."),), anchor="baseline"
        )
    pairs = [
        Details(
            f"`{cid}`: {_verdict_word(grid, cid)}",
            (Preformatted(render_pair(pair, family="configurations")),),
        )
        for cid, pair in figures.pairs.items()
    ]
    blocks: list[Block] = [
        _verdict_table(grid),
        Details(
            "The grid as `releval compare --grid` prints it: p-values, sign tests, coverage, winners",
            (Preformatted(render_grid(grid)),),
        ),
        Paragraph(
            f"Each block's {primary} verdict is the grid's: Holm-adjusted over the {len(grid.rows)} "
            f"comparisons with `{baseline}`. Secondary metrics and slices are adjusted within their block; "
            f"a slice of fewer than {stats.MIN_SLICE_QUERIES} queries gets no verdict."
        ),
        Details(f"Each comparison in full, with its secondary metrics and slices ({len(pairs)})", tuple(pairs)),
    ]
    return Section(heading, tuple(blocks), anchor="baseline", nav="Against the baseline")


def _chunk_size_section(pairs: Sequence[ChunkPair], contract: Mapping[str, Any], primary: str) -> Section | None:
    """Configurations that differ only in chunking, at equal token budgets (evidence recall@B), with the
    document-level primary beside them; absent when no cell has two chunkings or no evidence was scored."""
    if not pairs:
        return None
    budget_rows = [p for p in pairs if p.budget is not None]
    rows = []
    for pair in pairs:
        c = pair.comparison
        rows.append(
            (
                f"`{pair.cell}`",
                f"{pair.budget:,} tokens" if pair.budget is not None else f"document level ({primary})",
                f"{split_config(pair.smaller)[1]} {c.baseline_mean:.4f}",
                f"{split_config(pair.larger)[1]} {c.candidate_mean:.4f}",
                signed(c.mean_difference),
                interval(c.bootstrap_ci),
                format_p(c.adjusted_p_value) if c.adjusted_p_value is not None else "–",
                f"{c.wins}/{c.losses}/{c.ties}",
                str(c.n_queries),
                Badge(c.verdict, c.verdict),
            )
        )
    confidence = f"{pairs[0].comparison.confidence:.0%} CI"
    header = ("cell", "budget", "smaller", "larger", "Δ", confidence, "p (Holm)", "W/L/T", "queries", "verdict")
    tau = (contract.get("evidence") or {}).get("tau")
    note = Paragraph(
        "Configurations that differ only in their chunking, each against its cell's smallest chunking, at equal "
        "prompt budgets: evidence recall@B is the share of a query's evidence spans borne by the top chunks that "
        f"fit in B tokens (a chunk bears a span when it covers at least {tau} of its characters), over the queries "
        f"whose relevant judgments carry spans. Verdicts Holm-adjusted over the {len(budget_rows)} budget rows. "
        f"The document-level {primary} rows (adjusted apart) credit a page whatever passage of it was retrieved, "
        "so they cannot settle chunk size. `releval compare A B --metric evidence_recall@1024tok` gives one in full."
    )
    align = ("left", "left") + ("right",) * 7 + ("left",)
    return Section("Chunk size at equal budgets", (Table(header, tuple(rows), align), note), anchor="chunk-size")


def _verdict_word(grid: GridReport, config_id: str) -> str:
    row = next((r for r in grid.rows if r.config_id == config_id), None)
    return "no grid row" if row is None else f"{row.verdict}, Δ {signed(row.mean_difference)}"


def _verdict_table(grid: GridReport) -> Table:
    """The page's verdict table: the baseline, then each configuration by its difference from it."""
    judged = grid.coverage_metric if grid.baseline_judged is not None else None
    header = (
        "configuration",
        grid.metric,
        "Δ",
        f"{1 - grid.alpha:.0%} CI",
        "p (Holm)",
        "W/L/T",
        *((judged,) if judged else ()),
        "verdict",
        "as good as the best",
    )
    best = grid.best.indistinguishable

    def same_as_best(config_id: str) -> Badge | str:
        return Badge("≈ best", "best") if config_id in best else ""

    rows = [
        (
            f"`{grid.baseline}` (baseline)",
            f"{grid.baseline_mean:.4f}",
            "",
            "",
            "",
            "",
            *((format_cell(grid.baseline_judged, "{:.2f}"),) if judged else ()),
            "—",
            same_as_best(grid.baseline),
        )
    ]
    for row in sorted(grid.rows, key=lambda r: (-r.mean_difference, r.config_id)):
        judged_value = row.coverage.judged[1] if row.coverage is not None and row.coverage.judged else None
        rows.append(
            (
                f"`{row.config_id}`",
                f"{row.mean:.4f}",
                signed(row.mean_difference),
                interval(row.bootstrap_ci),
                format_p(row.p_bootstrap_holm),
                f"{row.wins}/{row.losses}/{row.ties}",
                *((format_cell(judged_value, "{:.2f}"),) if judged else ()),
                Badge(row.verdict, row.verdict),
                same_as_best(row.config_id),
            )
        )
    align = ("left",) + ("right",) * (len(header) - 3) + ("left", "left")
    return Table(header, tuple(rows), align, media=HTML)


def _slices_section(
    ranked: Sequence[Any],
    slices: Mapping[str, int],
    primary: str,
    means: Mapping[str, Mapping[str, float | None]] | None = None,
) -> Section:
    """Each configuration's primary per slice: ``means`` (config id -> slice -> mean) when given, else the
    observations' slice means."""
    if not slices:
        return Section("Slices", (Paragraph("No slices declared (the queries carry no `slices`)."),), anchor="slices")
    names = list(slices)
    rows = []
    for item in ranked:
        obs_slices = item.observation["scores"]["slices"]
        rows.append(
            (
                f"`{item.config_id}`",
                *[
                    format_cell(
                        means[item.config_id].get(n)
                        if means is not None
                        else (obs_slices.get(n) or {}).get("mean", {}).get(primary)
                    )
                    for n in names
                ],
            )
        )
    table = Table(
        ("configuration", *[f"{n} ({slices[n]})" for n in names]), tuple(rows), ("left",) + ("right",) * len(names)
    )
    note = Paragraph(
        f"{primary} per slice (in brackets: scored queries carrying it); a query may carry several "
        "slices; – : no query of the slice could be evaluated (none has a relevant judgment)."
    )
    return Section("Slices", (table, note), anchor="slices")


def _worst_section(figures: ReportFigures, primary: str) -> Section:
    rows = []
    for query in figures.worst:
        text = " ".join(str(query.text).split())
        text = text if len(text) <= 70 else text[:69] + "…"
        rows.append(
            (
                Plain(query.query_id),
                Plain(text.replace("|", "/")),
                str(query.relevant),
                f"{query.mean:.4f}",
                format_cell(query.baseline),
                f"{query.best:.4f}",
            )
        )
    table = Table(
        ("query", "text", "relevant", "mean", "baseline", "best"),
        tuple(rows),
        ("left", "left", "right", "right", "right", "right"),
    )
    return Section(
        f"Worst queries ({primary}, mean over configurations)", (table,), anchor="worst", nav="Worst queries"
    )


def _per_query_section(contrasts: Sequence[Explanation], primary: str) -> Section | None:
    """The page's per-query view: for each pair, the queries where the two differ most, with both
    top-k lists side by side (what `releval explain A B` prints)."""
    if not contrasts:
        return None
    folds = []
    for i, explanation in enumerate(contrasts):
        a, b = explanation.a, explanation.b
        summary = (
            f"`{b}` against `{a}`: {primary} {explanation.mean_a:.4f} → {explanation.mean_b:.4f}, better on "
            f"{explanation.wins}, worse on {explanation.losses}, equal on {explanation.ties} of {explanation.queries} "
            f"queries; the {len(explanation.contrasts)} that differ most"
        )
        views = tuple(_rankings(contrast, explanation, primary) for contrast in explanation.contrasts)
        if not views:
            views = (Paragraph("No query differs."),)
        folds.append(Details(summary, views, open=i == 0))
    first = contrasts[0]
    intro = Paragraph(
        f"Where two configurations differ most on {primary}, and what each retrieved there: both top "
        f"{first.depth} lists side by side, each document with its grade (? : unjudged, counted as grade 0), its "
        "title and the passage that ranked it (its best chunk); a number beside a document is its rank in the "
        f"other list. Scored queries only. Any two configurations: `releval explain {first.a} '{first.b}'`."
    )
    return Section(
        "Per query: where configurations differ",
        (intro, *folds),
        anchor="per-query",
        nav="Per query",
        media=HTML,
    )


def _rankings(contrast, explanation: Explanation, primary: str) -> Rankings:
    heading = (
        f"`{contrast.query_id}` {primary} {contrast.a:.4f} → {contrast.b:.4f} (Δ {signed(contrast.difference)}), "
        f"{contrast.relevant} relevant judged"
    )
    return Rankings(
        heading,
        Plain(contrast.text),
        (f"`{explanation.a}`", f"`{explanation.b}`"),
        tuple(_ranked(d) for d in contrast.top_a),
        tuple(_ranked(d) for d in contrast.top_b),
    )


def _ranked(document: ShownDocument) -> Ranked:
    return Ranked(
        rank=document.rank,
        label=Plain(document.title or document.doc_id),
        doc_id=document.doc_id,
        grade=document.grade,
        text=Plain(document.passage),
        note="only here" if document.other_rank is None else f"#{document.other_rank} there",
    )


PLOT_CAPTIONS = {
    "recall_curve": "The share of each query's relevant documents in the top k, averaged over the scored queries; "
    "k on a log scale, the baseline in black.",
    "quality_cost": "Quality against the index's size on disk: up and to the left is better. Throughput and latency "
    "depend on the machine (ops.md).",
    "difference_hist": "How each configuration's per-query differences from the baseline spread: bars right of the "
    "line are queries it improves, the bar at 0 queries where it changes nothing.",
}


def _plots_section(plots: Mapping[str, bytes], primary: str, baseline: str) -> Section | None:
    """The page's other plots (the difference plot stands beside the conclusion)."""
    figures = tuple(
        Figure(name, plot_title(name, primary, baseline), caption, plots[name], f"{Path(paths.PLOTS).name}/{name}.png")
        for name, caption in PLOT_CAPTIONS.items()
        if name in plots
    )
    return Section("Plots", figures, anchor="plots", media=HTML) if figures else None


def _card_section(card: Mapping[str, Any]) -> Section:
    """The card's summary (:func:`releval.provenance.card.card_markdown`), one item per line."""
    items: list[str] = []
    for line in cards.card_markdown(card).splitlines():
        if line.startswith("- ") or not items:
            items.append(line.removeprefix("- "))
        else:  # a line of an item's own text
            items[-1] += "\n" + line
    return Section("Evaluation card", (Bullets(tuple(items)),), anchor="card", nav="Card")


def _warnings_section(
    card: Mapping[str, Any], configs: Mapping[str, Any], warnings: Mapping[str, list[str]]
) -> Section:
    messages = [m for cid in configs for m in warnings.get(cid, [])]
    if card["code"]["dirty"]:
        messages.append(
            f"the code or configuration differs from commit {card['code']['commit']} "
            f"({len(card['code']['dirty_paths'])} path(s)); commit before reporting these numbers"
        )
    return Section("Warnings", (Bullets(tuple(messages)) if messages else Paragraph("None."),), anchor="warnings")


def conclusion_markdown(grid: GridReport | None, configs: Mapping[str, Any], primary: str) -> list[str]:
    """report.md's opening as lines (:func:`conclusion`)."""
    lead, bullets = conclusion(grid, configs, primary)
    return [lead, "", *(f"- {item}" for item in bullets)] if bullets else [lead]


def conclusion(grid: GridReport | None, configs: Mapping[str, Any], primary: str) -> tuple[str, list[str]]:
    """The report's opening sentence and its points: the best configuration, those indistinguishable
    from it, how often it wins under query resampling, what would settle it, whether the queries are
    too few for the differences from the baseline, and whether the relevance threshold changes the winner."""
    if grid is None:
        (only,) = configs
        value = configs[only][primary]
        return (
            f"**Conclusion:** one configuration was scored, `{only}` ({primary} {value:.4f}); nothing to compare.",
            [],
        )
    best = grid.best
    means = {grid.baseline: grid.baseline_mean, **{row.config_id: row.mean for row in grid.rows}}
    others = [f"`{name}`" for name in best.indistinguishable[1:]]
    lead = f"**Conclusion** ({primary}, {grid.n_queries} queries, paired bootstrap, Holm, alpha {best.alpha:g}):"
    lines = [
        f"Best: `{best.best}` ({means[best.best]:.4f}).",
        "Indistinguishable from it: "
        + (
            f"{len(others)} of the {len(means) - 1} others: {', '.join(others)}."
            if others
            else "none; every other configuration is significantly worse."
        ),
    ]
    wins = sorted(grid.winner_frequencies.items(), key=lambda kv: (-kv[1], kv[0]))
    top = [f"`{name}` {share:.1%}" for name, share in wins[:3] if share > 0]
    lines.append(
        f"Highest mean in {grid.winner_frequencies.get(best.best, 0.0):.1%} of query resamples"
        + (f" (most often: {', '.join(top)})." if len(top) > 1 else ".")
    )
    lines.append(f"To settle it: {settle_sentence(grid, lambda name: f'`{name}`')}.")
    thin = grid_thin_evidence(grid, lambda name: f"`{name}`")
    if thin is not None:
        lines.append(f"Thin evidence: {thin}.")
    if grid.thresholds is not None:
        lines.append(f"Winner by relevance threshold: {threshold_sentence(grid.thresholds)}.")
    elif grid.thresholds_note is not None:
        lines.append(f"Winner by relevance threshold: {grid.thresholds_note}.")
    confounded = grid.confounded()
    if confounded and grid.coverage_terms is not None:
        terms = grid.coverage_terms
        lines.append(
            f"Coverage: {len(confounded)} of the {len(grid.rows)} comparisons with `{grid.baseline}` "
            f"{'is' if len(confounded) == 1 else 'are'} coverage-confounded ({grid.coverage_metric} below "
            f"{terms.min_judged:g} or more than {terms.max_judged_gap:g} apart), no verdict: "
            + ", ".join(f"`{row.config_id}`" for row in confounded)
            + f". Unjudged documents count as non-relevant; judge them (`{scoring.POOL_MISSING}`) and rescore."
        )
    changed = [row for row in grid.rows if row.coverage is not None and row.coverage.winner_differs()]
    if changed:
        lines.append(
            f"Another measure picks the other side than {primary} against `{grid.baseline}` for "
            + ", ".join(f"`{row.config_id}` ({', '.join(row.coverage.winner_differs())})" for row in changed)
            + f". The condensed-list value ({primary}') scores the ranking with unjudged documents removed "
            "(Sakai, SIGIR 2007); bpref (trec_eval's) ignores unjudged documents and grades: it counts judged "
            "non-relevant documents ranked above each relevant one."
        )
    return lead, lines
