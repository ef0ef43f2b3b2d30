"""DVC stage `score`: every run → document level → metrics under one declared contract.

Writes reports/metrics.json (per configuration, quality and cost figures, with the contract
beside them), reports/quality.json (the DVC metrics file: the primary metric and its coverage
per configuration), reports/ops.json and ops.md (machine figures: throughput, latency, memory,
with the machine they were measured on; a DVC metrics file of their own),
reports/per_query.parquet, reports/grid.md, and a TREC run file per configuration under
data/work/trec/.

Holdout queries are sealed: the runs and judgments DVC makes hold dev queries only, and the
TREC files and per-query table hold only what was scored. `releval holdout` opens the holdout
(never a DVC stage, whose run cache could replay an opening without logging it); every opening
is appended to reports/holdout_access.jsonl first.
"""

import argparse
import json
import sys
from pathlib import Path

import polars as pl

from releval import io, paths
from releval.config import load_params, section
from releval.inputs.trec import write_trec_run
from releval.judging.completeness import POSITIVES_ONLY_CAVEAT, metrics_for
from releval.measurement import holdout, operations, scoring
from releval.measurement.operations import describe_machine
from releval.measurement.metrics import contract_from_params
from releval.reporting.markdown import grid_markdown, table_quality_metrics
from releval.retrieval import runs
from releval.retrieval.chunking import titles_term
from releval.stage import entry, warn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs-root", default=paths.RUNS)
    parser.add_argument("--qrels", default=paths.QRELS)
    parser.add_argument("--judgments-meta", default=paths.JUDGMENTS_META)
    parser.add_argument("--queries", default=paths.QUERIES)
    parser.add_argument("--docs", default=paths.DOCS, help="the corpus table: its size decides saturated cutoffs")
    parser.add_argument("--reports", default=paths.REPORTS)
    parser.add_argument("--trec-dir", default=paths.TREC)
    parser.add_argument(
        "--split",
        choices=holdout.SCORE_SPLITS,
        default="dev",
        help="dev (default); holdout or all open the sealed holdout and are logged",
    )
    parser.add_argument("--holdout-log", default=paths.HOLDOUT_LOG)
    args = parser.parse_args()
    params = load_params()
    metric_cfg = section(params, "metric")
    contract = contract_from_params(metric_cfg)
    qrels = pl.read_parquet(args.qrels)
    judgments = json.loads(Path(args.judgments_meta).read_text())
    completeness = scoring.judged_completeness(judgments)
    metrics, left_out = metrics_for(list(metric_cfg["metrics"]), completeness)
    if left_out:
        print(f"score: {', '.join(left_out)} not computed: {POSITIVES_ONLY_CAVEAT}")
    queries = pl.read_parquet(args.queries)
    run_dirs, stale = runs.grid_runs(section(params, "grid"), args.runs_root)
    if stale:
        names = ", ".join(f.as_posix() for f in stale)
        warn(f"score: ignored {len(stale)} run folder(s) of configurations no longer in the grid: {names}")
    # Opening the holdout is logged before anything is scored (an interrupted run stays on record).
    scored, split_terms = holdout.scoring_selection(
        queries,
        args.split,
        configs=[runs.read_meta(d)["config_id"] for d in run_dirs],
        command=["python", *sys.argv],
        log_path=args.holdout_log,
        source=args.queries,
    )
    scored_set = scoring.scored_queries(scored, qrels)

    results, per_query = {}, []
    for run_dir in run_dirs:
        scored_run = scoring.score_run(
            run_dir, scored_set, metrics, contract, condensed=not completeness.positives_only
        )
        results[scored_run.config_id] = scored_run.result
        per_query.append(scored_run.per_query)
        trec_path = Path(args.trec_dir) / scoring.trec_file_name(run_dir, args.runs_root)
        write_trec_run(trec_path, scored_run.document_run, tag=scored_run.config_id)
    for result in results.values():
        for message in result["warnings"]:
            warn(message)

    dataset = section(params, "dataset.name")
    documents = pl.scan_parquet(args.docs).select(pl.len()).collect().item()
    document = scoring.metrics_document(
        results,
        contract,
        {**metric_cfg, "metrics": metrics},
        dataset,
        judgments,
        split_terms,
        titles=titles_term(params),
        documents=documents,
    )
    reports = Path(args.reports)
    io.write_json(paths.rebase(paths.METRICS, paths.REPORTS, reports), document)
    io.write_json(paths.rebase(paths.QUALITY, paths.REPORTS, reports), scoring.headline_document(document))
    machine = operations.ops_document({cid: r["machine_ops"] for cid, r in results.items()}, describe_machine())
    io.write_json(paths.rebase(paths.OPS, paths.REPORTS, reports), machine)
    io.write_text(paths.rebase(paths.OPS_MD, paths.REPORTS, reports), operations.ops_markdown(machine))
    io.write_json(paths.rebase(paths.LINEAGE, paths.REPORTS, reports), scoring.lineage_document(results))
    io.write_parquet(paths.rebase(paths.PER_QUERY, paths.REPORTS, reports), scoring.per_query_table(per_query))
    grid = grid_markdown(
        results,
        document["contract"],
        table_quality_metrics(metrics),
        metric_cfg["primary"],
        saturation=document.get("saturation"),
    )
    io.write_text(paths.rebase(paths.GRID, paths.REPORTS, reports), grid)
    print(f"score: {len(results)} configurations under judgments {judgments['version']}")


if __name__ == "__main__":
    entry(main)
