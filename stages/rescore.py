"""DVC stage `rescore`: every archived run, re-scored against the active judgments.

Reads only the archived document-level runs in data/archive/ (committed to git: a fresh clone
has them all; nothing is re-encoded or re-retrieved) and scores them as the `score` stage scores
its runs, holdout queries left out; a run gives the numbers its chunk-level table gives. Writes

* reports/history.parquet, reports/history.md: one row per archived (run, configuration) of the
  active dataset, all under the active judgment version (one `judgments_version` value); the
  table is regenerated whole when the judgments change;
* reports/idcg_changes.parquet, reports/idcg_changes.md, reports/score_changes.parquet: when the
  active judgment set has a parent version, each scored query whose IDCG@k moved between the two
  (old, new, why) and each archived configuration's scores under both versions, side by side --
  a change report, not a ranking. Without a parent they say so and the tables are empty.
"""

import argparse
import json
import time
from pathlib import Path

import polars as pl

from releval import io, paths
from releval.config import load_params, section
from releval.measurement.metrics import contract_from_params
from releval.provenance import archive
from releval.reporting.archive_reports import build_archive_reports
from releval.stage import entry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--archive", default=paths.ARCHIVE)
    parser.add_argument("--qrels", default=paths.QRELS)
    parser.add_argument("--judgments-meta", default=paths.JUDGMENTS_META)
    parser.add_argument("--queries", default=paths.QUERIES)
    parser.add_argument("--docs", default=paths.DOCS)
    parser.add_argument("--reports", default=paths.REPORTS)
    args = parser.parse_args()
    start = time.perf_counter()
    params = load_params()
    metric_cfg = section(params, "metric")
    dataset = str(section(params, "dataset.name"))
    contract = contract_from_params(metric_cfg)
    built = build_archive_reports(
        archive.Archive(args.archive),
        dataset=dataset,
        contract=contract,
        metrics=list(metric_cfg["metrics"]),
        primary=str(metric_cfg["primary"]),
        judgments=json.loads(Path(args.judgments_meta).read_text(encoding="utf-8")),
        judgments_meta_path=args.judgments_meta,
        queries=pl.read_parquet(args.queries),
        qrels_path=args.qrels,
        docs_path=args.docs,
    )
    reports = Path(args.reports)
    io.write_parquet(paths.rebase(paths.HISTORY, paths.REPORTS, reports), built.history)
    io.write_text(paths.rebase(paths.HISTORY_MD, paths.REPORTS, reports), built.history_markdown)
    io.write_parquet(paths.rebase(paths.IDCG_CHANGES, paths.REPORTS, reports), built.idcg_changes)
    io.write_parquet(paths.rebase(paths.SCORE_CHANGES, paths.REPORTS, reports), built.score_changes)
    io.write_text(paths.rebase(paths.IDCG_CHANGES_MD, paths.REPORTS, reports), built.idcg_changes_markdown)
    print(f"rescore: {built.summary()} in {time.perf_counter() - start:.2f} s")


if __name__ == "__main__":
    entry(main)
