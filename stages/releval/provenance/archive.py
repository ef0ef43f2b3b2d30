"""The run archive: every run ever produced, kept by content hash, and its re-scoring.

Layout of an archive directory (``data/archive/``, a ``persist: true`` DVC output)::

    index.parquet                 one row per archived (run_sha256, config_id); see INDEX_SCHEMA
    runs/<run_sha256>.parquet     the chunk-level run table, byte for byte as a stage wrote it
    meta/<meta_sha256>.json       its run.json sidecar, byte for byte

Both folders are content-addressed: a file's name is the sha256 of its bytes. Runs and sidecars
are stored separately because one run table can stand for several configurations (the same
model under two names gives byte-identical runs, but two run.json files).

Rules: an entry is keyed by (run_sha256, config_id); adding a key that is already there is a
no-op (the first record wins: its commit, date and parameters are kept); nothing is ever
deleted or rewritten -- the index is only ever replaced, atomically, by itself plus new rows,
under an exclusive lock on the archive directory. Files are written through :mod:`releval.io`.

Provenance of an entry: the git commit it came from (``git rev-parse HEAD`` when archived from
the workspace, with ``dirty`` and the ``dirty_paths`` that differ from that commit -- paths
that are DVC outputs, and ``dvc.lock``, do not count; the revision's own hash when brought back
from a commit or experiment), the DVC stage that wrote it and the digest of that stage's
parameters as dvc.lock records them, the dataset name, and when it was first archived. Git and
dvc.lock are read through :mod:`releval.provenance.revisions`.

Re-scoring (:func:`rescore`) reads only run tables: it collapses each to documents and scores it
exactly as the ``score`` stage does (:mod:`releval.measurement.scoring`,
:func:`releval.measurement.metrics.evaluate`, holdout queries left out).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io as _stdio
import json
import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Iterable, Iterator, Mapping, Sequence

import polars as pl
import yaml

from releval import io
from releval.measurement import holdout
from releval.retrieval import runs
from releval.measurement import scoring
from releval.errors import InputError
from releval.measurement.metrics import Contract, parse_metrics
from releval.provenance import revisions
from releval.provenance.revisions import StageOut
from releval import paths

INDEX_NAME = "index.parquet"
RUNS_DIR = "runs"
META_DIR = "meta"
DEFAULT_RUNS_ROOT = paths.RUNS
WORKSPACE = "workspace"

INDEX_SCHEMA = pl.Schema(
    {
        "run_sha256": pl.Utf8,  # sha256 of run.parquet's bytes (= reports/lineage.json's run_sha256)
        "config_id": pl.Utf8,
        "meta_sha256": pl.Utf8,  # sha256 of run.json's bytes: meta/<meta_sha256>.json
        "kind": pl.Utf8,  # dense | bm25 | fused | reranked
        "chunking": pl.Utf8,
        "models": pl.List(pl.Utf8),  # every model the run used (run.json "models"), sorted
        "dataset": pl.Utf8,  # params dataset.name where the run was made
        "run_path": pl.Utf8,  # where it lived, e.g. data/work/runs/dense/minilm/c256
        "rows": pl.Int64,
        "stage": pl.Utf8,  # the DVC stage that wrote it, e.g. retrieve@minilm-c256
        "params_digest": pl.Utf8,  # sha256 of that stage's params in dvc.lock (canonical JSON)
        "params_json": pl.Utf8,  # those params themselves
        "dvc_out_md5": pl.Utf8,  # the DVC hash of the stage output holding the run
        "commit": pl.Utf8,  # git commit the run came from (null: no commit yet)
        "commit_date": pl.Utf8,  # that commit's committer date (ISO 8601)
        "dirty": pl.Boolean,  # the workspace differed from `commit` when archived
        "dirty_paths": pl.List(pl.Utf8),
        "source": pl.Utf8,  # workspace | rev:<REV> | exp:<NAME>
        "archived_at": pl.Utf8,  # when first archived, ISO 8601 UTC
    }
)

_MAX_DIRTY_PATHS = 50


# --------------------------------------------------------------------------- small helpers


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def params_digest(params: Mapping[str, Any] | None) -> str | None:
    """sha256 of a stage's params (as dvc.lock records them) in canonical JSON; None without any."""
    if not params:
        return None
    return sha256_bytes(_canonical_json(params).encode("utf-8"))


