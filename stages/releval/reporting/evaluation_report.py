"""The report stage's product: the evaluation card, its observations, plot data and report.md/html.

:func:`read_inputs` reads what `score` and the earlier stages wrote; :func:`build_report` computes
every figure first (:func:`releval.measurement.report_figures.report_figures`,
:mod:`releval.measurement.plot_tables`, the per-query contrasts of
:func:`releval.measurement.explain.explain_pairs`), draws the plots
(:func:`releval.reporting.plots.render_png`), then renders one document
(:func:`releval.reporting.report_md.report_document`) as report.md and as report.html
(:mod:`releval.reporting.report_html`), every output in memory (validated), for the stage to write.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from releval import paths
from releval.config import section
from releval.errors import InputError
from releval.measurement import explain, holdout, plot_tables, scoring
from releval.measurement.chunk_budget import chunking_sizes
from releval.measurement.pair import decided_metric, query_slices
from releval.measurement.report_figures import report_figures
from releval.provenance import card as cards
from releval.reporting import card_inputs, plots
from releval.reporting.report_html import render_html
from releval.reporting.report_md import PageViews, report_document, report_markdown
from releval.retrieval.models import FAMILIES
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
    chunks_dir: Path = Path(paths.CHUNKS)  # the chunk files, <chunking>.parquet (the per-query view's passages)


PAGE_QUERIES = 5  # the per-query view: queries per comparison on the page
PAGE_PASSAGE_CHARS = 300  # and each passage cut to about this many characters


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
        chunks_dir=paths.rebase(paths.CHUNKS, paths.WORK, work),
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
    images: dict[str, bytes]  # plot name → its PNG (reports/plots/<name>.png), embedded in report.html
    markdown: str
    page: str  # report.html
    warnings: list[str]
    primary: str  # the metric the report decides on (under a sampled set the inferred form of the contract's)
    baseline: str


HUMAN_ONLY_SLICE = "human-only"


def human_only_slice(judgments_meta: Mapping[str, Any], scored_ids: list[str]) -> dict[str, list[str]]:
    """Where a model judge labelled some queries, the scored queries no model touched: a slice kept
    and reported in every version, so a figure never rests on the model judge alone."""
    model_judged = set(judgments_meta.get("model_judged_queries") or [])
    return {HUMAN_ONLY_SLICE: [q for q in scored_ids if q not in model_judged]} if model_judged else {}


def build_report(
    inputs: ReportInputs,
    params: Mapping[str, Any],
    template: str | Path | None = None,
    resamples: int = 10_000,
    seed: int = 0,
    worst: int = 10,
) -> EvaluationReport:
    """The card and observations, the plots' data and PNGs, report.md and report.html.

    ``template`` is not read: report.html embeds its plots and needs no Vega page (the argument
    stays for callers written when it did)."""
    contract, configs, lineage = inputs.contract, inputs.configs, inputs.lineage
    dataset, judgments_params = section(params, "dataset"), section(params, "judgments")
    scored = holdout.scored_queries(inputs.queries, contract, source=str(inputs.queries_path))
    scored_ids = scored["query_id"].to_list()
    slices = query_slices(scored) | human_only_slice(inputs.judgments_meta, scored_ids)
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
    observations = build_observations(
        card, configs, inputs.per_query, slices, lineage, run_metas, warnings, contract["metrics"]
    )
    observations_doc = {"card_id": card["card_id"], "observations": observations}
    cards.validate_observations(
        observations_doc, card, str(paths.rebase(paths.OBSERVATIONS, paths.REPORTS, inputs.reports))
    )

    primary = contract.get("primary") or contract["metrics"][0]
    decided = decided_metric(contract, primary)  # under a sampled set its inferred form: the plots show that
    order = list(configs)
    baseline = baseline_config(params, order)
    chunk_runs = configuration_runs(lineage, order, inputs.chunks_dir)
    doc_runs = {cid: scoring.document_run(run, scored_ids) for cid, (run, _) in chunk_runs.items()}
    scored_qrels = holdout.restrict(inputs.qrels, scored_ids)
    figures = report_figures(
        inputs.per_query,
        contract,
        order,
        scored,
        doc_runs,
        inputs.qrels,
        scored_qrels,
        baseline,
        primary,
        int(card["corpus"]["documents"]),
        resamples=resamples,
        seed=seed,
        worst=worst,
        chunk_tokens=chunking_sizes(params),
    )
    grid = figures.grid
    differences = plot_tables.difference_interval_table(grid) if grid is not None else []
    by_difference = [row["config_id"] for row in differences]  # the plots and the page list them so
    tables = {
        "difference_ci": differences,
        "recall_curve": plot_tables.recall_curve_table(doc_runs, scored_qrels, scoring.contract_from_record(contract)),
        "quality_cost": plot_tables.quality_cost_table(configs, decided),
        "difference_hist": plot_tables.difference_table(
            inputs.per_query, baseline, decided, [baseline, *by_difference]
        ),
    }
    images = {name: plots.render_png(name, rows, decided, baseline) for name, rows in tables.items()}
    ranked = cards.rank_observations(observations, [card], primary)
    rendering = dict(
        card=card,
        ranked=ranked,
        figures=figures,
        configs=configs,
        contract=contract,
        baseline=baseline,
        primary=primary,
        warnings=warnings,
        resamples=resamples,
        seed=seed,
        reports=inputs.reports,
    )
    markdown = report_markdown(**rendering)
    contrasts = page_contrasts(inputs, chunk_runs, scored, scored_qrels, grid, baseline, decided, by_difference)
    page = render_html(report_document(**rendering, page=PageViews(images, contrasts)))
    return EvaluationReport(
        card=card,
        observations=observations_doc,
        plot_tables=tables,
        images=images,
        markdown=markdown,
        page=page,
        warnings=[message for messages in warnings.values() for message in messages],
        primary=decided,
        baseline=baseline,
    )


def build_observations(
    card: Mapping[str, Any],
    configs: Mapping[str, Any],
    per_query: pl.DataFrame,
    slices: Mapping[str, Sequence[str]],
    lineage: Mapping[str, Any],
    run_metas: Mapping[str, Any],
    warnings: Mapping[str, list[str]],
    metrics: Sequence[str],
) -> list[dict[str, Any]]:
    """One observation per configuration under ``card`` (:func:`releval.provenance.card.build_observation`),
    with its means of ``metrics`` over each slice (slice name -> its scored queries)."""
    observations = []
    for cid in configs:
        rows = per_query.filter(pl.col("config_id") == cid)
        computed = cards.slice_means(rows, slices, metrics) if slices else {}
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
    return observations


def configuration_runs(
    lineage: Mapping[str, Any], configs: list[str], chunks_dir: Path
) -> dict[str, tuple[pl.DataFrame, Path | None]]:
    """Each configuration's chunk-level run (lineage.json's run_dir) and its chunking's chunk file
    (:func:`releval.measurement.explain.run_from_folder`; None where there is none)."""
    found = {}
    for cid in configs:
        run_dir = (lineage.get(cid) or {}).get("run_dir")
        if not run_dir or not (Path(run_dir) / "run.parquet").exists():
            raise InputError(f"no run for {cid}; run `dvc repro`", file=paths.LINEAGE, field=cid)
        found[cid] = explain.run_from_folder(run_dir, chunks_dir)
    return found


def page_contrasts(
    inputs: ReportInputs,
    chunk_runs: Mapping[str, tuple[pl.DataFrame, Path | None]],
    scored: pl.DataFrame,
    scored_qrels: pl.DataFrame,
    grid: Any,
    baseline: str,
    primary: str,
    by_difference: list[str],
) -> list[explain.Explanation]:
    """The page's per-query view: the baseline against each configuration it is compared with, the
    best first, then by difference; :data:`PAGE_QUERIES` queries each (scored queries only)."""
    if grid is None:
        return []
    first = [grid.best.best] if grid.best.best != baseline else []
    order = first + [cid for cid in by_difference if cid not in first]
    scores: dict[str, dict[str, float]] = {}
    for cid, query_id, value in inputs.per_query.select("config_id", "query_id", primary).iter_rows():
        scores.setdefault(cid, {})[query_id] = value

    def side(cid: str) -> explain.Configuration:
        run, chunk_file = chunk_runs[cid]
        return explain.Configuration(cid, scores[cid], run, chunk_file)

    contract = inputs.contract
    return explain.explain_pairs(
        [(side(baseline), side(cid)) for cid in order],
        scored_qrels,
        scored,
        inputs.docs,
        primary,
        n=PAGE_QUERIES,
        ties=contract.get("ties", "docid-asc"),
        rel_threshold=int(contract.get("rel_threshold", 1)),
        passage_chars=PAGE_PASSAGE_CHARS,
    )


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
