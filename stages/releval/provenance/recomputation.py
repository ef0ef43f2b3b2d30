"""A number scored again: the scoring inputs (data/work's queries and qrels, or the same rebuilt from
the committed sources by this checkout's code), where each configuration's run is read from (its
folder, or the committed archive) and the recomputation itself (:func:`recompute`), as
stages/score.py scores (:mod:`releval.measurement.scoring`)."""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from releval import config, io, paths
from releval.errors import InputError
from releval.inputs.corpus import read_corpus, read_queries
from releval.inputs.schemas import load_queries
from releval.judging.active import judgments_outputs
from releval.measurement import evidence, holdout, scoring
from releval.progress import progress
from releval.provenance import archive, revisions
from releval.provenance.lineage import JUDGMENTS_META, QRELS_FILE, QUERIES_FILE, _entry_hash, reports_files
from releval.provenance.links import NOT_HERE, Link, _common, _frame_difference, _json_difference, other_code
from releval.retrieval import runs


@dataclass(frozen=True)
class ScoringInputs:
    """What a recomputation scores against: the query table and the qrels, and how they were had."""

    queries: pl.DataFrame
    qrels: pl.DataFrame
    links: list[Link]  # for rebuilt inputs: each file's md5 against dvc.lock
    rebuilt: bool = False
    files: dict[str, Path] = field(default_factory=dict)  # data/work path -> the file read (rebuilt: a temporary one)
    spans: pl.DataFrame | None = None  # the evidence spans of the judgments (data/work/evidence.parquet), when any


def _read_spans(path: Path | None) -> pl.DataFrame | None:
    return pl.read_parquet(path) if path is not None and path.is_file() else None


def scoring_inputs(root: str | Path) -> ScoringInputs:
    """data/work's queries and qrels, or, when they are not here (a clone without the DVC cache),
    the same files rebuilt from what git holds (:func:`rebuild_inputs`)."""
    root = Path(root)
    if (root / QUERIES_FILE).exists() and (root / QRELS_FILE).exists():
        files = {path: root / path for path, _ in REBUILT}
        return ScoringInputs(
            pl.read_parquet(files[QUERIES_FILE]),
            pl.read_parquet(files[QRELS_FILE]),
            [],
            files=files,
            spans=_read_spans(files[paths.EVIDENCE]),
        )
    return rebuild_inputs(root)


# The scoring inputs, each with the stage that writes it (a clone without the DVC cache lacks them all).
REBUILT = (
    (paths.DOCS, "ingest"),
    (QUERIES_FILE, "queries"),
    (QRELS_FILE, "judgments"),
    (JUDGMENTS_META, "judgments"),
    (paths.EVIDENCE, "judgments"),
)


def rebuild_inputs(root: str | Path, folder: str | Path | None = None) -> ScoringInputs:
    """The queries and qrels the pipeline scored against, rebuilt from the corpus, query and
    judgment files the repository holds by *this checkout's* code (:func:`rebuilt_tables`: what
    the ingest, queries and judgments stages do; cheap, no model runs), written to ``folder`` (a
    temporary one when None). Nothing of the audited tree is imported or run. Each rebuilt
    file's md5 is compared with the one dvc.lock records: equal proves the committed sources are
    the ones scored (other code or another polars version may write other bytes: a note; the
    recomputed numbers remain the check)."""
    root = Path(root)
    if folder is None:
        with tempfile.TemporaryDirectory(prefix="releval-audit-") as tmp:
            return rebuild_inputs(root, tmp)
    files = write_rebuilt(root, Path(folder))
    recorded = _recorded_hashes(root)
    links = [_rebuilt_link(path, stage, files[path], recorded.get(path)) for path, stage in REBUILT]
    return ScoringInputs(
        pl.read_parquet(files[QUERIES_FILE]),
        pl.read_parquet(files[QRELS_FILE]),
        links,
        True,
        files=files,
        spans=_read_spans(files.get(paths.EVIDENCE)),
    )


