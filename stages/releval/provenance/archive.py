"""The run archive: every run ever produced, kept in git by content hash, and its re-scoring.

An archive directory (``data/archive/``: the ``archive`` stage's output, declared ``cache: false``
and ``persist: true``, so git tracks it and a ``git clone`` brings every archived run, with no
DVC remote)::

    README.md                   what the folder is (its one fixed file: git keeps the folder)
    index/<sha256>.parquet      index parts: the rows (INDEX_SCHEMA) one `add` appended
    docs/<sha256>.parquet       one run at the judged unit: query_id, doc_id, score (DOC_RUN)
    meta/<sha256>.json          its run.json sidecar, byte for byte

Every file is named by the sha256 of its bytes. An entry is keyed by (run_sha256, config_id),
run_sha256 being the sha256 of the chunk-level run.parquet the run stage wrote (what
reports/lineage.json records). Adding a key already there is a no-op (the first record wins: its
commit, date and parameters are kept); nothing is deleted or rewritten; new entries are a new
index part. The index therefore grows by files, never by edits: two branches that archived
different runs merge without a conflict (a key archived on both keeps its earlier record). Writes
hold an exclusive lock on the directory and go through :mod:`releval.io`.

What is kept of a run: the chunk-level table collapsed to documents exactly as scoring collapses
it (:func:`releval.measurement.scoring.document_run`), for every query the run holds (the split
is applied when scoring), scores unchanged, to the depth the contract's metrics need
(:func:`archive_depth`: every document when a metric reads the whole ranking, as map does; else
the largest cutoff, plus the documents tied with the last one kept). Scoring reads only (query,
document, score), so a run re-scored from this form gives exactly the numbers of its chunk-level
table. Chunk ids, chunk rows and ranks are not kept here: they stay in DVC's cache as the run
stages' outputs.

Size (measured): a run of the shipped default data (143 documents, 58 dev queries, map among the
metrics, so every retrieved document: 5,900-8,300 rows) is 38-60 KB (minilm/c256 38, bm25/c256 49,
rrf 60), about a fifth of its chunk-level table; its run.json and index row add about 3 KB. A
commit whose repro changes all 16 runs of the default grid therefore adds about 0.8 MB to the
repository, one that changes a single configuration 40-65 KB (unchanged runs are not stored
again), a judgments-only change nothing. The tests' small cut (12 dev queries, 37 documents) is
about 4 KB per run.

A team with a DVC remote keeps the big artefacts there instead of in git: embeddings, indexes and
the chunk-level runs are DVC outputs of every commit; ``dvc push`` sends them to the remote, and
``releval archive --from-rev REV`` (after ``dvc fetch --rev REV``) brings a commit's runs back into
this archive. A chunk-level archive as such would be a second, cached ``persist: true`` output
(say ``data/archive-chunks``, run.parquet files by hash), pushed to the remote like any output;
nothing here needs it, and without the remote a clone could not read it.

Provenance of an entry: the commit whose inputs made it (:func:`workspace_provenance`: the last
commit that changed an input -- code, configuration, data, judgments -- with ``dirty`` and the
``dirty_paths`` that differ from HEAD; outputs, dvc.lock and .gitignore files are not inputs; the
revision's own hash when brought back from a commit or experiment), the DVC stage that wrote it
and the digest of that stage's parameters as dvc.lock records them, the dataset name, and when it
was first archived. Git and dvc.lock are read through :mod:`releval.provenance.revisions`.

Re-scoring (:func:`score_archive`) reads only the document-level runs and scores them exactly as
the ``score`` stage does (:mod:`releval.measurement.scoring`,
:func:`releval.measurement.metrics.evaluate`, holdout queries left out).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io as _stdio
import json
import os
import shutil
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
from releval.tables import DOC_RUN
from releval import paths

README = "README.md"
INDEX_DIR = "index"
DOCS_DIR = "docs"
META_DIR = "meta"
# The layout before the archive was committed (a cached DVC output): one index.parquet and the
# chunk-level runs in runs/. Archive.migrate_legacy converts it.
LEGACY_INDEX = "index.parquet"
LEGACY_RUNS_DIR = "runs"
DEFAULT_RUNS_ROOT = paths.RUNS
WORKSPACE = "workspace"

README_TEXT = """# The run archive

Every run this repository's pipeline has produced, collapsed to documents, kept in git so that a
clone has the whole history without a DVC remote. Written by the `archive` stage and
`releval archive`; read by the `rescore` stage (reports/history.md) and `releval audit`.
Every file is named by the sha256 of its bytes: do not edit them.

