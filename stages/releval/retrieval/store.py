"""A content-addressed embedding store: a text is encoded once per model, protocol and device.

A corpus edited weekly changes a few documents, yet DVC reruns a stage when any byte of its
input changes. The store makes that rerun cheap: every vector is kept under

    (namespace, sha256 of the exact text the model sees)

where the namespace fixes everything else that decides the vector (:func:`namespace_terms`: the
model weights and revision, the family, the role and its prompt, normalisation, max_seq_length,
dtype, device type, the kernels torch runs). An encode stage looks its texts up, computes only the
missing ones, adds them as one shard, and assembles its matrix from the store.

**Why the outputs stay byte-identical to a cold run.** A transformer's vector for a text is not a
function of the text alone: it depends, in the last bits, on the padded length of the batch the
text was encoded in, and for short texts on the number of rows in the batch (the matrix shapes
change the kernels' summation order; measured on all-MiniLM-L6-v2: 12 of 20 texts encoded alone
differ in the last bits from the same texts in padded batches; 20 of 240 short texts differ
between a batch of 1 and a batch of 7 of one length). A text re-encoded next to different
neighbours would get different bits. Missing texts are therefore encoded in *fixed-shape
batches* (:func:`encode_exact_length`): only texts of the same token length share a batch, so
nothing is padded, and every batch has the same number of rows (a partial batch is filled with
repeats), so each vector depends on its text only. A cold run and an incremental run compute
every vector the same way and assemble the same matrix.

**Where it lives, and why not in DVC.** ``data/store/embeddings/`` (git-ignored), beside the DVC
cache, not a DVC output: one store serves every encode cell of a model (DVC outputs cannot
overlap between stages), and nothing downstream reads it, only the cells' own outputs, which DVC
tracks as before. Deleting the store costs one cold encode, never a wrong number. Layout::

    <namespace id>/namespace.json         the terms the id hashes, and the module protocol
    <namespace id>/shards/<shard id>/     keys.npy (n x 32 sha256 bytes), lengths.npy (token
                                          counts as the model tokenises, prompt included),
                                          the vectors (embeddings.npy, or sparse CSR arrays)
    <namespace id>/throughput.json        chunks/s of this machine (:func:`throughput`)
    <namespace id>/query_latency.json     per-query encoding times of this machine (:func:`query_latency`)
    refs/<ref id>.json                    one per encode: namespace, keys file, cell, commit

A shard is written to a temporary folder and renamed into place, so a killed encode leaves no
partial shard. ``releval store`` reports the size; ``releval store gc`` drops vectors that no
current cell and no archived commit references (:func:`collect_garbage`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from releval import io
from releval.errors import InputError
from releval.retrieval.batching import BatchPlan, batch_plan
from releval.retrieval.families import family_class

FORMAT = 1
KEYS_FILE = "keys.npy"
LENGTHS_FILE = "lengths.npy"
NAMESPACE_FILE = "namespace.json"
SHARDS = "shards"
REFS = "refs"
KEY_BYTES = 32
# Rows copied from a shard into a cell's matrix per step (bounds the temporary copy of a shard's rows).
GATHER_BLOCK = 65_536


def text_keys(texts: Sequence[str]) -> np.ndarray:
    """``(n, 32)`` uint8: the sha256 of each text's UTF-8 bytes."""
    keys = np.empty((len(texts), KEY_BYTES), dtype=np.uint8)
    for row, text in enumerate(texts):
        keys[row] = np.frombuffer(hashlib.sha256(text.encode("utf-8")).digest(), dtype=np.uint8)
    return keys


def namespace_terms(manifest: dict[str, Any], config, role: str) -> dict[str, Any]:
    """Everything besides the text that decides a vector (``config``: a ModelConfig): the weights, the
    role's prompt, and what the family says decides it (:meth:`Family.namespace_terms`)."""
    return {
        "format": FORMAT,
        "model": config.name,
        "weights_sha256": manifest["weights_sha256"],
        "revision": manifest.get("revision"),
        "role": role,
        "prompt": config.query_prompt if role == "query" else config.document_prompt,
        **family_class(config.family).namespace_terms(manifest, config),
    }


def namespace_id(terms: dict[str, Any]) -> str:
    canonical = json.dumps(terms, sort_keys=True, separators=(",", ":")).encode("utf-8")
    return f"{terms['model']}-{terms['role']}-{hashlib.sha256(canonical).hexdigest()[:16]}"


