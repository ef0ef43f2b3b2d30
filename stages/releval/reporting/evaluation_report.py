"""The report stage's product: the evaluation card, its observations, plot data and report.md/html.

:func:`read_inputs` reads what `score` and the earlier stages wrote; :func:`build_report` builds
every output in memory (validated), for the stage to write.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from releval import paths
from releval.config import section
from releval.retrieval.models import FAMILIES
from releval.errors import InputError
from releval.measurement import compare, holdout, scoring, stats
from releval.provenance import card as cards
from releval.reporting import card_inputs, plots
from releval.reporting.markdown import (
    coverage_note,
    format_cell,
    metric_cell,
    saturation_note,
    table_quality_metrics,
)
from releval.retrieval import runs
from releval.stage import warn


@dataclass(frozen=True)
class ReportInputs:
    """What the report is made from: score's outputs and the stages' work files."""

    contract: dict[str, Any]  # metrics.json's
    configs: dict[str, Any]  # metrics.json's, one entry per scored configuration
    lineage: dict[str, Any]
    per_query: pl.DataFrame
    docs: pl.DataFrame
    queries: pl.DataFrame
    qrels: pl.DataFrame
    judgments_meta: dict[str, Any]
    reports: Path  # the folder the report's outputs go to
    docs_path: Path
    queries_path: Path
    holdout_log: str


def read_inputs(reports: Path, work: Path, holdout_log: str) -> ReportInputs:
    """Read score's outputs under ``reports`` and the work files under ``work``."""
    metrics_path = paths.rebase(paths.METRICS, paths.REPORTS, reports)
    metrics_doc = read_json(metrics_path)
    contract, configs = metrics_doc["contract"], metrics_doc["configs"]
    if not configs:
        raise InputError("no configurations were scored", file=str(metrics_path), field="configs")
    lineage = read_json(paths.rebase(paths.LINEAGE, paths.REPORTS, reports))
    per_query = pl.read_parquet(paths.rebase(paths.PER_QUERY, paths.REPORTS, reports))
    docs_path, queries_path = paths.rebase(paths.DOCS, paths.WORK, work), paths.rebase(paths.QUERIES, paths.WORK, work)
    return ReportInputs(
        contract=contract,
        configs=configs,
        lineage=lineage,
        per_query=per_query.with_columns(pl.col("query_id").cast(pl.Utf8)),
        docs=pl.read_parquet(docs_path),
        queries=pl.read_parquet(queries_path).with_columns(pl.col("query_id").cast(pl.Utf8)),
        qrels=pl.read_parquet(paths.rebase(paths.QRELS, paths.WORK, work)).with_columns(
            pl.col("query_id").cast(pl.Utf8), pl.col("doc_id").cast(pl.Utf8)
        ),
        judgments_meta=read_json(paths.rebase(paths.JUDGMENTS_META, paths.WORK, work)),
        reports=reports,
        docs_path=docs_path,
        queries_path=queries_path,
        holdout_log=holdout_log,
    )


def read_json(path: Path) -> Any:
    """A JSON file an earlier stage wrote; missing, it asks for `dvc repro`."""
    if not path.exists():
        raise InputError("missing; run `dvc repro`", file=str(path))
    return json.loads(path.read_text(encoding="utf-8"))


@dataclass(frozen=True)
class EvaluationReport:
    """Every output of the report stage, built and validated, not yet written."""

    card: dict[str, Any]
    observations: dict[str, Any]  # observations.json: the card id and one observation per configuration
    plot_tables: dict[str, list[dict[str, Any]]]  # plot name → its data rows (reports/plots/<name>.json)
    markdown: str
    page: str  # report.html
    warnings: list[str]
    primary: str
    baseline: str


HUMAN_ONLY_SLICE = "human-only"


def human_only_slice(judgments_meta: Mapping[str, Any], scored_ids: list[str]) -> dict[str, list[str]]:
    """Where a model judge labelled some queries, the scored queries no model touched: a slice kept
    and reported in every version, so a figure never rests on the model judge alone."""
    model_judged = set(judgments_meta.get("model_judged_queries") or [])
    return {HUMAN_ONLY_SLICE: [q for q in scored_ids if q not in model_judged]} if model_judged else {}