- `index/<sha256>.parquet`: the entries one archiving added (run hash, configuration, commit, params)
- `docs/<sha256>.parquet`: one run at document level (query_id, doc_id, score)
- `meta/<sha256>.json`: that run's run.json sidecar

See `releval.provenance.archive`.
"""

INDEX_SCHEMA = pl.Schema(
    {
        "run_sha256": pl.Utf8,  # sha256 of run.parquet's bytes (= reports/lineage.json's run_sha256)
        "config_id": pl.Utf8,
        "docs_sha256": pl.Utf8,  # sha256 of the document-level run: docs/<docs_sha256>.parquet
        "meta_sha256": pl.Utf8,  # sha256 of run.json's bytes: meta/<meta_sha256>.json
        "kind": pl.Utf8,  # dense | bm25 | fused | reranked
        "chunking": pl.Utf8,
        "models": pl.List(pl.Utf8),  # every model the run used (run.json "models"), sorted
        "dataset": pl.Utf8,  # params dataset.name where the run was made
        "run_path": pl.Utf8,  # where it lived, e.g. data/work/runs/model/minilm/c256
        "rows": pl.Int64,  # chunk-level rows
        "depth": pl.Int64,  # documents kept per query (and any tied with the last); null: all of them
        "doc_rows": pl.Int64,  # document-level rows kept
        "stage": pl.Utf8,  # the DVC stage that wrote it, e.g. retrieve@minilm-c256
        "params_digest": pl.Utf8,  # sha256 of that stage's params in dvc.lock (canonical JSON)
        "params_json": pl.Utf8,  # those params themselves
        "dvc_out_md5": pl.Utf8,  # the DVC hash of the stage output holding the run
        "commit": pl.Utf8,  # the commit whose inputs made the run (null: no commit yet)
        "commit_date": pl.Utf8,  # that commit's committer date (ISO 8601)
        "dirty": pl.Boolean,  # the inputs differed from that commit when archived
        "dirty_paths": pl.List(pl.Utf8),
        "source": pl.Utf8,  # workspace | rev:<REV> | exp:<NAME>
        "archived_at": pl.Utf8,  # when first archived, ISO 8601 UTC
    }
)
_DOCUMENT_COLUMNS = ("docs_sha256", "depth", "doc_rows")  # what the legacy index lacks

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


def parquet_bytes(frame: pl.DataFrame) -> bytes:
    """The bytes :func:`releval.io.write_parquet` writes for ``frame`` (statistics off, zstd)."""
    buffer = _stdio.BytesIO()
    frame.write_parquet(buffer, statistics=False, compression="zstd")
    return buffer.getvalue()


# --------------------------------------------------------------------------- what a run becomes


def archive_depth(metrics: Sequence[str]) -> int | None:
    """Documents per query the archive keeps for ``metrics``: None (all) when one reads the whole
    ranking (map, mrr or rprec without a cutoff), else the largest cutoff."""
    parsed = parse_metrics(metrics)
    return None if any(m.k is None for m in parsed) else max(m.k for m in parsed if m.k is not None)


def document_table(chunk_run: pl.DataFrame, depth: int | None = None) -> pl.DataFrame:
    """What the archive keeps of a chunk-level run: each query's documents at their best chunk
    (:func:`releval.measurement.scoring.document_run`, every query), DOC_RUN's columns, in rank
    order; with ``depth``, each query's ``depth`` best scores and every document tied with the
    last of them (so any tie rule's top ``depth`` is inside)."""
    docs = scoring.document_run(chunk_run).select(DOC_RUN.columns)
    if depth is None:
        return docs
    return docs.filter(pl.col("score").rank("min", descending=True).over("query_id") <= depth)


def too_shallow(depth: int | None, metrics: Sequence[str]) -> str | None:
    """Why a run archived to ``depth`` cannot be scored under ``metrics`` (None: it can)."""
    needed = archive_depth(metrics)
    if depth is None or (needed is not None and needed <= depth):
        return None
    need = "every retrieved document" if needed is None else f"the top {needed}"
    return f"archived to depth {depth} (documents per query); the metrics need {need}"


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

    def chunk_run(self) -> pl.DataFrame:
        """The run table, checked to be one."""
        try:
            frame = pl.read_parquet(_stdio.BytesIO(self.run_bytes))
        except Exception as exc:  # polars raises several types for a bad file
            raise InputError(f"not a readable parquet run table: {exc}", file=f"{self.run_path}/run.parquet") from None
        missing = [c for c in runs.RUN_SCHEMA if c not in frame.columns]
        if missing:
            raise InputError(f"not a run table: missing columns {missing}", file=f"{self.run_path}/run.parquet")
        return frame


@dataclass
class AddReport:
    added: list[tuple[str, str]] = field(default_factory=list)  # (run_sha256, config_id)
    present: list[tuple[str, str]] = field(default_factory=list)  # already archived: left as they were
    bytes_added: int = 0  # new files' bytes (what the commit that records them grows by)

    def summary(self) -> str:
        grown = f" ({self.bytes_added / 1024:.1f} KiB of new files)" if self.bytes_added else ""
        return f"{len(self.added)} added, {len(self.present)} already archived{grown}"


# --------------------------------------------------------------------------- the archive


class Archive:
    """A content-addressed run archive directory (see the module docstring)."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)

    @property
    def index_dir(self) -> Path:
        return self.root / INDEX_DIR

    def docs_file(self, docs_sha256: str) -> Path:
        return self.root / DOCS_DIR / f"{docs_sha256}.parquet"

    def meta_file(self, meta_sha256: str) -> Path:
        return self.root / META_DIR / f"{meta_sha256}.json"

    def index_parts(self) -> list[Path]:
        return sorted(self.index_dir.glob("*.parquet")) if self.index_dir.is_dir() else []

    def index(self) -> pl.DataFrame:
        """Every entry, oldest first; a key in two parts (branches merged) keeps its earlier record."""
        frames = []
        for part in self.index_parts():
            frame = pl.read_parquet(part)
            missing = [name for name in INDEX_SCHEMA if name not in frame.columns]
            if missing:
                raise InputError(f"not a run archive index part: missing columns {missing}", file=str(part))
            frames.append(frame.select(list(INDEX_SCHEMA)).with_columns(pl.lit(part.name).alias("_part")))
        if not frames:
            return empty_index()
        index = pl.concat(frames).sort("archived_at", "_part", maintain_order=True)
        return index.unique(subset=["run_sha256", "config_id"], keep="first", maintain_order=True).drop("_part")

    def entry(self, run_sha256: str, config_id: str) -> dict[str, Any] | None:
        """The index row of (run_sha256, config_id), or None."""
        rows = self.index().filter((pl.col("run_sha256") == run_sha256) & (pl.col("config_id") == config_id))
        return rows.row(0, named=True) if rows.height else None

    def ensure(self) -> None:
        """Create the archive directory and its README if there is none."""
        with self._locked():
            self._write_readme()

    def _write_readme(self) -> None:
        path = self.root / README
        if not path.exists() or path.read_text(encoding="utf-8") != README_TEXT:
            io.write_text(path, README_TEXT)

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
        self,
        items: Iterable[RunFiles],
        provenance: Provenance,
        *,
        dataset: str | None,
        depth: int | None = None,
        archived_at: str | None = None,
    ) -> AddReport:
        """Add runs, each kept to ``depth`` documents per query (None: all); a (run_sha256,
        config_id) already archived is left exactly as it was."""
        report = AddReport()
        archived_at = archived_at or holdout.utc_now()
        with self._locked():
            known = set(zip(*self._keys()))
            rows, files = [], {}
            for item in items:  # every item is checked before anything is written
                meta = item.meta()
                key = (item.run_sha256, meta["config_id"])
                if key in known:
                    report.present.append(key)
                    continue
                chunk_run = item.chunk_run()
                docs_sha, docs_rows = self._documents(chunk_run, depth, files)
                files[self.meta_file(item.meta_sha256)] = item.meta_bytes
                rows.append(
                    _index_row(item, meta, chunk_run.height, (docs_sha, depth, docs_rows), provenance, dataset)
                    | {"archived_at": archived_at}
                )
                known.add(key)
                report.added.append(key)
            report.bytes_added = self._write(rows, files)
        return report

    def migrate_legacy(self, depth: int | None = None) -> int:
        """Convert an archive of the earlier layout (index.parquet and chunk-level runs/, a cached
        DVC output) to this one, entry for entry and record for record, each run kept to ``depth``;
        the legacy files are then removed. Returns the entries converted (0: nothing to convert)."""
        legacy = self.root / LEGACY_INDEX
        if not legacy.exists():
            return 0
        with self._locked():
            old = pl.read_parquet(legacy)
            missing = [n for n in INDEX_SCHEMA if n not in old.columns and n not in _DOCUMENT_COLUMNS]
            if missing:
                raise InputError(f"not a run archive index: missing columns {missing}", file=str(legacy))
            known = set(zip(*self._keys()))
            rows, files = [], {}
            for row in old.iter_rows(named=True):
                if (row["run_sha256"], row["config_id"]) in known:
                    continue
                chunk_run = _read_verified(self.root / LEGACY_RUNS_DIR / f"{row['run_sha256']}.parquet")
                docs_sha, docs_rows = self._documents(chunk_run, depth, files)
                rows.append({**row, "docs_sha256": docs_sha, "depth": depth, "doc_rows": docs_rows})
                known.add((row["run_sha256"], row["config_id"]))
            self._write(rows, files)
            legacy.unlink()
            shutil.rmtree(self.root / LEGACY_RUNS_DIR, ignore_errors=True)
        return len(rows)

    def _keys(self) -> tuple[list[str], list[str]]:
        index = self.index()
        return index["run_sha256"].to_list(), index["config_id"].to_list()

    def _documents(self, chunk_run: pl.DataFrame, depth: int | None, files: dict[Path, bytes]) -> tuple[str, int]:
        """Queue the run's document-level form in ``files``; its (sha256, rows)."""
        docs = document_table(chunk_run, depth)
        data = parquet_bytes(docs)
        docs_sha = sha256_bytes(data)
        files[self.docs_file(docs_sha)] = data
        return docs_sha, docs.height

    def _write(self, rows: list[dict[str, Any]], files: Mapping[Path, bytes]) -> int:
        """Files first, then the index part naming them (an entry never names a missing file)."""
        self._write_readme()
        written = sum(self._store(target, data) for target, data in files.items())
        if rows:
            part = parquet_bytes(pl.DataFrame(rows, schema=INDEX_SCHEMA, orient="row"))
            written += self._store(self.index_dir / f"{sha256_bytes(part)}.parquet", part)
        return written

    @staticmethod
    def _store(target: Path, data: bytes) -> int:
        """Write a content-addressed file once (returns its size; 0 when it was there)."""
        if target.exists():
            if target.stat().st_size != len(data):
                raise InputError(
                    f"archived file differs from its hash name ({target.stat().st_size} bytes, "
                    f"expected {len(data)}): the archive was edited",
                    file=str(target),
                )
            return 0
        io.write_bytes(target, data)
        return len(data)

    def read_documents(self, docs_sha256: str, *, verify: bool = True) -> pl.DataFrame:
        """A document-level run (query_id, doc_id, score), its bytes checked against its name."""
        path = self.docs_file(docs_sha256)
        if not path.exists():
            raise InputError("archived run missing (the index names it)", file=str(path))
        return _read_verified(path, verify=verify)

    def read_meta(self, meta_sha256: str) -> dict[str, Any]:
        return json.loads(self.meta_file(meta_sha256).read_text(encoding="utf-8"))


def _read_verified(path: Path, *, verify: bool = True) -> pl.DataFrame:
    """A content-addressed parquet file, its sha256 checked against its name."""
    if not path.exists():
        raise InputError("archived file missing (the index names it)", file=str(path))
    data = path.read_bytes()
    if verify and sha256_bytes(data) != path.stem:
        raise InputError(
            f"sha256 {sha256_bytes(data)} does not match the file's name: the archive was edited", file=str(path)
        )
    return pl.read_parquet(_stdio.BytesIO(data))


def _index_row(
    item: RunFiles,
    meta: dict[str, Any],
    rows: int,
    documents: tuple[str, int | None, int],
    provenance: Provenance,
    dataset: str | None,
) -> dict[str, Any]:
    out = item.out
    params = out.params if out else None
    models = meta.get("models") or {}
    docs_sha, depth, doc_rows = documents
    return {
        "run_sha256": item.run_sha256,
        "config_id": meta["config_id"],
        "docs_sha256": docs_sha,
        "meta_sha256": item.meta_sha256,
        "kind": meta.get("kind"),
        "chunking": meta.get("chunking"),
        "models": sorted(models) if isinstance(models, dict) else sorted(map(str, models)),
        "dataset": dataset,
        "run_path": item.run_path,
        "rows": rows,
        "depth": depth,
        "doc_rows": doc_rows,
        "stage": out.stage if out else None,
        "params_digest": params_digest(params),
        "params_json": _canonical_json(params) if params else None,
        "dvc_out_md5": out.md5 if out else None,
        "commit": provenance.commit,
        "commit_date": provenance.commit_date,
        "dirty": provenance.dirty,
        "dirty_paths": list(provenance.dirty_paths),
        "source": provenance.source,
    }


# --------------------------------------------------------------------------- provenance


def producing_out(run_path: str, outs: Sequence[StageOut]) -> StageOut | None:
    """The (deepest) stage output that holds the run folder ``run_path``."""
    path = PurePosixPath(run_path)
    holders = [o for o in outs if PurePosixPath(o.path) == path or PurePosixPath(o.path) in path.parents]
    return max(holders, key=lambda o: len(o.path)) if holders else None


def workspace_provenance(repo: str | os.PathLike, lock: Mapping[str, Any]) -> Provenance:
    """The commit whose inputs the workspace holds, and the inputs that differ from HEAD
    (:func:`releval.provenance.revisions.input_state`; what the pipeline writes is no input)."""
    if revisions.changed_paths(repo) is None:  # not a git repository
        return Provenance(commit=None, dirty=True, dirty_paths=("<not a git repository>",))
    state = revisions.input_state(repo, lock)
    commit, dirty = state["commit"], list(state["dirty_paths"])
    if commit is None:
        dirty = dirty or ["<no commit yet>"]
    return Provenance(
        commit=commit,
        dirty=bool(dirty),
        dirty_paths=tuple(dirty[:_MAX_DIRTY_PATHS]),
        source=WORKSPACE,
        commit_date=revisions.commit_date(repo, commit) if commit else None,
    )


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


def params_at(repo: str | os.PathLike, commit: str | None, params_file: str = paths.PARAMS) -> dict[str, Any]:
    """The params a commit recorded ({} when unknown)."""
    data = revisions.show_file(commit, params_file, repo) if commit else None
    if data is None:
        return {}
    try:
        params = yaml.safe_load(data.decode("utf-8")) or {}
    except yaml.YAMLError:
        return {}
    return params if isinstance(params, dict) else {}


def dataset_at(repo: str | os.PathLike, commit: str | None, params_file: str = paths.PARAMS) -> str | None:
    """params ``dataset.name`` at a commit (None when unknown)."""
    name = (params_at(repo, commit, params_file).get("dataset") or {}).get("name")
    return str(name) if name is not None else None


def depth_at(repo: str | os.PathLike, commit: str | None, params_file: str = paths.PARAMS) -> int | None:
    """The archive depth for the metrics a commit measured (None, all documents, when unknown)."""
    metrics = (params_at(repo, commit, params_file).get("metric") or {}).get("metrics")
    try:
        return archive_depth(list(metrics)) if metrics else None
    except InputError:  # a metric this version does not know: keep everything
        return None


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
    report = archive.add(found, provenance, dataset=dataset_at(repo, commit), depth=depth_at(repo, commit))
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

    Returns {(run_sha256, version): {"mean": {...}, "counts": {...}, "error": ...}}; a run shared
    by several configurations is read and scored once (from its deepest document-level form).
    """
    wanted = query_ids.to_list()
    scores = {}
    deepest = index.sort(pl.col("depth").fill_null(2**62), descending=True, maintain_order=True).unique(
        "run_sha256", keep="first", maintain_order=True
    )
    for entry in deepest.sort("run_sha256").iter_rows(named=True):
        run_sha, shallow = entry["run_sha256"], too_shallow(entry["depth"], metrics)
        doc_run = None if shallow else holdout.restrict(archive.read_documents(entry["docs_sha256"]), wanted)
        for version in judged:
            scores[(run_sha, version.version)] = (
                _unscored(metrics, shallow)
                if doc_run is None
                else _evaluate(version.qrels, doc_run, metrics, contract, run_sha)
            )
    return scores


def _unscored(metrics: Sequence[str], why: str) -> dict[str, Any]:
    return {"mean": {m: None for m in metrics}, "counts": {"queries_evaluated": 0}, "error": why}


def _evaluate(
    qrels: pl.DataFrame, run: pl.DataFrame, metrics: Sequence[str], contract: Contract, run_sha: str
) -> dict[str, Any]:
    if run.height == 0:
        return _unscored(metrics, "the run has no scored query")
    try:
        evaluation = scoring.score_table(run, qrels, metrics, contract, run_source=f"archive run {run_sha[:12]}")
    except InputError as exc:
        return _unscored(metrics, exc.detail)
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
        "of the producing stage's params in dvc.lock; the full params are in the index of data/archive/).",
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
