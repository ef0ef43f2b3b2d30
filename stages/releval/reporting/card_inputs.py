"""What the evaluation card records about its inputs: corpus, queries, rubric, models, code, runs.

The report stage gathers these and :func:`releval.provenance.card.build_card` assembles them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from releval import io, paths
from releval.measurement import holdout
from releval.provenance import card as cards
from releval.provenance import revisions


def sha256_if_file(path: Any) -> str | None:
    """The sha256 of ``path`` when it names a file, else None."""
    path = Path(str(path)) if path else None
    return io.sha256_file(path) if path is not None and path.is_file() else None


def corpus_info(dataset: Mapping[str, Any], docs: pl.DataFrame, docs_path: Path) -> dict[str, Any]:
    """The card's `corpus`: its source, content and file digests, size and subset."""
    corpus = dataset.get("corpus") or {}
    return {
        "id": dataset.get("name"),
        "source": corpus.get("path"),
        "format": corpus.get("format"),
        "content_sha256": cards.corpus_content_sha256(docs),
        "file_sha256": io.sha256_file(docs_path),
        "source_sha256": sha256_if_file(corpus.get("path")),
        "documents": docs.height,
        "subset": (dataset.get("subset") or {}).get("docs"),
    }


def queries_info(
    dataset: Mapping[str, Any], queries: pl.DataFrame, split_counts: Mapping[str, int], queries_path: Path
) -> dict[str, Any]:
    """The card's `queries`: their source, version, digests and per-split counts."""
    spec = dataset.get("queries") or {}
    return {
        "id": dataset.get("name"),
        "version": spec.get("version"),
        "source": spec.get("path"),
        "format": spec.get("format"),
        "content_sha256": cards.queries_content_sha256(queries),
        "file_sha256": io.sha256_file(queries_path),
        "source_sha256": sha256_if_file(spec.get("path")),
        "total": queries.height,
        "splits": split_counts,
    }


def rubric_info(judgments_meta: Mapping[str, Any]) -> dict[str, Any] | None:
    """The judging rubric named by the judgment set: path, digest and its first paragraph of prose."""
    name = judgments_meta.get("rubric")
    if not name:
        return None
    source = Path(str(judgments_meta.get("source") or "."))
    path = Path(os.path.normpath((source if source.is_dir() else source.parent) / name))
    summary = None
    if path.is_file():
        paragraphs = [p.strip() for p in path.read_text(encoding="utf-8").split("\n\n") if p.strip()]
        prose = [p for p in paragraphs if not p.startswith(("#", "|", "-", "*"))]
        summary = " ".join(" ".join(prose[0].split()).split(" ")[:120]) if prose else None
    return {
        "path": str(path),
        "sha256": judgments_meta.get("rubric_sha256") or sha256_if_file(path),
        "summary": summary,
    }


def models_used(params: Mapping[str, Any], lineage: Mapping[str, Any]) -> dict[str, Any]:
    """The declared settings of every model some scored run used."""
    declared = params.get("models") or {}
    used = sorted({name for entry in lineage.values() for name in (entry.get("models") or {})})
    return {name: declared.get(name, {}) for name in used}


def holdout_record(
    log_entries: Sequence[Mapping[str, Any]], split_counts: Mapping[str, int], contract: Mapping[str, Any], log: str
) -> dict[str, Any]:
    """The card's `holdout`: the openings the log records, the holdout's size and how many stayed sealed."""
    return {
        **holdout.summary(log_entries),
        "holdout_queries": split_counts["holdout"],
        "sealed_queries": int(contract.get("holdout_queries_sealed", 0)),
        "log": log,
    }


def code_state(root: str | os.PathLike = ".") -> dict[str, Any]:
    """The card's `code`: the commit whose inputs (code, params, data, judgments) made the results,
    and the inputs that differ from HEAD -- never the outputs being written (reports/, DVC outputs,
    dvc.lock); see :func:`releval.provenance.revisions.input_state`. None outside a repository."""
    lock_file = Path(root) / paths.DVC_LOCK
    lock = revisions.parse_lock(lock_file.read_text(encoding="utf-8")) if lock_file.exists() else {}
    return revisions.input_state(root, lock)


def run_meta(lineage_entry: Mapping[str, Any]) -> dict[str, Any]:
    """The run.json of a scored configuration's run (lineage.json's ``run_dir``), or {} when it is gone."""
    run_dir = lineage_entry.get("run_dir")
    if run_dir and (Path(run_dir) / "run.json").exists():
        return json.loads((Path(run_dir) / "run.json").read_text(encoding="utf-8"))
    return {}
