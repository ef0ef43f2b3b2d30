"""Dense index and search over usearch: HNSW or exact, with scores where higher is better."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from releval.config import build
from releval.errors import InputError
from releval.progress import Progress, tracker
from releval.retrieval import runs


@dataclasses.dataclass(frozen=True)
class IndexConfig:
    """How a cell's vectors are searched.

    ``exact: auto`` (the default) searches exactly below ``exact_below`` vectors and through an
    HNSW graph above: exact search is deterministic (ties broken by chunk position) and costs
    about a millisecond per query at 20,000 384-d vectors on one core. usearch builds the graph
    byte for byte the same only on one thread (``build_threads: 1``, measured); with more, the
    graph and so the ANN rankings differ from build to build.
    """

    metric: str = "cos"
    dtype: str = "f32"
    connectivity: int = 16
    expansion_add: int = 128
    expansion_search: int = 64
    exact: bool | str = "auto"
    exact_below: int = 100_000
    build_threads: int = 1

    def __post_init__(self):
        if self.metric not in ("cos", "ip", "l2sq"):
            raise InputError("expected cos, ip or l2sq", file="params.yaml", field="retriever.index.metric")
        if self.dtype not in ("f32", "f16", "i8"):
            raise InputError("expected f32, f16 or i8", file="params.yaml", field="retriever.index.dtype")
        if self.exact not in (True, False, "auto"):
            raise InputError("expected true, false or auto", file="params.yaml", field="retriever.index.exact")
        if isinstance(self.build_threads, bool) or not isinstance(self.build_threads, int) or self.build_threads < 0:
            raise InputError(
                "expected an integer >= 0 (0: all cores)", file="params.yaml", field="retriever.index.build_threads"
            )

    def is_exact(self, n_vectors: int) -> bool:
        """Whether a cell of ``n_vectors`` vectors is searched exactly."""
        return self.exact is True or (self.exact == "auto" and n_vectors < self.exact_below)

    @classmethod
    def from_params(cls, data: dict) -> "IndexConfig":
        return build(cls, data, where="retriever.index")


def build_index(vectors: np.ndarray, config: IndexConfig, desc: str | None = None):
    """The HNSW graph of ``vectors`` (key: row position); with ``desc``, its progress as vectors are added.

    The vectors go in as one call, in row order: usearch's progress callback only reports, and the
    graph (so the saved bytes) is the one built without it (measured).
    """
    from usearch.index import Index

    index = Index(
        ndim=vectors.shape[1],
        metric=config.metric,
        dtype=config.dtype,
        connectivity=config.connectivity,
        expansion_add=config.expansion_add,
        expansion_search=config.expansion_search,
    )
    with tracker(desc, len(vectors), "vectors") as bar:
        keys = np.arange(len(vectors), dtype=np.uint64)
        index.add(keys, vectors, threads=config.build_threads, progress=_usearch_callback(bar))
    return index


def _usearch_callback(bar: Progress):
    """usearch's progress callback (vectors added so far, total) -> keep going, advancing ``bar``."""

    def report(added, total):
        bar.update(max(added - bar.done, 0))  # usearch reports a running count, from any of its threads
        return True

    # usearch checks the annotations are the types int, int -> bool; this module's would be strings.
    report.__annotations__ = {"added": int, "total": int, "return": bool}
    return report


def restore_index(path: str, config: IndexConfig):
    from usearch.index import Index

    index = Index.restore(path)
    index.expansion_search = config.expansion_search
    return index


def similarity_from_distance(distances: np.ndarray, metric: str) -> np.ndarray:
    """usearch returns distances (cos/ip: 1 − similarity; l2sq: squared distance); flip to 'higher is better'."""
    distances = distances.astype(np.float64)
    return -distances if metric == "l2sq" else 1.0 - distances