@dataclasses.dataclass
class Assembled:
    """One cell's vectors in the order of its texts, and what it cost."""

    vectors: Any  # (n, d) float32, or a CSR matrix for sparse models
    lengths: np.ndarray
    computed: int  # distinct texts encoded now
    reused: int  # texts found in the store
    encode_s: float  # seconds spent encoding the computed texts
    computed_tokens: int


class EmbeddingStore:
    """The vectors of one namespace (see the module docstring)."""

    def __init__(self, root: str | Path, terms: dict[str, Any], family: str):
        self.root = Path(root)
        self.terms = terms
        self.family = family
        self.id = namespace_id(terms)
        self.folder = self.root / self.id

    def shards(self) -> list[Path]:
        folder = self.folder / SHARDS
        if not folder.is_dir():
            return []
        return sorted(p for p in folder.iterdir() if (p / KEYS_FILE).is_file() and not p.name.startswith("."))

    def index(self) -> dict[bytes, tuple[int, int]]:
        """Key → (shard number, row) over every complete shard; the first shard holding a key wins."""
        found: dict[bytes, tuple[int, int]] = {}
        for number, shard in enumerate(self.shards()):
            keys = io.read_npy(shard / KEYS_FILE)
            for row, key in enumerate(keys):
                found.setdefault(key.tobytes(), (number, row))
        return found

    def description(self) -> dict[str, Any]:
        path = self.folder / NAMESPACE_FILE
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {"terms": self.terms}

    def add(self, keys: np.ndarray, vectors, lengths: np.ndarray, module_protocol: dict[str, Any]) -> Path:
        """Write one shard (atomically); its id is the hash of its keys."""
        from releval.retrieval.vectors import write_vectors

        shard_id = hashlib.sha256(np.ascontiguousarray(keys).tobytes()).hexdigest()[:24]
        target = self.folder / SHARDS / shard_id
        if not (self.folder / NAMESPACE_FILE).is_file():
            description = {"id": self.id, "terms": self.terms, "encoder": module_protocol}
            io.write_json(self.folder / NAMESPACE_FILE, description)
        if (target / KEYS_FILE).is_file():
            return target
        with io.atomic_path(target, directory=True) as tmp:
            write_vectors(tmp, vectors)
            io.write_npy(tmp / LENGTHS_FILE, np.asarray(lengths, dtype=np.int64))
            io.write_npy(tmp / KEYS_FILE, np.ascontiguousarray(keys, dtype=np.uint8))
        return target

    def gather(self, keys: np.ndarray, index: dict[bytes, tuple[int, int]]):
        """Vectors and lengths of ``keys`` (all present) in their order."""
        from releval.retrieval.vectors import read_vectors

        shards = self.shards()
        places = np.array([index[key.tobytes()] for key in keys], dtype=np.int64).reshape(-1, 2)
        lengths = np.empty(len(keys), dtype=np.int64)
        cell = RowAssembler(len(keys), self.family)
        for number in np.unique(places[:, 0]):  # one shard in memory at a time
            rows = np.flatnonzero(places[:, 0] == number)
            shard = shards[number]
            vectors = read_vectors(shard)
            for start in range(0, len(rows), GATHER_BLOCK):
                block = rows[start : start + GATHER_BLOCK]
                cell.put(block, vectors[places[block, 1]])
            del vectors
            lengths[rows] = io.read_npy(shard / LENGTHS_FILE)[places[rows, 1]]
        return cell.matrix(), lengths


class RowAssembler:
    """A cell's matrix from blocks of rows that come in any order. Dense rows are written in place
    (one copy of the matrix: at 10^6 chunks it is a gigabyte); sparse blocks are stacked at the end."""

    def __init__(self, n: int, family: str):
        self.n, self.sparse = n, family_class(family).sparse
        self.dense: np.ndarray | None = None
        self.blocks: list[tuple[np.ndarray, Any]] = []

    def put(self, rows: np.ndarray, block) -> None:
        if self.sparse:
            self.blocks.append((rows, block))
            return
        if self.dense is None:
            self.dense = np.empty((self.n, block.shape[1]), dtype=np.float32)
        self.dense[rows] = block

    def matrix(self):
        if not self.sparse:
            return self.dense if self.dense is not None else np.empty((self.n, 0), dtype=np.float32)
        import scipy.sparse as sp

        from releval.retrieval.sparse import as_canonical

        if not self.blocks:
            raise InputError("nothing to assemble: the cell has no texts")
        order = np.concatenate([rows for rows, _ in self.blocks])
        stacked = sp.vstack([block for _, block in self.blocks], format="csr")
        inverse = np.empty(self.n, dtype=np.int64)
        inverse[order] = np.arange(self.n)
        return as_canonical(stacked[inverse])


