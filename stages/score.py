"""DVC stage `score`: every run → document level → metrics under one declared contract.

Writes reports/metrics.json (a DVC metrics file: per configuration, quality and operational
figures, with the contract beside them), reports/per_query.parquet, reports/grid.md, and a TREC
run file per configuration under data/work/trec/.

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

from releval import io
from releval.measurement import holdout
from releval.retrieval import runs
from releval.measurement import scoring
from releval.config import load_params, section
from releval.measurement.metrics import contract_from_params
from releval.reporting.markdown import grid_markdown
from releval.stage import entry, warn
from releval.inputs.trec import write_trec_run

JUDGED_WARNING = 0.5  # judged@k below this: the number leans on unjudged documents counted as 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs-root", default="data/work/runs")
    parser.add_argument("--qrels", default="data/work/qrels.parquet")
    parser.add_argument("--judgments-meta", default="data/work/judgments.json")
    parser.add_argument("--queries", default="data/work/queries.parquet")
    parser.add_argument("--reports", default="reports")
    parser.add_argument("--trec-dir", default="data/work/trec")
    parser.add_argument(
        "--split",
        choices=holdout.SCORE_SPLITS,
        default="dev",
        help="dev (default); holdout or all open the sealed holdout and are logged",
    )
    parser.add_argument("--holdout-log", default=str(holdout.DEFAULT_LOG))
    args = parser.parse_args()
    params = load_params()
    metric_cfg = section(params, "metric")
    contract = contract_from_params(metric_cfg)
    metrics = list(metric_cfg["metrics"])
    qrels = pl.read_parquet(args.qrels)
    judgments = json.loads(Path(args.judgments_meta).read_text())
    queries = pl.read_parquet(args.queries)
    run_dirs = runs.find_runs(args.runs_root)
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
        chunk_run, meta = runs.read_run(run_dir)
        scored_run = scoring.document_run(chunk_run, scored_set.ids)
        evaluation = scoring.score(scored_run, scored_set, metrics, contract)
        cid = meta["config_id"]
        results[cid] = {
            "mean": evaluation.mean,
            "counts": evaluation.counts,
            "ops": meta["ops"],
            "slices": evaluation.slices or {},
            "models": meta["models"],
            "inputs": meta["inputs"],
            "run_dir": str(run_dir),
            "run_sha256": io.sha256_file(run_dir / "run.parquet"),
            "warnings": _warnings(cid, evaluation, metrics, meta),
        }
        per_query.append(evaluation.per_query.with_columns(pl.lit(cid).alias("config_id")))
        write_trec_run(
            Path(args.trec_dir) / (run_dir.relative_to(args.runs_root).as_posix().replace("/", "__") + ".trec"),
            scored_run,
            tag=cid,
        )
    for cid in results:
        for message in results[cid]["warnings"]:
            warn(message)

    full_contract = {
        **contract.to_dict(),
        "metrics": metrics,
        "primary": metric_cfg["primary"],
        "collapse": metric_cfg["collapse"],
        "dataset": section(params, "dataset.name"),
        "judgments_version": judgments["version"],
        "judgments_sha256": judgments["source_sha256"],
        "pooling": judgments.get("description") or "not recorded",
        **split_terms,
    }
    document = {
        "contract": full_contract,
        "configs": {
            cid: {**r["mean"], "ops": r["ops"], "counts": r["counts"], "slices": r["slices"]}
            for cid, r in results.items()
        },
    }
    reports = Path(args.reports)
    io.write_json(reports / "metrics.json", document)
    io.write_json(
        reports / "lineage.json",
        {cid: {k: r[k] for k in ("models", "inputs", "run_dir", "run_sha256")} for cid, r in results.items()},
    )
    table = (
        pl.concat(per_query, how="diagonal").select("config_id", pl.exclude("config_id"))
        if per_query
        else pl.DataFrame()
    )
    io.write_parquet(reports / "per_query.parquet", table.sort(["config_id", "query_id"]) if per_query else table)
    quality = [m for m in metrics if not m.startswith(("judged@", "ceiling@"))][:4]
    io.write_text(reports / "grid.md", grid_markdown(results, full_contract, quality, metric_cfg["primary"]))
    print(f"score: {len(results)} configurations under judgments {judgments['version']}")


def _warnings(cid: str, evaluation, metrics: list[str], meta: dict) -> list[str]:
    found = []
    for metric in metrics:
        if metric.startswith("judged@") and evaluation.mean.get(metric, 1.0) < JUDGED_WARNING:
            found.append(
                f"{cid}: {metric} = {evaluation.mean[metric]:.2f}; most top documents are unjudged "
                "and count as non-relevant"
            )
    rate = meta["ops"].get("truncation_rate")
    if rate and meta["kind"] == "dense":  # fused and reranked runs inherit it; say it once
        found.append(
            f"{cid}: {rate:.1%} of chunks were truncated at the model's max_seq_length, "
            f"{meta['ops'].get('truncated_token_share', 0.0):.1%} of their tokens never encoded"
        )
    return found


if __name__ == "__main__":
    entry(main)
