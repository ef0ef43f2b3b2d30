"""What the encode, retrieve and rerank stages do with any family's model and vectors.

A model is loaded through its family's class (:mod:`releval.retrieval.families`); the vectors it
gives come in two kinds, whichever family made them, and the functions here store, search and
describe either: a float32 matrix (``embeddings.npy``, searched by usearch or exactly,
:mod:`releval.retrieval.dense`) or a canonical CSR matrix over a vocabulary (three ``.npy``
arrays, searched exactly through an inverted index, :mod:`releval.retrieval.sparse`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from releval.retrieval.families import Family, family_class
from releval.retrieval.models import ModelConfig
from releval.retrieval.truncation import Truncation


def load_encoder(manifest: dict[str, Any], config: ModelConfig) -> Family:
    """Load the model the `model` stage's manifest names, as its family does."""
    return family_class(config.family).load(manifest, config)


def pair_scores(query_vectors, chunk_vectors, query_rows: np.ndarray, chunk_rows: np.ndarray) -> np.ndarray:
    """Dot product of each (query row, chunk row) pair, float64, for any family's vectors: the same bits
    on every machine (dense: :func:`releval.retrieval.dense.grid_pair_products`; sparse: scipy sums each
    row's products in the order of its terms)."""
    if isinstance(query_vectors, np.ndarray):
        from releval.retrieval.dense import grid_bits, grid_pair_products, on_grid

        bits = grid_bits(query_vectors.shape[1])
        return grid_pair_products(on_grid(query_vectors[query_rows], bits), on_grid(chunk_vectors[chunk_rows], bits))
    products = query_vectors[query_rows].astype(np.float64).multiply(chunk_vectors[chunk_rows].astype(np.float64))
    return np.asarray(products.sum(axis=1), dtype=np.float64).reshape(-1)


def vector_stats(vectors) -> dict[str, Any]:
    """The cost figures of a cell's vectors: dimension; sparse: vocabulary and non-zeros per row."""
    if isinstance(vectors, np.ndarray):
        return {"dimension": int(vectors.shape[1]) if vectors.ndim == 2 else 0}
    from releval.retrieval.sparse import sparse_stats

    return {"dimension": int(vectors.shape[1]), **sparse_stats(vectors)}


def open_index(vectors, index_stats: dict[str, Any], index_dir: Path, index_config):
    """What a cell is searched through, built or loaded once per stage: a sparse cell's inverted
    index, the usearch HNSW graph, or nothing (dense vectors searched exactly)."""
    if not isinstance(vectors, np.ndarray):
        from releval.retrieval.sparse import inverted_index

        return inverted_index(vectors)
    if index_stats["searched_exactly"]:
        return None
    from releval.retrieval.dense import restore_index

    return restore_index(str(index_dir / "index.usearch"), index_config)


def search_cell(vectors, query_vectors, k: int, index, index_config, exact: bool | None = None):
    """Top-k chunk positions (−1: no hit) and scores of each query over one cell's vectors.

    ``index`` comes from :func:`open_index`. Sparse cells are always searched exactly (inner
    product over the inverted index); dense and static cells through the usearch index or
    exactly, as ``index_config`` decides.
    """
    if not isinstance(vectors, np.ndarray):
        from releval.retrieval.sparse import search_inverted

        return search_inverted(index, query_vectors, k)
    from releval.retrieval.dense import search

    return search(index, vectors, query_vectors, k, index_config, exact=exact)


def query_vector_figures(query_vectors) -> dict[str, Any]:
    """Sparse queries: non-zeros per query (what an inverted-index search walks); nothing for dense."""
    if isinstance(query_vectors, np.ndarray):
        return {}
    from releval.retrieval.sparse import sparse_stats

    return {"query_nonzeros_mean": round(sparse_stats(query_vectors)["nnz_per_row_mean"], 2)}


def encode_figures(
    config: ModelConfig,
    manifest: dict[str, Any],
    assembled,
    cut: Truncation,
    protocol: dict[str, Any],
    keys: np.ndarray,
    loaded: Family | None,
) -> dict[str, Any]:
    """encode.json's figures of one cell beyond its name and store: the model's revision and
    protocol, the vectors' dimension, the wall time, truncation, and the family's own figures
    (endpoint: tokens, requests and cost; ``loaded`` is the model where this run loaded it)."""
    figures = {
        "family": config.family,
        "model_revision": manifest["revision"],
        "weights_sha256": manifest["weights_sha256"],
        "protocol": protocol,
        **vector_stats(assembled.vectors),
        "wall_s": round(assembled.encode_s, 3),
        "truncated_chunks": cut.truncated,
        "truncation_rate": round(cut.rate, 6),
        "truncated_token_share": round(cut.lost_share, 6),
        "token_length_p95": float(np.percentile(cut.lengths, 95)) if len(cut.lengths) else 0.0,
    }
    return figures | family_class(config.family).encode_figures(config, assembled.lengths, keys, loaded)