def build_report(
    inputs: ReportInputs, params: Mapping[str, Any], template: str | Path, resamples: int, seed: int, worst: int
) -> EvaluationReport:
    """The card and observations, the plots' data, report.md and report.html (``template``: the offline page's file)."""
    contract, configs, lineage = inputs.contract, inputs.configs, inputs.lineage
    dataset, judgments_params = section(params, "dataset"), section(params, "judgments")
    scored = holdout.scored_queries(inputs.queries, contract, source=str(inputs.queries_path))
    scored_ids = scored["query_id"].to_list()
    slices = compare.query_slices(scored) | human_only_slice(inputs.judgments_meta, scored_ids)
    log_entries = holdout.read_log(inputs.holdout_log)
    split_counts = holdout.split_counts(inputs.queries)
    run_metas = {cid: card_inputs.run_meta(lineage.get(cid, {})) for cid in configs}

    card = cards.build_card(
        contract=contract,
        dataset=dataset,
        judgments_params=judgments_params,
        judgments_meta=inputs.judgments_meta,
        corpus=card_inputs.corpus_info(dataset, inputs.docs, inputs.docs_path),
        queries=card_inputs.queries_info(dataset, inputs.queries, split_counts, inputs.queries_path),
        qrels_sha256=cards.qrels_content_sha256(inputs.qrels),
        models=card_inputs.models_used(params, lineage),
        slices={name: len(ids) for name, ids in slices.items()},
        holdout=card_inputs.holdout_record(log_entries, split_counts, contract, inputs.holdout_log),
        code=card_inputs.code_state(),
        rubric=card_inputs.rubric_info(inputs.judgments_meta),
        external=cards.external_runs(run_metas),
    )
    cards.validate_card(card, str(paths.rebase(paths.CARD, paths.REPORTS, inputs.reports)))
    warnings = configuration_warnings(configs, run_metas, contract)
    observations = []
    for cid in configs:
        rows = inputs.per_query.filter(pl.col("config_id") == cid)
        computed = cards.slice_means(rows, slices, contract["metrics"]) if slices else {}
        observations.append(
            cards.build_observation(
                card,
                cid,
                configs[cid],
                lineage.get(cid, {}),
                run_metas[cid],
                slices=computed,
                warnings=warnings.get(cid, []),
            )
        )
    observations_doc = {"card_id": card["card_id"], "observations": observations}
    cards.validate_observations(
        observations_doc, card, str(paths.rebase(paths.OBSERVATIONS, paths.REPORTS, inputs.reports))
    )

    primary = contract.get("primary") or contract["metrics"][0]
    order = list(configs)
    baseline = baseline_config(params, order)
    doc_runs = document_runs(lineage, order, scored_ids)
    scored_qrels = holdout.restrict(inputs.qrels, scored_ids)
    tables = {
        "ndcg_ci": plots.interval_table(inputs.per_query, primary, order, resamples, seed),
        "recall_curve": plots.recall_curve_table(doc_runs, scored_qrels, scoring.contract_from_record(contract)),
        "quality_cost": plots.quality_cost_table(configs, primary),
        "difference_hist": plots.difference_table(inputs.per_query, baseline, primary, order),
    }
    ranked = cards.rank_observations(observations, [card], primary)
    markdown = report_markdown(
        card,
        ranked,
        tables["ndcg_ci"],
        configs,
        contract,
        inputs.per_query,
        scored,
        inputs.qrels,
        baseline,
        primary,
        warnings,
        resamples=resamples,
        seed=seed,
        worst=worst,
        threshold_means=compare.threshold_means(doc_runs, scored_qrels, contract, primary) if len(order) > 1 else None,
        reports=inputs.reports,
    )
    page = plots.html_page(
        plots.read_template(template),
        plots.vega_specs(tables, primary, baseline),
        f"releval report: {card['dataset']} under judgments {card['judgments']['version']}",
        intro_html=intro_html(card, ranked, primary),
        images={name: f"plots/{name}.png" for name in tables},
    )
    return EvaluationReport(
        card=card,
        observations=observations_doc,
        plot_tables=tables,
        markdown=markdown,
        page=page,
        warnings=[message for messages in warnings.values() for message in messages],
        primary=primary,
        baseline=baseline,
    )


def document_runs(lineage: Mapping[str, Any], configs: list[str], scored_ids: list[str]) -> dict[str, pl.DataFrame]:
    """Each configuration's run at document level over the scored queries (lineage.json's run_dir)."""
    found = {}
    for cid in configs:
        run_dir = (lineage.get(cid) or {}).get("run_dir")
        if not run_dir or not (Path(run_dir) / "run.parquet").exists():
            raise InputError(f"no run for {cid}; run `dvc repro`", file=paths.LINEAGE, field=cid)
        chunk_run, _ = runs.read_run(run_dir)
        found[cid] = scoring.document_run(chunk_run, scored_ids)
    return found