def exact_length_batches(lengths: np.ndarray, keys: np.ndarray) -> list[np.ndarray]:
    """Row groups that share one token length, each ordered by key: the batches that need no padding."""
    order = np.lexsort((*keys.T[::-1], lengths))
    sorted_lengths = lengths[order]
    cuts = np.flatnonzero(np.diff(sorted_lengths)) + 1
    return [group for group in np.split(order, cuts) if len(group)]


def encode_exact_length(
    encode: Callable[[list[str]], Any],
    texts: Sequence[str],
    lengths: np.ndarray,
    keys: np.ndarray,
    family: str,
    plan: BatchPlan,
    on_encoded: Callable[[int], None] = lambda n: None,
):
    """Encode ``texts`` in batches of one token length (see :class:`BatchPlan`); rows in input order.

    ``lengths``: the token counts the model sees (after max_seq_length cuts them), so texts cut
    to the same length share a batch.
    """
    cell = RowAssembler(len(texts), family)
    for group in exact_length_batches(lengths, keys):
        fill = lengths[group[0]] < plan.fill_below
        for start in range(0, len(group), plan.rows):
            rows = group[start : start + plan.rows]
            batch = np.resize(rows, plan.rows) if fill else rows
            cell.put(rows, encode([texts[r] for r in batch])[: len(rows)])
            on_encoded(len(rows))
    return cell.matrix()


def unique_rows(keys: np.ndarray) -> np.ndarray:
    """Positions of the first occurrence of each distinct key, in input order."""
    _, first = np.unique(keys, axis=0, return_index=True)
    return np.sort(first)


# --- references and garbage collection --------------------------------------------------------


def write_ref(root: str | Path, store: EmbeddingStore, keys: np.ndarray, cell: str, commit: str | None) -> Path:
    """Record that ``cell`` (e.g. "minilm/c256 document") used ``keys`` at ``commit``."""
    keys = np.ascontiguousarray(keys, dtype=np.uint8)
    ref_id = hashlib.sha256(store.id.encode() + cell.encode() + keys.tobytes()).hexdigest()[:24]
    folder = Path(root) / REFS
    io.write_npy(folder / f"{ref_id}.keys.npy", keys)
    io.write_json(
        folder / f"{ref_id}.json",
        {"id": ref_id, "namespace": store.id, "cell": cell, "commit": commit, "vectors": len(keys), "written": _now()},
    )
    return folder / f"{ref_id}.json"


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def head_commit(cwd: str | Path = ".") -> str | None:
    done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else None


@dataclasses.dataclass(frozen=True)
class NamespaceSize:
    id: str
    model: str
    role: str
    shards: int
    vectors: int
    bytes: int


def size_report(root: str | Path) -> list[NamespaceSize]:
    """Per namespace: shards, vectors (with repeats across shards) and bytes on disk."""
    root = Path(root)
    out = []
    for folder in sorted(p for p in root.iterdir() if (p / NAMESPACE_FILE).is_file()) if root.is_dir() else []:
        terms = json.loads((folder / NAMESPACE_FILE).read_text(encoding="utf-8"))["terms"]
        shard_root = folder / SHARDS
        shards = [p for p in shard_root.iterdir() if (p / KEYS_FILE).is_file()] if shard_root.is_dir() else []
        vectors = sum(int(np.load(p / KEYS_FILE, mmap_mode="r").shape[0]) for p in shards)
        size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
        out.append(NamespaceSize(folder.name, terms["model"], terms["role"], len(shards), vectors, size))
    return out


@dataclasses.dataclass(frozen=True)
class Collection:
    kept_refs: int
    dropped_refs: int
    kept_vectors: int
    dropped_vectors: int
    freed_bytes: int


