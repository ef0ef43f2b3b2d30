"""DVC stage `rescore`: every archived run, re-scored against the active judgments.

Reads only run tables from data/archive/ (nothing is re-encoded or re-retrieved), collapses
each to documents and scores it as the `score` stage does, holdout queries left out. Writes

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

from releval import io
from releval.provenance import archive
from releval.measurement import holdout
from releval.config import load_params, section
from releval.errors import InputError
from releval.judging.judgments import CHANGE_REPORT_SCHEMA, idcg_change_report, load_version
from releval.measurement.metrics import contract_from_params
from releval.stage import entry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--archive", default="data/archive")
    parser.add_argument("--qrels", default="data/work/qrels.parquet")
    parser.add_argument("--judgments-meta", default="data/work/judgments.json")
    parser.add_argument("--queries", default="data/work/queries.parquet")
    parser.add_argument("--docs", default="data/work/docs.parquet")
    parser.add_argument("--reports", default="reports")
    args = parser.parse_args()
    start = time.perf_counter()
    params = load_params()
    metric_cfg = section(params, "metric")
    dataset = str(section(params, "dataset.name"))
    contract = contract_from_params(metric_cfg)
    metrics, primary = list(metric_cfg["metrics"]), str(metric_cfg["primary"])
    judgments = json.loads(Path(args.judgments_meta).read_text(encoding="utf-8"))
    version = str(judgments["version"])
    queries = pl.read_parquet(args.queries)
    scored = holdout.select_queries(queries, "dev")
    query_ids = scored["query_id"]
    active_qrels = pl.read_parquet(args.qrels).filter(pl.col("query_id").is_in(query_ids.implode()))

    store = archive.Archive(args.archive)
    index = store.index()
    other = index.filter(pl.col("dataset").is_null() | (pl.col("dataset") != dataset))
    skipped = {str(name): n for name, n in other.group_by("dataset").len().iter_rows()}
    index = index.filter(pl.col("dataset") == dataset)

    judged = [archive.Judged(version, active_qrels)]
    parent = judgments.get("parent")
    if parent:
        judged.append(archive.Judged(str(parent), _parent_qrels(judgments, str(parent), query_ids, args)))
    scores = archive.score_archive(store, index, judged, query_ids, metrics, contract)

    reports = Path(args.reports)
    history = archive.history_table(index, scores, version, metrics, primary)
    io.write_parquet(reports / "history.parquet", history)
    io.write_text(
        reports / "history.md",
        archive.history_markdown(
            history,
            version=version,
            judgments=judgments,
            contract=contract,
            metrics=metrics,
            primary=primary,
            dataset=dataset,
            scored=scored.height,
            holdout=queries.height - scored.height,
            skipped=skipped,
        ),
    )

    if parent:
        changes = idcg_change_report(judged[1].qrels, active_qrels, archive.idcg_cutoffs(metrics), contract.gain)
        changes = changes.with_columns(
            pl.lit(str(parent)).alias("parent_version"), pl.lit(version).alias("active_version")
        )
        score_changes = archive.score_changes_table(index, scores, str(parent), version, metrics)
    else:
        changes = pl.DataFrame(schema={**CHANGE_REPORT_SCHEMA, "parent_version": pl.Utf8, "active_version": pl.Utf8})
        score_changes = archive.score_changes_table(index.head(0), scores, "", version, metrics)
    io.write_parquet(reports / "idcg_changes.parquet", changes)
    io.write_parquet(reports / "score_changes.parquet", score_changes)
    io.write_text(
        reports / "idcg_changes.md",
        archive.idcg_changes_markdown(
            active=version,
            parent=str(parent) if parent else None,
            changes=changes,
            score_changes=score_changes,
            primary=primary,
            contract=contract,
        ),
    )
    moved = f"; {changes['query_id'].n_unique()} queries' IDCG moved since {parent}" if parent else ""
    print(
        f"rescore: {history.height} archived (run, configuration) pairs, "
        f"{index['run_sha256'].n_unique()} distinct runs, under judgments {version}{moved} "
        f"in {time.perf_counter() - start:.2f} s"
    )


def _parent_qrels(judgments: dict, parent: str, query_ids: pl.Series, args) -> pl.DataFrame:
    """The parent version's qrels, restricted as the judgments stage restricts the active one."""
    source = judgments.get("source")
    if not source:
        raise InputError("has a parent version but no source path", file=args.judgments_meta, field="source")
    directory = Path(source).parent / parent
    if not directory.is_dir():
        raise InputError(
            f"parent version {parent!r} not found at {directory} (a judgment set's parent lives next to it)",
            file=args.judgments_meta,
            field="parent",
        )
    judgment_set = load_version(directory)
    if judgment_set.version != parent:
        raise InputError(
            f"{directory} holds version {judgment_set.version!r}, not {parent!r}",
            file=args.judgments_meta,
            field="parent",
        )
    doc_ids = pl.read_parquet(args.docs, columns=["doc_id"])["doc_id"]
    return judgment_set.qrels().filter(
        pl.col("doc_id").is_in(doc_ids.implode()) & pl.col("query_id").is_in(query_ids.implode())
    )


if __name__ == "__main__":
    entry(main)