def baseline_config(params: Mapping[str, Any], configs: list[str]) -> str:
    """params.yaml's grid.baseline when it was scored, else (with a warning) the first configuration."""
    baseline = (params.get("grid") or {}).get("baseline")
    if baseline in configs:
        return baseline
    if baseline:
        warn(f"params.yaml grid.baseline {baseline!r} was not scored; comparing against {configs[0]}")
    return configs[0]


def configuration_warnings(
    configs: Mapping[str, Any], run_metas: Mapping[str, Any], contract: Mapping[str, Any]
) -> dict[str, list[str]]:
    """Per configuration: judged@k below scoring.JUDGED_WARNING, and chunks truncated by a dense model."""
    found: dict[str, list[str]] = {}
    for cid, row in configs.items():
        for metric, value in scoring.low_judged(row, contract.get("metrics") or []):
            found.setdefault(cid, []).append(
                f"{cid}: {metric} = {value:.2f}: most of its top documents are unjudged and count as "
                "non-relevant; its scores are lower bounds"
            )
        meta = run_metas.get(cid) or {}
        rate = (row.get("ops") or {}).get("truncation_rate")
        if rate and meta.get("kind", "dense") in FAMILIES:
            model = meta.get("model")
            limit = ((meta.get("models") or {}).get(model) or {}).get("protocol", {}).get("max_seq_length")
            share = (row.get("ops") or {}).get("truncated_token_share")
            found.setdefault(cid, []).append(
                f"{cid}: {rate:.1%} of chunks were truncated at {model}'s max_seq_length"
                + (f" ({limit} tokens)" if limit else "")
                + (
                    f", {share:.1%} of their tokens never embedded"
                    if share is not None
                    else "; their ends were never embedded"
                )
            )
    return found


# --------------------------------------------------------------------------- report.md and the page's intro


def _side(per_query: pl.DataFrame, contract: Mapping[str, Any], config_id: str) -> compare.Side:
    rows = per_query.filter(pl.col("config_id") == config_id).drop("config_id")
    rows = rows.select([c for c in rows.columns if c == "query_id" or rows[c].null_count() < rows.height])
    return compare.Side(config_id, paths.PER_QUERY, dict(contract), rows)