def collect_garbage(root: str | Path, live: Callable[[dict[str, Any]], bool], dry_run: bool = False) -> Collection:
    """Drop every vector that no live ref names; ``live(ref)`` decides per ref (see :func:`live_ref`).

    Shards are rewritten without their dead rows (a shard left empty is deleted); dead refs go.
    """
    root = Path(root)
    refs_folder = root / REFS
    refs = sorted(refs_folder.glob("*.json")) if refs_folder.is_dir() else []
    wanted: dict[str, set[bytes]] = {}
    kept_refs = dropped_refs = 0
    for path in refs:
        ref = json.loads(path.read_text(encoding="utf-8"))
        if live(ref):
            kept_refs += 1
            keys = io.read_npy(path.with_suffix(".keys.npy"))
            wanted.setdefault(ref["namespace"], set()).update(k.tobytes() for k in keys)
        else:
            dropped_refs += 1
            if not dry_run:
                path.with_suffix(".keys.npy").unlink(missing_ok=True)
                path.unlink()
    kept = dropped = freed = 0
    for folder in sorted(p for p in root.iterdir() if (p / NAMESPACE_FILE).is_file()) if root.is_dir() else []:
        keep_keys = wanted.get(folder.name, set())
        for shard in sorted((folder / SHARDS).iterdir()) if (folder / SHARDS).is_dir() else []:
            if not (shard / KEYS_FILE).is_file():
                continue
            keys = io.read_npy(shard / KEYS_FILE)
            mask = np.array([k.tobytes() in keep_keys for k in keys], dtype=bool)
            kept += int(mask.sum())
            dropped += int((~mask).sum())
            if mask.all() or dry_run:
                if not mask.any() and dry_run:
                    freed += _folder_bytes(shard)
                continue
            before = _folder_bytes(shard)
            if not mask.any():
                shutil.rmtree(shard)
                freed += before
                continue
            _rewrite_shard(shard, mask)
            freed += before - _folder_bytes(shard)
    return Collection(kept_refs, dropped_refs, kept, dropped, freed)


def _folder_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def _rewrite_shard(shard: Path, mask: np.ndarray) -> None:
    from releval.retrieval.vectors import read_vectors, write_vectors

    vectors = read_vectors(shard)[np.flatnonzero(mask)]
    lengths = io.read_npy(shard / LENGTHS_FILE)[mask]
    keys = io.read_npy(shard / KEYS_FILE)[mask]
    with io.atomic_path(shard, directory=True) as tmp:
        write_vectors(tmp, vectors)
        io.write_npy(tmp / LENGTHS_FILE, lengths)
        io.write_npy(tmp / KEYS_FILE, keys)


def live_ref(current: Iterable[str], archived_commits: Iterable[str]) -> Callable[[dict[str, Any]], bool]:
    """A ref is live when a current cell wrote it (``current``: ref ids the workspace's encode
    outputs name) or when its commit is one the run archive holds."""
    current, commits = set(current), set(archived_commits)
    return lambda ref: ref.get("id") in current or (ref.get("commit") in commits)


# --- one cell through the store -----------------------------------------------------------------


def canonical_encode(encoder, texts: Sequence[str], role: str, on_encoded: Callable[[int], None] = lambda n: None):
    """Vectors of ``texts`` computed the store's way (exact-length batches), and their token counts
    as tokenised (untruncated). Any executor that encodes for the store goes through this."""
    lengths, seen = encoder.seen_lengths(texts, role)
    plan = batch_plan(encoder.config)
    with encoder.device_pool():
        vectors = encode_exact_length(
            lambda batch: encoder.encode(batch, role), texts, seen, text_keys(texts), encoder.family, plan, on_encoded
        )
    return vectors, lengths


def encode_through_store(
    texts: Sequence[str],
    store: EmbeddingStore,
    load: Callable[[], Any],
    role: str,
    desc: str,
    compute: Callable[[Any, list[str]], tuple[Any, np.ndarray]] | None = None,
) -> tuple[Assembled, dict[str, Any]]:
    """A cell's vectors: found in ``store``, or computed now (distinct missing texts only) and added.

    ``load()`` gives the Encoder and is called only when something is missing. ``compute(encoder,
    texts)`` encodes the missing texts (default :func:`canonical_encode`, in process; the Ray
    executor passes its own). Returns the assembled cell and the encoder's module protocol.
    """
    from releval.progress import tracker

    keys = text_keys(texts)
    index = store.index()
    missing = [row for row in unique_rows(keys) if keys[row].tobytes() not in index]
    computed_tokens, seconds = 0, 0.0
    if missing:
        encoder = load()
        missing_texts = [texts[row] for row in missing]
        start = time.perf_counter()
        with tracker(desc, total=len(missing_texts), unit="chunks" if role == "document" else "queries") as bar:
            if hasattr(encoder, "encode_to_store"):  # a remote family: each batch is stored as it arrives
                vectors, lengths = None, encoder.encode_to_store(store, keys[missing], missing_texts, role, bar.update)
            elif compute is None:
                vectors, lengths = canonical_encode(encoder, missing_texts, role, bar.update)
            else:
                vectors, lengths = compute(encoder, missing_texts)
                bar.update(len(missing_texts))
        seconds = time.perf_counter() - start
        cap = encoder.computed_tokens_cap(encoder.config)
        computed_tokens = int(np.minimum(lengths, cap).sum() if cap else lengths.sum())
        if vectors is not None:
            store.add(keys[missing], vectors, lengths, encoder.module_protocol())
        del vectors, index  # the store holds them now; the cell is assembled from it below
        index = store.index()
    vectors, lengths = store.gather(keys, index)
    protocol = store.description().get("encoder", {})
    return (
        Assembled(vectors, lengths, len(missing), len(texts) - len(missing), seconds, computed_tokens),
        protocol,
    )