def rebuilt_tables(root: str | Path) -> dict[str, Any]:
    """docs.parquet, queries.parquet, qrels.parquet and judgments.json (by their data/work paths)
    as stages/ingest.py, queries.py and judgments.py make them from params.yaml's dataset and
    judgments, computed here, in this process, with the releval code doing the audit: the
    audited repository's own code (its stage scripts, its copy of the package) is never
    imported or run. Paths in params.yaml are relative to ``root``."""
    root = Path(root)
    params_file = root / paths.PARAMS
    if not params_file.exists():
        raise InputError("missing; the inputs cannot be rebuilt without it", file=paths.PARAMS)
    params = config.load_params(params_file)
    dataset, judgments = config.section(params, "dataset"), config.section(params, "judgments")
    subset = dataset.get("subset") or {}

    def here(path: Any) -> Path:
        return Path(str(path)) if Path(str(path)).is_absolute() else root / str(path)

    docs = read_corpus(here(dataset["corpus"]["path"]), dataset["corpus"]["format"])
    if subset.get("docs") is not None:
        docs = docs.head(int(subset["docs"]))
    if docs.height == 0:
        raise InputError("the corpus is empty", file=str(dataset["corpus"]["path"]))
    spec = dataset["queries"]
    queries = (
        load_queries(here(spec["path"]))
        if spec["format"] == "releval"
        else read_queries(here(spec["path"]), spec["format"])
    )
    if subset.get("queries") is not None:
        queries = queries.head(int(subset["queries"]))
    if queries.height == 0:
        raise InputError("the query set is empty", file=str(spec["path"]))
    out = judgments_outputs(
        {**judgments, "path": str(here(judgments["path"]))},
        subset,
        docs.select("doc_id", "text"),
        queries,
        split="dev",
        rel_threshold=int(config.section(params, "metric.rel_threshold")),
        queries_source=QUERIES_FILE,
    )
    meta = {**out.meta, "source": judgments["path"]}  # as the stage records it: the path params.yaml names
    return {
        paths.DOCS: docs,
        QUERIES_FILE: queries,
        QRELS_FILE: out.qrels,
        JUDGMENTS_META: meta,
        paths.EVIDENCE: out.spans,
    }


def write_rebuilt(root: Path, folder: Path) -> dict[str, Path]:
    """:func:`rebuilt_tables` written to ``folder`` as the stages write them; data/work path -> file.
    An InputError names what could not be rebuilt."""
    try:
        tables = rebuilt_tables(root)
    except InputError as exc:
        raise InputError(
            f"not here, and rebuilding the inputs from the committed sources failed: {exc}", file=QRELS_FILE
        ) from None
    files = {}
    for path, table in tables.items():
        files[path] = folder / Path(path).name
        if isinstance(table, pl.DataFrame):
            io.write_parquet(files[path], table)
        else:
            io.write_json(files[path], table)
    return files


def _recorded_hashes(root: Path) -> dict[str, str | None]:
    try:
        lock = revisions.read_lock_stages(root)
    except InputError:
        return {}
    return {o["path"]: _entry_hash(o) for stage in lock.values() for o in stage.get("outs") or []}


def _rebuilt_link(path: str, stage: str, file: Path, recorded: str | None) -> Link:
    actual = hashlib.md5(file.read_bytes()).hexdigest()
    what = f"not here; rebuilt from the committed sources by this checkout's code (what stages/{stage}.py does)"
    if recorded == actual:
        return Link("inputs", path, "ok", f"{what}: md5 {actual} as dvc.lock records")
    return Link(
        "inputs",
        path,
        "note",
        f"{what}: md5 {actual}, dvc.lock records {recorded} (other bytes for the same table, e.g. from "
        "another polars version, differ too; the recomputed numbers are the check)",
    )


