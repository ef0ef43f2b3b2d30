"""Dense index and search over usearch: HNSW or exact, with scores where higher is better."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from releval.config import build
from releval.errors import InputError
from releval.retrieval import runs


@dataclasses.dataclass(frozen=True)
class IndexConfig:
    metric: str = "cos"
    dtype: str = "f32"
    connectivity: int = 16
    expansion_add: int = 128
    expansion_search: int = 64
    exact: bool = False

    def __post_init__(self):
        if self.metric not in ("cos", "ip", "l2sq"):
            raise InputError("expected cos, ip or l2sq", file="params.yaml", field="retriever.index.metric")
        if self.dtype not in ("f32", "f16", "i8"):
            raise InputError("expected f32, f16 or i8", file="params.yaml", field="retriever.index.dtype")

    @classmethod
    def from_params(cls, data: dict) -> "IndexConfig":
        return build(cls, data, where="retriever.index")


def build_index(vectors: np.ndarray, config: IndexConfig):
    from usearch.index import Index

    index = Index(
        ndim=vectors.shape[1],
        metric=config.metric,
        dtype=config.dtype,
        connectivity=config.connectivity,
        expansion_add=config.expansion_add,
        expansion_search=config.expansion_search,
    )
    index.add(np.arange(len(vectors), dtype=np.uint64), vectors)
    return index


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
    from usearch.index import search as brute_force

    k = min(k, len(vectors))
    if exact if exact is not None else config.exact:
        matches = brute_force(vectors, queries, k, config.metric, exact=True)
    else:
        matches = index.search(queries, k)
    keys = np.asarray(matches.keys).reshape(len(queries), -1).astype(np.int64)
    distances = np.asarray(matches.distances).reshape(len(queries), -1)
    # One query gives a Matches (no counts; only real hits), a batch gives BatchMatches.
    counts = np.asarray(matches.counts if hasattr(matches, "counts") else [keys.shape[1]]).reshape(-1)
    filled = np.arange(keys.shape[1])[None, :] < counts[:, None]
    keys = np.where(filled, keys, -1)
    # Slots past a query's count hold whatever usearch left there (NaN, garbage): never computed on.
    similarities = similarity_from_distance(np.where(filled, distances, 0.0), config.metric)
    return keys, np.where(filled, similarities, -np.inf)


def recall_against_exact(approx: np.ndarray, exact: np.ndarray) -> float:
    """Mean share of each query's exact top-k that the approximate search also returned."""
    k = exact.shape[1]
    hits = [len(set(a[a >= 0]) & set(e[e >= 0])) / max((e >= 0).sum(), 1) for a, e in zip(approx[:, :k], exact)]
    return float(np.mean(hits)) if hits else 1.0


def dense_run_meta(
    model: str,
    chunking: str,
    *,
    encode_stats: Mapping[str, Any],
    index_stats: Mapping[str, Any],
    ann_recall: Mapping[int, float],
    latencies: Mapping[str, float],
    top_k: int,
    queries: int,
) -> dict[str, Any]:
    """run.json of a dense run: what was encoded and indexed, at what cost, and the model's use protocol."""
    return {
        "config_id": runs.dense_id(model, chunking),
        "kind": "dense",
        "model": model,
        "chunking": chunking,
        "inputs": [],
        "ops": {
            "dimension": encode_stats["dimension"],
            "chunks_per_s": encode_stats["chunks_per_s"],
            "tokens_per_s": encode_stats["tokens_per_s"],
            "truncation_rate": encode_stats["truncation_rate"],
            "truncated_token_share": encode_stats["truncated_token_share"],
            "index_bytes": index_stats["index_bytes"],
            "index_build_s": index_stats["build_s"],
            **{f"ann_recall@{k}": round(value, 6) for k, value in ann_recall.items()},
            **latencies,
            "peak_rss_bytes": runs.peak_rss_bytes(),  # the query side: model, vectors and index loaded
        },
        "models": {
            model: {
                "revision": encode_stats["model_revision"],
                "weights_sha256": encode_stats["weights_sha256"],
                "protocol": encode_stats["protocol"],
            }
        },
        "top_k": top_k,
        "queries": queries,
    }