def search(
    index, vectors: np.ndarray, queries: np.ndarray, k: int, config: IndexConfig, exact: bool | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Top-k positions (−1 where fewer hits) and similarities for each query."""
    k = min(k, len(vectors))
    if exact if exact is not None else config.is_exact(len(vectors)):
        return exact_search(vectors, queries, k, config.metric)
    matches = index.search(queries, k)
    keys = np.asarray(matches.keys).reshape(len(queries), -1).astype(np.int64)
    distances = np.asarray(matches.distances).reshape(len(queries), -1)
    # One query gives a Matches (no counts; only real hits), a batch gives BatchMatches.
    counts = np.asarray(matches.counts if hasattr(matches, "counts") else [keys.shape[1]]).reshape(-1)
    # k columns always, so that the results of blocks of queries (one query included) stack.
    keys = np.pad(keys, ((0, 0), (0, k - keys.shape[1])))
    distances = np.pad(distances, ((0, 0), (0, k - distances.shape[1])))
    filled = np.arange(keys.shape[1])[None, :] < counts[:, None]
    keys = np.where(filled, keys, -1)
    # Slots past a query's count hold whatever usearch left there (NaN, garbage): never computed on.
    similarities = similarity_from_distance(np.where(filled, distances, 0.0), config.metric)
    return keys, np.where(filled, similarities, -np.inf)


EXACT_BATCH = 64  # queries scored at once: 64 x 100,000 float64 similarities is 51 MB


def exact_search(vectors: np.ndarray, queries: np.ndarray, k: int, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """Top-k by brute force in float64, equal similarities ordered by position: the same on every run.

    Similarities are usearch's (cos: cosine, ip: inner product, l2sq: minus the squared distance),
    so exact and HNSW scores are on one scale.
    """
    base = np.asarray(vectors, dtype=np.float64)
    if metric == "cos":
        base = base / np.maximum(np.linalg.norm(base, axis=1, keepdims=True), np.finfo(np.float64).tiny)
    k = min(k, len(base))
    keys = np.empty((len(queries), k), dtype=np.int64)
    scores = np.empty((len(queries), k), dtype=np.float64)
    for start in range(0, len(queries), EXACT_BATCH):
        batch = np.asarray(queries[start : start + EXACT_BATCH], dtype=np.float64)
        if metric == "cos":
            batch = batch / np.maximum(np.linalg.norm(batch, axis=1, keepdims=True), np.finfo(np.float64).tiny)
        if metric == "l2sq":
            sims = -((batch**2).sum(1)[:, None] - 2.0 * batch @ base.T + (base**2).sum(1)[None, :])
        else:
            sims = batch @ base.T
        # Stable sort of the negated scores: ties keep position order, whatever the BLAS threads.
        order = np.argsort(-sims, axis=1, kind="stable")[:, :k]
        keys[start : start + len(batch)] = order
        scores[start : start + len(batch)] = np.take_along_axis(sims, order, axis=1)
    return keys, scores


def recall_against_exact(approx: np.ndarray, exact: np.ndarray) -> float:
    """Mean share of each query's exact top-k that the approximate search also returned."""
    k = exact.shape[1]
    hits = [len(set(a[a >= 0]) & set(e[e >= 0])) / max((e >= 0).sum(), 1) for a, e in zip(approx[:, :k], exact)]
    return float(np.mean(hits)) if hits else 1.0


def model_run_meta(
    model: str,
    chunking: str,
    *,
    encode_stats: Mapping[str, Any],
    index_stats: Mapping[str, Any],
    ann_recall: Mapping[int, float],
    latencies: Mapping[str, float],
    latency_from: str,
    peak_rss_bytes: int,
    top_k: int,
    queries: int,
    query_figures: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """run.json of one model's run (any family): what was encoded and indexed, at what cost, and
    the model's use protocol. ``kind`` is the family (dense, sparse or static). ``latency_from``
    (where the encoding part of the latency came from) sits beside ``ops``, not in it: scoring sorts
    ``ops`` by name into cost figures, kept with the quality figures, and machine figures
    (measurement.operations), and this note changes from run to run."""
    family = encode_stats.get("family", "dense")
    sparse_figures = {
        name: encode_stats[key]
        for name, key in (
            ("vocabulary_size", "vocabulary_size"),
            ("doc_nonzeros_mean", "nnz_per_row_mean"),
            ("doc_nonzeros_p95", "nnz_per_row_p95"),
        )
        if key in encode_stats
    }
    return {
        "config_id": runs.dense_id(model, chunking),
        "kind": family,
        "model": model,
        "chunking": chunking,
        "inputs": [],
        "ops": {
            "dimension": encode_stats["dimension"],
            **sparse_figures,
            **dict(query_figures or {}),
            "chunks_per_s": encode_stats["chunks_per_s"],
            "tokens_per_s": encode_stats["tokens_per_s"],
            "truncation_rate": encode_stats["truncation_rate"],
            "truncated_token_share": encode_stats["truncated_token_share"],
            "index_bytes": index_stats["index_bytes"],
            "index_build_s": index_stats["build_s"],
            **{f"ann_recall@{k}": round(value, 6) for k, value in ann_recall.items()},
            **latencies,
            "peak_rss_bytes": peak_rss_bytes,  # the query side: model, vectors and index loaded
        },
        "latency_from": latency_from,
        "models": {
            model: {
                "revision": encode_stats["model_revision"],
                "weights_sha256": encode_stats["weights_sha256"],
                "protocol": encode_stats["protocol"],
                **({"encoder": encode_stats["encoder"]} if "encoder" in encode_stats else {}),
            }
        },
        "top_k": top_k,
        "queries": queries,
    }