def run_source(root: Path, config_id: str, entry: Mapping[str, Any], store: archive.Archive) -> tuple[str, Any]:
    """Where a configuration's run is read from: ``("run", folder)`` when its run.parquet is on
    disk, else ``("archive", index entry)`` when the committed archive holds its (run_sha256,
    config_id); an InputError naming what is missing otherwise."""
    run_dir = entry.get("run_dir")
    if run_dir and (root / run_dir / "run.parquet").exists():
        return "run", root / run_dir
    found = store.entry(entry["run_sha256"], config_id) if entry.get("run_sha256") else None
    if found is None:
        raise InputError(
            f"missing, and the committed archive ({paths.ARCHIVE}) has no entry of this run "
            f"(sha256 {str(entry.get('run_sha256'))[:12]}, {config_id}): was it archived before committing?",
            file=f"{run_dir}/run.parquet",
        )
    return "archive", found


def recompute(
    root: str | Path,
    contract: Mapping[str, Any],
    run_entries: Mapping[str, Mapping[str, Any]],
    metrics: Sequence[str] | None = None,
    *,
    inputs: ScoringInputs | None = None,
    desc: str | None = None,
) -> dict[str, dict[str, Any]]:
    """Score each configuration's run again: config_id -> ``{"mean", "slices", "source"}``, or
    ``{"error"}`` when its run cannot be had.

    ``run_entries``: lineage.json's entries (``run_dir``, ``run_sha256``). A run is read from its
    folder when on disk, else its document-level form from the committed archive (equal numbers:
    :mod:`releval.provenance.archive`); queries and qrels as :func:`scoring_inputs` finds them.
    With ``desc``, the configurations' progress (:mod:`releval.progress`).
    """
    root = Path(root)
    if contract.get("collapse", "first") != "first":
        raise InputError(
            f"unknown collapse rule {contract.get('collapse')!r}; score.py collapses 'first'",
            file=reports_files(root)[0],
            field="contract.collapse",
        )
    inputs = inputs or scoring_inputs(root)
    scored = scoring.scored_queries(holdout.scored_queries(inputs.queries, contract, source=QUERIES_FILE), inputs.qrels)
    wanted = list(metrics or contract.get("metrics") or [])
    passage_level = [m for m in wanted if m.startswith(evidence.METRIC_PREFIX)]
    wanted = [m for m in wanted if m not in passage_level]
    passages = scoring.evidence_inputs(contract, inputs.spans, root / paths.CHUNKS) if passage_level else None
    engine = scoring.contract_from_record(contract)
    store = archive.Archive(root / paths.ARCHIVE)
    out: dict[str, dict[str, Any]] = {}
    for config_id, entry in progress(run_entries.items(), desc, len(run_entries), "configurations"):
        try:
            kind, where = run_source(root, config_id, entry, store)
            if kind == "run":
                chunk_run, meta = runs.read_run(where)
                doc_run = scoring.document_run(chunk_run, scored.ids)
                source = f"{entry['run_dir']}/run.parquet"
            else:
                doc_run = holdout.restrict(store.read_documents(where["docs_sha256"]), scored.ids)
                source = f"the committed archive ({paths.ARCHIVE}/{archive.DOCS_DIR}/{where['docs_sha256'][:12]}…)"
            mean: dict[str, Any] = {}
            if passage_level and kind != "run":
                raise InputError(
                    f"passage-level figures need the chunk-level run ({entry.get('run_dir')}/run.parquet), "
                    f"which is {NOT_HERE}; the committed archive keeps document-level runs"
                )
            if passage_level:
                mean = _passage_means(chunk_run, meta, scored, passages, engine)
        except InputError as exc:
            out[config_id] = {"error": str(exc)}
            continue
        slices: dict[str, Any] = {}
        if wanted:
            evaluation = scoring.score(doc_run, scored, wanted, engine)
            mean, slices = {**dict(evaluation.mean), **mean}, evaluation.slices
        qrels = "qrels rebuilt from the committed judgments" if inputs.rebuilt else QRELS_FILE
        spans = f" and {paths.EVIDENCE}" if passage_level else ""
        out[config_id] = {"mean": mean, "slices": slices, "source": f"{source} and {qrels}{spans}"}
    return out


