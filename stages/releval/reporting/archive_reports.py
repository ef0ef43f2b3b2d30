"""The rescore stage's reports: every archived run under the active judgments, and what moved since
the parent judgment version (IDCG per query, each configuration's scores under both versions).

Only the archived document-level runs are read; scoring goes through releval.provenance.archive,
which scores as the score stage does, holdout queries left out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from releval.errors import InputError
from releval.judging.judgments import CHANGE_REPORT_SCHEMA, idcg_change_report, load_version
from releval.measurement import holdout
from releval.measurement.metrics import Contract
from releval.provenance import archive


@dataclass(frozen=True)
class ArchiveReports:
    """history.parquet/.md, idcg_changes.parquet/.md and score_changes.parquet, built, not yet written."""

    history: pl.DataFrame
    history_markdown: str
    idcg_changes: pl.DataFrame
    idcg_changes_markdown: str
    score_changes: pl.DataFrame
    version: str  # the active judgment version
    parent: str | None  # its parent version, when it has one
    distinct_runs: int

    def summary(self) -> str:
        """One line: how many (run, configuration) pairs were scored, and what moved."""
        moved = (
            f"; {self.idcg_changes['query_id'].n_unique()} queries' IDCG moved since {self.parent}"
            if self.parent
            else ""
        )
        return (
            f"{self.history.height} archived (run, configuration) pairs, "
            f"{self.distinct_runs} distinct runs, under judgments {self.version}{moved}"
        )


def build_archive_reports(
    store: archive.Archive,
    *,
    dataset: str,
    contract: Contract,
    metrics: Sequence[str],
    primary: str,
    judgments: Mapping[str, Any],
    judgments_meta_path: str,
    queries: pl.DataFrame,
    qrels_path: str,
    docs_path: str,
) -> ArchiveReports:
    """Score every archived run of ``dataset`` under the active judgments (and the parent version's)."""
    version = str(judgments["version"])
    scored = holdout.select_queries(queries, "dev")
    query_ids = scored["query_id"]
    active_qrels = pl.read_parquet(qrels_path).filter(pl.col("query_id").is_in(query_ids.implode()))

    index = store.index()
    other = index.filter(pl.col("dataset").is_null() | (pl.col("dataset") != dataset))
    skipped = {str(name): n for name, n in other.group_by("dataset").len().iter_rows()}
    index = index.filter(pl.col("dataset") == dataset)

    judged = [archive.Judged(version, active_qrels)]
    parent = judgments.get("parent")
    if parent:
        qrels = parent_qrels(judgments, str(parent), query_ids, judgments_meta_path, docs_path)
        judged.append(archive.Judged(str(parent), qrels))
    scores = archive.score_archive(store, index, judged, query_ids, metrics, contract)

    history = archive.history_table(index, scores, version, metrics, primary)
    history_markdown = archive.history_markdown(
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
    changes_markdown = archive.idcg_changes_markdown(
        active=version,
        parent=str(parent) if parent else None,
        changes=changes,
        score_changes=score_changes,
        primary=primary,
        contract=contract,
    )
    return ArchiveReports(
        history=history,
        history_markdown=history_markdown,
        idcg_changes=changes,
        idcg_changes_markdown=changes_markdown,
        score_changes=score_changes,
        version=version,
        parent=str(parent) if parent else None,
        distinct_runs=index["run_sha256"].n_unique(),
    )


def parent_qrels(
    judgments: Mapping[str, Any], parent: str, query_ids: pl.Series, judgments_meta_path: str, docs_path: str
) -> pl.DataFrame:
    """The parent version's qrels, restricted as the judgments stage restricts the active one."""
    source = judgments.get("source")
    if not source:
        raise InputError("has a parent version but no source path", file=judgments_meta_path, field="source")
    directory = Path(source).parent / parent
    if not directory.is_dir():
        raise InputError(
            f"parent version {parent!r} not found at {directory} (a judgment set's parent lives next to it)",
            file=judgments_meta_path,
            field="parent",
        )
    judgment_set = load_version(directory)
    if judgment_set.version != parent:
        raise InputError(
            f"{directory} holds version {judgment_set.version!r}, not {parent!r}",
            file=judgments_meta_path,
            field="parent",
        )
    doc_ids = pl.read_parquet(docs_path, columns=["doc_id"])["doc_id"]
    return judgment_set.qrels().filter(
        pl.col("doc_id").is_in(doc_ids.implode()) & pl.col("query_id").is_in(query_ids.implode())
    )