def report_markdown(
    card: Mapping[str, Any],
    ranked: Sequence[Any],
    intervals: Sequence[Mapping[str, Any]],
    configs: Mapping[str, Any],
    contract: Mapping[str, Any],
    per_query: pl.DataFrame,
    scored: pl.DataFrame,
    qrels: pl.DataFrame,
    baseline: str,
    primary: str,
    warnings: Mapping[str, list[str]],
    *,
    resamples: int,
    seed: int,
    worst: int,
    threshold_means: Mapping[int, Mapping[str, float] | None] | None = None,
    reports: str | Path = paths.REPORTS,
) -> str:
    """report.md: a conclusion, the grid with intervals, comparisons against the baseline (one
    verdict each: the grid's Holm-adjusted one, or coverage-confounded), slices, the worst
    queries, the card and the warnings. ``threshold_means`` (:func:`compare.threshold_means`)
    adds the winner at each relevance threshold. ``reports``: the folder it is written to, named
    with the plots and machine figures beside it.

    The grid shows judged@k as columns and marks a saturated recall cutoff ``1.0000 (sat.)``
    (:func:`scoring.saturation` of the card's corpus)."""
    ci = {row["config_id"]: row for row in intervals}

    def here(path: str) -> str:
        return paths.rebase(path, paths.REPORTS, reports).as_posix()

    quality = table_quality_metrics(contract["metrics"])
    coverage = [m for m in contract["metrics"] if m.startswith("judged@")]
    saturation = scoring.saturation(contract["metrics"], int(card["corpus"]["documents"]))
    saturated = saturation["saturated"]
    header = [
        "configuration",
        f"{primary} [95% CI]",
        *[m for m in quality if m != primary],
        *coverage,
        "index MB",
        "truncated",
    ]
    grid = None
    if len(configs) > 1:
        grid = compare.compare_grid(
            per_query,
            baseline,
            primary,
            list(configs),
            resamples,
            seed,
            threshold_means=threshold_means,
            contract=contract,
        )
    lines = [
        f"# releval report: {card['dataset']}",
        "",
        *conclusion_markdown(grid, configs, primary),
        "",
        f"Card `{card['card_id']}`; judgments {card['judgments']['version']}; "
        f"{card['queries']['count']} queries scored (split {card['queries']['split']}); "
        f"baseline `{baseline}`. Plots: {here(paths.REPORT_HTML)} (opens offline), {here(paths.PLOTS)}/*.png.",
        "",
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
    lines += [
        "",
        f"Intervals: percentile bootstrap over queries, {resamples} resamples, seed {seed}. "
        f"Throughput, latency and memory depend on the machine: {here(paths.OPS_MD)}.",
        "",
    ]
    notes = [
        saturation_note(saturation, quality),
        coverage_note(configs, contract),
    ]
    lines += [line for note in notes if note for line in (note, "")]

    lines += [f"## Against the baseline `{baseline}`", ""]
    secondary = [m for m in compare.DEFAULT_SECONDARY if m in per_query.columns]
    if grid is not None:
        lines += ["```", compare.render_grid(grid), "```", ""]
        base_side = _side(per_query, contract, baseline)
        pairs = {
            cid: compare.compare_sides(
                base_side,
                _side(per_query, contract, cid),
                primary,
                secondary,
                scored,
                n_resamples=resamples,
                seed=seed,
            )
            for cid in configs
            if cid != baseline
        }
        lines += [
            f"Each block's {primary} verdict is the grid's: Holm-adjusted over the {len(grid.rows)} "
            f"comparisons with `{baseline}`. Secondary metrics and slices are adjusted within their block; "
            f"a slice of fewer than {stats.MIN_SLICE_QUERIES} queries gets no verdict.",
            "",
        ]
        for pair in compare.adopt_grid_verdicts(pairs, grid).values():
            lines += ["```", compare.render_pair(pair, family="configurations"), "```", ""]
    else:
        lines += ["Only one configuration was scored; nothing to compare.", ""]

    lines += ["## Slices", ""]
    slices = compare.query_slices(scored)
    if slices:
        names = list(slices)
        lines += [
            "| configuration | " + " | ".join(f"{n} ({len(slices[n])})" for n in names) + " |",
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
    lines.append("")

    lines += [f"## Worst queries ({primary}, mean over configurations)", ""]
    texts = compare.query_texts(scored)
    relevant = qrels.filter(pl.col("grade") >= int(contract.get("rel_threshold", 1))).group_by("query_id").len()
    relevant = dict(relevant.iter_rows())
    hardest = (
        per_query.group_by("query_id")
        .agg(pl.col(primary).mean().alias("mean"), pl.col(primary).max().alias("best"))
        .sort(["mean", "query_id"])
        .head(worst)
    )
    base_scores = dict(per_query.filter(pl.col("config_id") == baseline).select("query_id", primary).iter_rows())
    lines += ["| query | text | relevant | mean | baseline | best |", "|---|---|---:|---:|---:|---:|"]
    for query_id, mean, best in hardest.iter_rows():
        text = " ".join(str(texts.get(query_id, "")).split())
        text = text if len(text) <= 70 else text[:69] + "…"
        lines.append(
            f"| {query_id} | {text.replace('|', '/')} | {relevant.get(query_id, 0)} | {mean:.4f} | "
            f"{format_cell(base_scores.get(query_id))} | {best:.4f} |"
        )
    lines += ["", "## Evaluation card", "", cards.card_markdown(card), ""]

    lines += ["## Warnings", ""]
    messages = [m for cid in configs for m in warnings.get(cid, [])]
    lines += [f"- {m}" for m in messages] if messages else ["None."]
    if card["code"]["dirty"]:
        lines.append(
            f"- the code or configuration differs from commit {card['code']['commit']} "
            f"({len(card['code']['dirty_paths'])} path(s)); commit before reporting these numbers"
        )
    return "\n".join(lines) + "\n"


def conclusion_markdown(grid: compare.GridReport | None, configs: Mapping[str, Any], primary: str) -> list[str]:
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
    lines.append(f"- To settle it: {compare.settle_sentence(grid, lambda name: f'`{name}`')}.")
    thin = compare.grid_thin_evidence(grid, lambda name: f"`{name}`")
    if thin is not None:
        lines.append(f"- Thin evidence: {thin}.")
    if grid.thresholds is not None:
        lines.append(f"- Winner by relevance threshold: {compare.threshold_sentence(grid.thresholds)}.")
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