def _canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def empty_index() -> pl.DataFrame:
    return pl.DataFrame(schema=INDEX_SCHEMA)


# --------------------------------------------------------------------------- what is added


@dataclass(frozen=True)
class Provenance:
    """Where a batch of runs came from."""

    commit: str | None
    dirty: bool = False
    dirty_paths: tuple[str, ...] = ()
    source: str = WORKSPACE
    commit_date: str | None = None


@dataclass(frozen=True)
class RunFiles:
    """One run folder's two files, read into memory, and the stage output that holds them."""

    run_path: str
    run_bytes: bytes
    meta_bytes: bytes
    out: StageOut | None = None

    @property
    def run_sha256(self) -> str:
        return sha256_bytes(self.run_bytes)

    @property
    def meta_sha256(self) -> str:
        return sha256_bytes(self.meta_bytes)

    def meta(self) -> dict[str, Any]:
        try:
            meta = json.loads(self.meta_bytes.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InputError(f"not a JSON run sidecar: {exc}", file=f"{self.run_path}/run.json") from None
        if not isinstance(meta, dict) or not isinstance(meta.get("config_id"), str):
            raise InputError(
                "a run sidecar needs a string config_id", file=f"{self.run_path}/run.json", field="config_id"
            )
        return meta


@dataclass
class AddReport:
    added: list[tuple[str, str]] = field(default_factory=list)  # (run_sha256, config_id)
    present: list[tuple[str, str]] = field(default_factory=list)  # already archived: left as they were

    def summary(self) -> str:
        return f"{len(self.added)} added, {len(self.present)} already archived"


# --------------------------------------------------------------------------- the archive


class Archive:
    """A content-addressed run archive directory (see the module docstring)."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)

    @property
    def index_path(self) -> Path:
        return self.root / INDEX_NAME

    def run_file(self, run_sha256: str) -> Path:
        return self.root / RUNS_DIR / f"{run_sha256}.parquet"

    def meta_file(self, meta_sha256: str) -> Path:
        return self.root / META_DIR / f"{meta_sha256}.json"

    def index(self) -> pl.DataFrame:
        if not self.index_path.exists():
            return empty_index()
        frame = pl.read_parquet(self.index_path)
        missing = [name for name in INDEX_SCHEMA if name not in frame.columns]
        if missing:
            raise InputError(f"not a run archive index: missing columns {missing}", file=str(self.index_path))
        return frame.select(list(INDEX_SCHEMA))

    def ensure(self) -> None:
        """Create an empty archive (directory and index) if there is none."""
        with self._locked():
            if not self.index_path.exists():
                io.write_parquet(self.index_path, empty_index())

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock

    def add(
        self, items: Iterable[RunFiles], provenance: Provenance, *, dataset: str | None, archived_at: str | None = None
    ) -> AddReport:
        """Add runs; a (run_sha256, config_id) already archived is left exactly as it was."""
        report = AddReport()
        archived_at = archived_at or holdout.utc_now()
        with self._locked():
            index = self.index()
            known = set(zip(index["run_sha256"].to_list(), index["config_id"].to_list()))
            rows, new_items = [], []
            for item in items:  # every item is checked before anything is written
                meta = item.meta()
                key = (item.run_sha256, meta["config_id"])
                if key in known:
                    report.present.append(key)
                    continue
                rows.append(_index_row(item, meta, _run_rows(item), provenance, dataset, archived_at))
                new_items.append(item)
                known.add(key)
                report.added.append(key)
            for item in new_items:  # files first: an index row never names a file that is not there
                self._store(self.run_file(item.run_sha256), item.run_bytes)
                self._store(self.meta_file(item.meta_sha256), item.meta_bytes)
            if rows:
                new = pl.DataFrame(rows, schema=INDEX_SCHEMA, orient="row")
                io.write_parquet(self.index_path, pl.concat([index, new]))
            elif not self.index_path.exists():
                io.write_parquet(self.index_path, empty_index())
        return report

    @staticmethod
    def _store(target: Path, data: bytes) -> None:
        """Write a content-addressed file once; an existing one must already hold these bytes."""
        if target.exists():
            if target.stat().st_size != len(data):
                raise InputError(
                    f"archived file differs from its hash name ({target.stat().st_size} bytes, "
                    f"expected {len(data)}): the archive was edited",
                    file=str(target),
                )
            return
        io.write_bytes(target, data)

    def read_run(self, run_sha256: str, *, verify: bool = True) -> pl.DataFrame:
        path = self.run_file(run_sha256)
        if not path.exists():
            raise InputError("archived run missing (the index names it)", file=str(path))
        data = path.read_bytes()
        if verify and sha256_bytes(data) != run_sha256:
            raise InputError(
                f"sha256 {sha256_bytes(data)} does not match the file's name: the archive was edited", file=str(path)
            )
        return pl.read_parquet(_stdio.BytesIO(data))

    def read_meta(self, meta_sha256: str) -> dict[str, Any]:
        return json.loads(self.meta_file(meta_sha256).read_text(encoding="utf-8"))


def _run_rows(item: RunFiles) -> int:
    try:
        frame = pl.read_parquet(_stdio.BytesIO(item.run_bytes))
    except Exception as exc:  # polars raises several types for a bad file
        raise InputError(f"not a readable parquet run table: {exc}", file=f"{item.run_path}/run.parquet") from None
    missing = [c for c in runs.RUN_SCHEMA if c not in frame.columns]
    if missing:
        raise InputError(f"not a run table: missing columns {missing}", file=f"{item.run_path}/run.parquet")
    return frame.height


def _index_row(
    item: RunFiles, meta: dict[str, Any], rows: int, provenance: Provenance, dataset: str | None, archived_at: str
) -> dict[str, Any]:
    out = item.out
    params = out.params if out else None
    models = meta.get("models") or {}
    return {
        "run_sha256": item.run_sha256,
        "config_id": meta["config_id"],
        "meta_sha256": item.meta_sha256,
        "kind": meta.get("kind"),
        "chunking": meta.get("chunking"),
        "models": sorted(models) if isinstance(models, dict) else sorted(map(str, models)),
        "dataset": dataset,
        "run_path": item.run_path,
        "rows": rows,
        "stage": out.stage if out else None,
        "params_digest": params_digest(params),
        "params_json": _canonical_json(params) if params else None,
        "dvc_out_md5": out.md5 if out else None,
        "commit": provenance.commit,
        "commit_date": provenance.commit_date,
        "dirty": provenance.dirty,
        "dirty_paths": list(provenance.dirty_paths),
        "source": provenance.source,
        "archived_at": archived_at,
    }


# --------------------------------------------------------------------------- provenance


def producing_out(run_path: str, outs: Sequence[StageOut]) -> StageOut | None:
    """The (deepest) stage output that holds the run folder ``run_path``."""
    path = PurePosixPath(run_path)
    holders = [o for o in outs if PurePosixPath(o.path) == path or PurePosixPath(o.path) in path.parents]
    return max(holders, key=lambda o: len(o.path)) if holders else None


def workspace_provenance(repo: str | os.PathLike, lock: Mapping[str, Any]) -> Provenance:
    """HEAD, and which paths differ from it (DVC outputs, dvc.lock and .gitignore files do not count)."""
    head = revisions.head_commit(repo)
    changed = revisions.changed_paths(repo)
    if changed is None:  # not a git repository
        return Provenance(commit=None, dirty=True, dirty_paths=("<not a git repository>",))
    ignored_outs = [PurePosixPath(p) for p in revisions.output_paths(lock)]
    dirty = [path for path in changed if not _bookkeeping(path, ignored_outs)]
    if head is None:
        dirty = dirty or ["<no commit yet>"]
    return Provenance(
        commit=head,
        dirty=bool(dirty),
        dirty_paths=tuple(sorted(dirty)[:_MAX_DIRTY_PATHS]),
        source=WORKSPACE,
        commit_date=revisions.commit_date(repo, head) if head else None,
    )


def _bookkeeping(path: str, outs: Sequence[PurePosixPath]) -> bool:
    p = PurePosixPath(path.rstrip("/"))
    if p.name in ("dvc.lock", ".gitignore") or (p.parts and p.parts[0] == ".dvc"):
        return True
    return any(p == out or out in p.parents for out in outs)


# --------------------------------------------------------------------------- collecting runs


def workspace_runs(
    repo: str | os.PathLike, runs_root: str = DEFAULT_RUNS_ROOT, lock: Mapping[str, Any] | None = None
) -> tuple[list[RunFiles], list[str]]:
    """The run folders under ``runs_root`` in the workspace, each with the stage output holding it.

    Returns (runs, skipped): a folder that is no stage's output in dvc.lock (a leftover of a
    removed configuration) has no known provenance and is skipped, by path.
    """
    repo = Path(repo)
    outs = revisions.lock_outs(lock or {}, runs_root)
    found, skipped = [], []
    for run_dir in runs.find_runs(repo / runs_root):
        rel = run_dir.relative_to(repo).as_posix()
        out = producing_out(rel, outs)
        if out is None:
            skipped.append(rel)
            continue
        found.append(RunFiles(rel, (run_dir / "run.parquet").read_bytes(), (run_dir / "run.json").read_bytes(), out))
    return found, skipped


def revision_runs(repo: str | os.PathLike, commit: str, runs_root: str = DEFAULT_RUNS_ROOT) -> list[RunFiles]:
    """The runs a commit's dvc.lock records under ``runs_root``, read from DVC's cache."""
    outs = revisions.lock_outs(revisions.lock_at(repo, commit), runs_root)
    if not outs:
        return []
    fs = revisions.dvc_filesystem(repo, commit)
    found = []
    for out in outs:
        try:
            files = fs.find(out.path)
        except Exception as exc:  # DVC raises many types when the cache lacks an object
            raise InputError(
                f"cannot list {out.path} at {commit[:12]} ({type(exc).__name__}: {exc}); is it in the "
                f"DVC cache? try `dvc fetch --rev {commit[:12]}`",
                file=out.path,
            ) from None
        run_dirs = sorted({str(PurePosixPath(f).parent) for f in files if PurePosixPath(f).name == "run.json"})
        for run_dir in run_dirs:
            try:
                run_bytes = fs.read_bytes(f"{run_dir}/run.parquet")
                meta_bytes = fs.read_bytes(f"{run_dir}/run.json")
            except FileNotFoundError:
                continue
            except Exception as exc:
                raise InputError(
                    f"cannot read {run_dir} at {commit[:12]} from the DVC cache "
                    f"({type(exc).__name__}: {exc}); try `dvc fetch --rev {commit[:12]}`",
                    file=run_dir,
                ) from None
            found.append(RunFiles(run_dir.lstrip("/"), run_bytes, meta_bytes, out))
    return found


def dataset_at(repo: str | os.PathLike, commit: str | None, params_file: str = "params.yaml") -> str | None:
    """params ``dataset.name`` at a commit (None when unknown)."""
    data = revisions.show_file(commit, params_file, repo) if commit else None
    if data is None:
        return None
    try:
        params = yaml.safe_load(data.decode("utf-8")) or {}
    except yaml.YAMLError:
        return None
    name = (params.get("dataset") or {}).get("name") if isinstance(params, dict) else None
    return str(name) if name is not None else None


def archive_revision(
    archive: Archive,
    repo: str | os.PathLike,
    rev: str,
    *,
    source: str | None = None,
    runs_root: str = DEFAULT_RUNS_ROOT,
) -> tuple[str, int, AddReport]:
    """Bring back a commit's runs from DVC's cache. Returns (commit, runs found, report)."""
    commit = revisions.resolve_commit(repo, rev)
    found = revision_runs(repo, commit, runs_root)
    provenance = Provenance(
        commit=commit, dirty=False, source=source or f"rev:{rev}", commit_date=revisions.commit_date(repo, commit)
    )
    report = archive.add(found, provenance, dataset=dataset_at(repo, commit))
    return commit, len(found), report


# --------------------------------------------------------------------------- scoring (shared with score.py)


def idcg_cutoffs(metrics: Sequence[str]) -> list[int]:
    """The k of every metric whose value divides by IDCG@k (ndcg, ceiling); [10] when there is none."""
    ks = sorted({m.k for m in parse_metrics(metrics) if m.kind in ("ndcg", "ceiling") and m.k is not None})
    return ks or [10]


@dataclass(frozen=True)
class Judged:
    """A judgment version ready to score against: its qrels over the scored queries."""

    version: str
    qrels: pl.DataFrame


def score_archive(
    archive: Archive,
    index: pl.DataFrame,
    judged: Sequence[Judged],
    query_ids: pl.Series,
    metrics: Sequence[str],
    contract: Contract,
) -> dict[tuple[str, str], dict[str, Any]]:
    """Score every distinct archived run under each judgment version.

    Returns {(run_sha256, version): {"mean": {...}, "counts": {...}}}; a run table shared by
    several configurations is read and scored once.
    """
    wanted = query_ids.to_list()
    scores = {}
    for run_sha in sorted(set(index["run_sha256"].to_list())):
        doc_run = scoring.document_run(archive.read_run(run_sha), wanted)
        for version in judged:
            scores[(run_sha, version.version)] = _evaluate(version.qrels, doc_run, metrics, contract, run_sha)
    return scores


def _evaluate(
    qrels: pl.DataFrame, run: pl.DataFrame, metrics: Sequence[str], contract: Contract, run_sha: str
) -> dict[str, Any]:
    if run.height == 0:
        return {
            "mean": {m: None for m in metrics},
            "counts": {"queries_evaluated": 0},
            "error": "the run has no scored query",
        }
    try:
        evaluation = scoring.score_table(run, qrels, metrics, contract, run_source=f"archive run {run_sha[:12]}")
    except InputError as exc:
        return {"mean": {m: None for m in metrics}, "counts": {"queries_evaluated": 0}, "error": exc.detail}
    return {"mean": evaluation.mean, "counts": evaluation.counts, "error": None}


def history_table(
    index: pl.DataFrame,
    scores: Mapping[tuple[str, str], dict[str, Any]],
    version: str,
    metrics: Sequence[str],
    primary: str,
) -> pl.DataFrame:
    """One row per archived (run, configuration), scored under ``version``; best ``primary`` first."""
    names = [m.name for m in parse_metrics(metrics)]
    rows = []
    for entry in index.iter_rows(named=True):
        result = scores[(entry["run_sha256"], version)]
        counts = result["counts"]
        rows.append(
            {
                "judgments_version": version,
                "config_id": entry["config_id"],
                "run_sha256": entry["run_sha256"],
                "commit": entry["commit"],
                "dirty": entry["dirty"],
                "commit_date": entry["commit_date"],
                "archived_at": entry["archived_at"],
                "source": entry["source"],
                "kind": entry["kind"],
                "chunking": entry["chunking"],
                "models": entry["models"],
                "dataset": entry["dataset"],
                "stage": entry["stage"],
                "params_digest": entry["params_digest"],
                "queries_evaluated": int(counts.get("queries_evaluated", 0)),
                "queries_missing_from_run": int(counts.get("queries_missing_from_run", 0)),
                "error": result["error"],
                **{name: result["mean"].get(name) for name in names},
            }
        )
    schema = {
        "judgments_version": pl.Utf8,
        "config_id": pl.Utf8,
        "run_sha256": pl.Utf8,
        "commit": pl.Utf8,
        "dirty": pl.Boolean,
        "commit_date": pl.Utf8,
        "archived_at": pl.Utf8,
        "source": pl.Utf8,
        "kind": pl.Utf8,
        "chunking": pl.Utf8,
        "models": pl.List(pl.Utf8),
        "dataset": pl.Utf8,
        "stage": pl.Utf8,
        "params_digest": pl.Utf8,
        "queries_evaluated": pl.Int64,
        "queries_missing_from_run": pl.Int64,
        "error": pl.Utf8,
        **{name: pl.Float64 for name in names},
    }
    table = pl.DataFrame(rows, schema=schema, orient="row")
    primary = parse_metrics([primary])[0].name
    table = table.sort(
        [primary, "config_id", "archived_at", "run_sha256"], descending=[True, False, False, False], nulls_last=True
    )
    return table.with_columns(pl.int_range(1, pl.len() + 1).cast(pl.Int64).alias("rank")).select(
        "rank", pl.exclude("rank")
    )


def score_changes_table(
    index: pl.DataFrame,
    scores: Mapping[tuple[str, str], dict[str, Any]],
    parent: str,
    active: str,
    metrics: Sequence[str],
) -> pl.DataFrame:
    """Each archived configuration's score under the parent and the active version, long form."""
    names = [m.name for m in parse_metrics(metrics)]
    rows = []
    for entry in index.sort("config_id", "archived_at", "run_sha256").iter_rows(named=True):
        old, new = scores[(entry["run_sha256"], parent)], scores[(entry["run_sha256"], active)]
        for name in names:
            a, b = old["mean"].get(name), new["mean"].get(name)
            rows.append(
                {
                    "config_id": entry["config_id"],
                    "run_sha256": entry["run_sha256"],
                    "commit": entry["commit"],
                    "metric": name,
                    "parent_version": parent,
                    "active_version": active,
                    "parent_value": a,
                    "active_value": b,
                    "change": None if a is None or b is None else b - a,
                    "parent_queries": int(old["counts"].get("queries_evaluated", 0)),
                    "active_queries": int(new["counts"].get("queries_evaluated", 0)),
                }
            )
    schema = {
        "config_id": pl.Utf8,
        "run_sha256": pl.Utf8,
        "commit": pl.Utf8,
        "metric": pl.Utf8,
        "parent_version": pl.Utf8,
        "active_version": pl.Utf8,
        "parent_value": pl.Float64,
        "active_value": pl.Float64,
        "change": pl.Float64,
        "parent_queries": pl.Int64,
        "active_queries": pl.Int64,
    }
    return pl.DataFrame(rows, schema=schema, orient="row")