def cell_figures(store: EmbeddingStore, ref: Path, assembled: Assembled) -> dict[str, Any]:
    """encode.json's ``store``: the namespace, the ref written, and the texts encoded now and reused."""
    return {
        "namespace": store.id,
        "ref": ref.stem,
        "encoded_chunks": assembled.computed,
        "reused_chunks": assembled.reused,
    }


THROUGHPUT_FILE = "throughput.json"
# Fewer texts than this encoded now: the throughput recorded is the namespace's last larger measurement.
THROUGHPUT_MIN_TEXTS = 256


def throughput(store: EmbeddingStore, assembled: Assembled, cell: str) -> dict[str, Any]:
    """chunks/s and tokens/s of this machine for ``cell`` (one model and chunking): measured now
    when enough texts were encoded (and recorded in the store), else this cell's last such
    measurement, else the namespace's last one (another chunking's texts: other lengths, so only
    roughly comparable); ``throughput_from`` says which. None when nothing was ever measured."""
    path = store.folder / THROUGHPUT_FILE
    recorded = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    if "cells" not in recorded:  # a file of the earlier format held the last measurement only
        recorded = {"cells": {}, "last": recorded or None}
    measured_now = assembled.computed and assembled.encode_s > 0
    if measured_now and (assembled.computed >= THROUGHPUT_MIN_TEXTS or not path.is_file()):
        figures = {
            "chunks_per_s": round(assembled.computed / assembled.encode_s, 2),
            "tokens_per_s": round(assembled.computed_tokens / assembled.encode_s, 1),
        }
        if assembled.computed >= THROUGHPUT_MIN_TEXTS:
            measurement = {**figures, "texts": assembled.computed, "measured": _now(), "cell": cell}
            recorded["cells"][cell] = recorded["last"] = measurement
            io.write_json(path, recorded)
        return {**figures, "throughput_from": "this run"}
    own = recorded["cells"].get(cell)
    found = own or recorded["last"]
    if not found:
        return {"chunks_per_s": None, "tokens_per_s": None, "throughput_from": None}
    source = f"{found['texts']} texts, {found['measured']}"
    if not own:
        source += f", of {found.get('cell') or 'another cell'}"
    return {
        "chunks_per_s": found["chunks_per_s"],
        "tokens_per_s": found["tokens_per_s"],
        "throughput_from": f"store ({source})",
    }


QUERY_LATENCY_FILE = "query_latency.json"


def latency_key(texts: Sequence[str], protocol: dict[str, Any]) -> str:
    """The hash of the exact texts timed, in order, and the protocol they were timed under."""
    digest = hashlib.sha256(json.dumps(protocol, sort_keys=True, separators=(",", ":")).encode("utf-8"))
    digest.update(text_keys(texts).tobytes())
    return digest.hexdigest()[:24]


def query_latency(
    store: EmbeddingStore,
    texts: Sequence[str],
    protocol: dict[str, Any],
    measure: Callable[[], tuple[np.ndarray, int]],
) -> tuple[np.ndarray, int, str]:
    """Per-query encoding seconds of ``texts`` (the queries a latency protocol times, in order) on
    this machine, the bytes that loading the model and encoding added to the process's peak
    memory, and where both came from: the namespace's record for exactly these texts and
    ``protocol`` (``"store (<n> queries, <when measured>)"``), else ``measure()`` now, recorded
    (``"this run"``). Like :func:`throughput`, a machine figure of the namespace: deleting the
    store costs one measurement."""
    path = store.folder / QUERY_LATENCY_FILE
    recorded = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    key = latency_key(texts, protocol)
    found = recorded.get(key)
    if found and "model_peak_bytes" in found:
        ms = np.asarray(found["encode_ms"], dtype=np.float64)
        return ms / 1000.0, int(found["model_peak_bytes"]), f"store ({len(ms)} queries, {found['measured']})"
    seconds, model_peak_bytes = measure()
    seconds = np.asarray(seconds, dtype=np.float64)
    recorded[key] = {
        "protocol": dict(protocol),
        "encode_ms": (seconds * 1000.0).tolist(),
        "model_peak_bytes": int(model_peak_bytes),
        "measured": _now(),
    }
    io.write_json(path, recorded)
    return seconds, int(model_peak_bytes), "this run"
