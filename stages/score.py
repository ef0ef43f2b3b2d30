"""DVC stage `score`: every run → document level → metrics under one declared contract.

Writes metrics.json (figures per configuration, the contract beside them), quality.json (the DVC
metrics file), ops.json/ops.md (machine figures), per_query.parquet, grid.md, and TREC run files.

Holdout queries are sealed: the runs and judgments DVC makes hold dev queries only. `releval
holdout` opens the holdout (never a DVC stage: its run cache could replay an opening unlogged),
each opening appended to reports/holdout_access.jsonl first.
"""

import argparse
import sys
from pathlib import Path

from releval import io, paths
from releval.config import load_params
from releval.inputs.trec import write_trec_run
from releval.measurement import holdout, operations, scoring
from releval.reporting.markdown import grid_markdown, table_quality_metrics
from releval.retrieval.chunking import titles_term
from releval.stage import entry


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
    parser.add_argument("--evidence", default=paths.EVIDENCE, help="evidence spans (passage-level figures)")
    parser.add_argument("--chunks", default=paths.CHUNKS, help="the chunk tables (token counts)")
    args = parser.parse_args()
    params = load_params()
    grid = scoring.score_grid(
        params,
        runs_root=args.runs_root,
        qrels=args.qrels,
        judgments_meta=args.judgments_meta,
        queries=args.queries,
        docs=args.docs,
        split=args.split,
        holdout_log=args.holdout_log,
        command=["python", *sys.argv],
        titles=titles_term(params),
        evidence_spans=args.evidence,
        chunks_root=args.chunks,
    )
    for run_dir, scored_run in grid.runs:
        trec_path = Path(args.trec_dir) / scoring.trec_file_name(run_dir, args.runs_root)
        write_trec_run(trec_path, scored_run.document_run, tag=scored_run.config_id)
    document, results, contract = grid.document, grid.results, grid.document["contract"]

    def out(path: str) -> Path:
        return paths.rebase(path, paths.REPORTS, Path(args.reports))

    io.write_json(out(paths.METRICS), document)
    io.write_json(out(paths.QUALITY), scoring.headline_document(document))
    io.write_json(out(paths.OPS), grid.machine)
    io.write_text(out(paths.OPS_MD), operations.ops_markdown(grid.machine))
    io.write_json(out(paths.LINEAGE), scoring.lineage_document(results))
    io.write_parquet(out(paths.PER_QUERY), grid.per_query)
    quality = table_quality_metrics(grid.metrics)
    markdown = grid_markdown(results, contract, quality, contract["primary"], saturation=document.get("saturation"))
    io.write_text(out(paths.GRID), markdown)
    print(f"score: {len(results)} configurations under judgments {grid.judgments_version}")


if __name__ == "__main__":
    entry(main)