# --------------------------------------------------------------------------- markdown


def _num(value: Any, fmt: str = "{:.4f}") -> str:
    return "–" if value is None else fmt.format(value)


def _commit(commit: str | None, dirty: bool | None) -> str:
    text = f"`{commit[:10]}`" if commit else "(none)"
    return text + (" +dirty" if dirty else "")


def _date(value: str | None) -> str:
    return value[:10] if value else "–"


def history_markdown(
    table: pl.DataFrame,
    *,
    version: str,
    judgments: Mapping[str, Any],
    contract: Contract,
    metrics: Sequence[str],
    primary: str,
    dataset: str,
    scored: int,
    holdout: int,
    skipped: Mapping[str, int],
) -> str:
    names = [m.name for m in parse_metrics(metrics)]
    shown = [n for n in names if not n.startswith(("judged@", "ceiling@"))][:5]
    primary = parse_metrics([primary])[0].name
    if primary not in shown:
        shown = [primary, *shown][:5]
    sha = str(judgments.get("source_sha256") or "")[:16]
    lines = [
        f"# Run history under judgments `{version}`",
        "",
        f"Every archived run of dataset `{dataset}` (data/archive/), re-scored now against the active judgment "
        f"version `{version}` (sha256 {sha}…). This table is regenerated whole for the active version: every "
        "number in it was computed under that one version, and scores computed under other judgment versions "
        "are never placed in this ranking (see idcg_changes.md for how scores moved from the parent version). "
        "Runs were only read, never re-encoded.",
        "",
        f"Contract — {_contract_text(contract)}; metrics ranked by `{primary}`; {scored} queries scored"
        + (f", {holdout} holdout queries sealed (not scored)" if holdout else "")
        + ".",
        "",
        f"{table.height} archived (run, configuration) pairs.",
        "",
        "Runs of one configuration id made under different parameters are told apart by `params` (the digest "
        "of the producing stage's params in dvc.lock; the full params are in data/archive/index.parquet).",
        "",
        "| # | configuration | " + " | ".join(shown) + " | queries | run | params | commit | archived |",
        "|---:|---|" + "---:|" * len(shown) + "---:|---|---|---|---|",
    ]
    for row in table.iter_rows(named=True):
        params = f"`{row['params_digest'][:8]}`" if row["params_digest"] else "–"
        cells = [
            str(row["rank"]),
            f"`{row['config_id']}`",
            *[_num(row[n]) for n in shown],
            str(row["queries_evaluated"]),
            f"`{row['run_sha256'][:12]}`",
            params,
            _commit(row["commit"], row["dirty"]),
            _date(row["archived_at"]),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    notes = []
    for row in table.iter_rows(named=True):
        if row["error"]:
            notes.append(f"`{row['config_id']}` (run `{row['run_sha256'][:12]}`): not scored: {row['error']}")
        elif row["queries_missing_from_run"]:
            notes.append(
                f"`{row['config_id']}` (run `{row['run_sha256'][:12]}`): {row['queries_missing_from_run']} "
                f"scored queries are missing from this run and count as "
                f"{'0' if contract.missing_in_run == 'zero' else 'excluded'} (made with another query set?)"
            )
    for other, count in sorted(skipped.items()):
        notes.append(
            f"{count} archived run(s) of dataset `{other}` left out: they cannot be scored against "
            f"`{dataset}`'s judgments"
        )
    if notes:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"


def _contract_text(contract: Contract) -> str:
    return "; ".join(f"{k}: {v}" for k, v in contract.to_dict().items())


def idcg_changes_markdown(
    *,
    active: str,
    parent: str | None,
    changes: pl.DataFrame | None,
    score_changes: pl.DataFrame | None,
    primary: str,
    contract: Contract,
    max_rows: int = 200,
) -> str:
    if parent is None:
        return (
            f"# IDCG changes: judgments `{active}`\n\n"
            f"The active judgment version `{active}` has no parent version: there is nothing to compare.\n"
        )
    primary = parse_metrics([primary])[0].name
    assert changes is not None and score_changes is not None
    lines = [
        f"# IDCG changes: `{parent}` → `{active}`",
        "",
        f"The active judgment version `{active}` revises `{parent}`. This is a change report, not a ranking: it is "
        "the one place where numbers from two judgment versions appear together, both computed now from the "
        "same archived runs under the same contract "
        f"({_contract_text(contract)}). Holdout queries are left out.",
        "",
        "## Queries whose IDCG@k moved",
        "",
    ]
    if changes.height == 0:
        lines.append("None: no scored query's ideal DCG changed.")
    else:
        lines += [
            f"{changes['query_id'].n_unique()} queries, {changes.height} (query, k) rows.",
            "",
            "| query | k | old IDCG | new IDCG | change | why |",
            "|---|---:|---:|---:|---:|---|",
        ]
        for row in changes.head(max_rows).iter_rows(named=True):
            reason = row["reason"] if len(row["reason"]) <= 240 else row["reason"][:237] + "…"
            lines.append(
                f"| `{row['query_id']}` | {row['k']} | {row['old_idcg']:.4f} | {row['new_idcg']:.4f} | "
                f"{row['change']:+.4f} | {reason} |"
            )
        if changes.height > max_rows:
            lines.append(f"| … | | | | | {changes.height - max_rows} more rows in idcg_changes.parquet |")
    lines += [
        "",
        f"## How each archived configuration's `{primary}` moved",
        "",
        "Sorted by configuration, not by score.",
        "",
        f"| configuration | run | commit | {primary} under `{parent}` | {primary} under `{active}` | change "
        "| queries |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    for row in score_changes.filter(pl.col("metric") == primary).iter_rows(named=True):
        change = "–" if row["change"] is None else f"{row['change']:+.4f}"
        lines.append(
            f"| `{row['config_id']}` | `{row['run_sha256'][:12]}` | {_commit(row['commit'], None)} | "
            f"{_num(row['parent_value'])} | {_num(row['active_value'])} | {change} | "
            f"{row['parent_queries']} → {row['active_queries']} |"
        )
    lines += ["", "Every metric's movement is in score_changes.parquet."]
    return "\n".join(lines) + "\n"


def list_markdown(index: pl.DataFrame) -> str:
    """`releval archive --list`: one line per archived (run, configuration), oldest first."""
    if index.height == 0:
        return "the archive is empty\n"
    header = f"{'archived':<20}  {'run':<12}  {'commit':<16}  {'source':<14}  configuration"
    lines = [header]
    for row in index.sort("archived_at", "config_id").iter_rows(named=True):
        commit = (row["commit"] or "(none)")[:10] + ("+dirty" if row["dirty"] else "")
        lines.append(
            f"{row['archived_at']:<20}  {row['run_sha256'][:12]:<12}  {commit:<16}  "
            f"{(row['source'] or '')[:14]:<14}  {row['config_id']}"
        )
    lines.append(
        f"{index.height} entries, {index['run_sha256'].n_unique()} distinct runs, "
        f"{index['config_id'].n_unique()} configurations"
    )
    return "\n".join(lines) + "\n"