def _passage_means(
    chunk_run: pl.DataFrame,
    meta: Mapping[str, Any],
    scored: scoring.ScoredQueries,
    passages: scoring.EvidenceInputs | None,
    engine: Any,
) -> dict[str, Any]:
    """A chunk run's passage-level means, recomputed under the contract's evidence terms."""
    if passages is None:
        raise InputError(f"no evidence spans here ({paths.EVIDENCE}) or no evidence terms in the contract")
    _, figures = scoring.score_evidence(chunk_run, meta, scored, passages, engine)
    if "mean" not in figures:
        raise InputError(f"no passage-level figures for this run: {figures.get('not_computed')}")
    return dict(figures["mean"])


@dataclass
class Rescored:
    """One configuration scored again, as the score stage scores it."""

    config_id: str
    run_dir: str | None
    source: str  # where the run was read
    full: bool  # every retrieved document was read (condensed-list values are exact)
    evaluation: Any  # releval.measurement.metrics.Evaluation
    per_query: pl.DataFrame  # per_query.parquet's rows of it (config_id included)
    doc_run: pl.DataFrame
    meta: dict[str, Any] | None  # its run.json (the run folder's or the archive's copy)
    run_sha256: str | None  # of the run read (the archive entry's when read from there)
    result: dict[str, Any]  # mean, condensed, counts, ops, slices, warnings, evidence: what score.py records


def audited_inputs(root: Path, tmp: Path, lock: Mapping[str, Any]) -> tuple[ScoringInputs, list[Link]]:
    """The scoring inputs and their links: data/work's files checked against what this
    checkout's code makes of the committed sources, or, when they are not here, those rebuilt."""
    if not ((root / QUERIES_FILE).exists() and (root / QRELS_FILE).exists()):
        inputs = rebuild_inputs(root, tmp)
        return inputs, list(inputs.links)
    inputs = scoring_inputs(root)
    if not (root / paths.PARAMS).exists():
        return inputs, [Link("inputs", paths.WORK, "note", "no params.yaml: not checked against the sources it names")]
    try:
        rebuilt = rebuilt_tables(root)
    except InputError as exc:
        return inputs, [
            Link("inputs", paths.WORK, "missing", f"the inputs cannot be rebuilt from the committed sources: {exc}")
        ]
    links = []
    for path, stage in REBUILT:
        mine = rebuilt[path]
        if not (root / path).exists():  # not here: dvc.lock's check names it
            continue
        other = other_code(lock, stage)
        if isinstance(mine, pl.DataFrame):
            recorded = pl.read_parquet(root / path)
            if other:  # a column one version of the code writes only is no difference
                shared = [c for c in mine.columns if c in recorded.columns]
                recorded, mine = recorded.select(shared), mine.select(shared)
            same = recorded.equals(mine)
            where = "" if same else _frame_difference(recorded, mine, ["query_id", "doc_id"])
        else:
            recorded = json.loads((root / path).read_text(encoding="utf-8"))
            if other:
                recorded, mine = _common(recorded, mine)
            same = recorded == mine
            where = "" if same else _json_difference(recorded, mine)
        if same:
            continue
        links.append(
            Link(
                "inputs",
                path,
                "mismatch",
                f"not what this checkout's code makes of the committed sources (what stages/{stage}.py does): {where}"
                + (f" (stage {stage} ran other code: {', '.join(other[:3])})" if other else ""),
            )
        )
    if not links:
        links.append(
            Link(
                "inputs",
                f"{paths.WORK} inputs",
                "ok",
                "documents, queries, qrels and judgments.json equal what this checkout's code makes of the "
                "committed corpus, queries and judgments",
            )
        )
    return inputs, links
