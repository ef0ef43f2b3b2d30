"""One interface over the retriever families: load a model, encode texts, store and search vectors.

Every stage that encodes (encode, retrieve, rerank) goes through :func:`load_encoder`, so the
family decides only *how* texts become vectors and how those vectors are stored and searched:

* dense and static models give an ``(n, dimension)`` float32 matrix, stored as ``embeddings.npy``
  and searched by usearch (HNSW) or exactly (:mod:`releval.retrieval.dense`);
* sparse models give a canonical CSR matrix over the vocabulary, stored as three ``.npy`` arrays
  and searched exactly through the inverted index (:mod:`releval.retrieval.sparse`);
* endpoint models (:mod:`releval.retrieval.endpoint`) give dense vectors computed by a remote server.

:class:`Family` is the interface a loaded model offers the stages. The endpoint family implements it
in one class of its own module; dense, sparse and static still share :class:`Encoder`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import platform
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, ContextManager, Protocol

import numpy as np

from releval import KERNELS
from releval.errors import InputError
from releval.retrieval.models import (
    ModelConfig,
    encode,
    load_sentence_transformer,
    model_folder,
    source_kind,
    token_lengths,
    Truncation,
)


class Family(Protocol):
    """A loaded model of one retriever family: what the encode, retrieve and rerank stages call.

    A family that also has ``encode_to_store(store, keys, texts, role, on_encoded) -> token counts``
    writes its vectors to the embedding store itself, batch by batch as they are computed
    (:func:`releval.retrieval.store.encode_through_store`), and ``figures()`` gives what it sent.
    """

    config: ModelConfig
    manifest: dict[str, Any]

    @property
    def family(self) -> str: ...

    def encode(self, texts: Sequence[str], role: str) -> Any:
        """Vectors of ``texts`` as a query ("query") or a document ("document")."""

    def device_pool(self) -> ContextManager[Any]:
        """A context inside which several encode calls share the family's devices."""

    def seen_lengths(self, texts: Sequence[str], role: str) -> tuple[np.ndarray, np.ndarray]:
        """Each text's token count as tokenised, and as the model sees it once cut."""

    def token_lengths(self, texts: Sequence[str], role: str) -> np.ndarray:
        """Each text's token count (prompt and special tokens included): truncation accounting."""

    def truncation(self, texts: Sequence[str], role: str = "document") -> Truncation:
        """How the model's input limit cuts ``texts``."""

    def module_protocol(self) -> dict[str, Any]:
        """The manifest and protocol terms the loaded model adds to its config (recorded per run)."""


@dataclasses.dataclass
class Encoder:
    """A loaded model of any family under its declared protocol."""

    config: ModelConfig
    manifest: dict[str, Any]
    model: Any
    pool: Any = None  # several devices: sentence-transformers' process pool, while device_pool() is open

    @property
    def family(self) -> str:
        return self.config.family

    def prompt(self, role: str) -> str:
        return self.config.query_prompt if role == "query" else self.config.document_prompt

    def encode(self, texts: Sequence[str], role: str):
        """``role`` is "query" or "document"; dense/static: float32 matrix, sparse: CSR matrix."""
        if self.family == "sparse":
            from releval.retrieval.sparse import encode_sparse

            return encode_sparse(self.model, texts, self.config, role)
        if self.family == "static":
            from releval.retrieval.static import encode_static

            return encode_static(self.model, texts, self.config, role)
        return encode(self.model, texts, self.config, role, pool=self.pool)

    @contextlib.contextmanager
    def device_pool(self) -> Iterator["Encoder"]:
        """Several devices (dense models): one process pool for every encode call inside."""
        if len(self.config.devices) < 2 or self.family != "dense" or self.pool is not None:
            yield self
            return
        self.pool = self.model.start_multi_process_pool(list(self.config.devices))
        try:
            yield self
        finally:
            self.model.stop_multi_process_pool(self.pool)
            self.pool = None

    def seen_lengths(self, texts: Sequence[str], role: str) -> tuple[np.ndarray, np.ndarray]:
        """Each text's token count as tokenised (prompt and special tokens included), and as the
        model sees it once max_seq_length cuts it (static models never cut)."""
        lengths = self.token_lengths(texts, role)
        if self.family == "static":
            return lengths, lengths
        return lengths, np.minimum(lengths, self.config.max_seq_length)

    def token_lengths(self, texts: Sequence[str], role: str) -> np.ndarray:
        """Each text's token count as the model tokenizes it (prompt and special tokens included)."""
        if self.family == "static":
            from releval.retrieval.static import static_token_lengths

            return static_token_lengths(self.model, texts, self.prompt(role))
        return token_lengths(self.model, texts, self.prompt(role))

    def truncation(self, texts: Sequence[str], role: str = "document") -> Truncation:
        """How max_seq_length cuts ``texts`` under the role's prompt (static models never cut)."""
        if self.family == "static":
            from releval.retrieval.static import static_truncation

            return static_truncation(self.model, texts, self.config, role)
        return Truncation(self.token_lengths(texts, role), self.config.max_seq_length)

    def module_protocol(self) -> dict[str, Any]:
        """What the loaded model does beyond the config (pooling, activation, vocabulary)."""
        if self.family == "sparse":
            from releval.retrieval.sparse import sparse_protocol

            return sparse_protocol(self.model)
        if self.family == "static":
            from releval.retrieval.static import static_protocol

            return static_protocol(self.model)
        return dense_protocol(self.model)


def dense_protocol(model) -> dict[str, Any]:
    """The sentence-transformers modules after the transformer (pooling, normalisation), by name."""
    modules = [type(module).__name__ for module in model]
    pooling = next((module for module in model if type(module).__name__ == "Pooling"), None)
    return {
        "modules": modules,
        "pooling": _pooling_mode(pooling),
    }


def _pooling_mode(pooling) -> str | list[str] | None:
    if pooling is None:
        return None
    mode = getattr(pooling, "pooling_mode", None)
    return list(mode) if isinstance(mode, (list, tuple)) else mode


def load_encoder(manifest: dict[str, Any], config: ModelConfig) -> Family:
    """Load the model the `model` stage's manifest names, for its family."""
    if config.family == "endpoint":
        from releval.retrieval.endpoint import EndpointEncoder

        return EndpointEncoder.load(manifest, config)
    check_kernels(config)
    if config.family == "sparse":
        from releval.retrieval.sparse import load_sparse_encoder

        model = load_sparse_encoder(model_folder(manifest), config)
    elif config.family == "static":
        from releval.retrieval.static import load_static, static_weights_sha256

        _, name = source_kind(config.source)
        if static_weights_sha256(name, config.dimension) != manifest["weights_sha256"]:
            raise InputError(
                "model weights differ from those the `model` stage recorded; run `dvc repro`",
                file=config.source,
                field="weights_sha256",
            )
        model = load_static(name, config.dimension, config)
    else:
        model = load_sentence_transformer(manifest, config)
    return Encoder(config, manifest, model)


def check_kernels(config: ModelConfig) -> None:
    """torch runs the kernels :data:`releval.KERNELS` pins (a transformer on an x86 CPU), or the vectors
    would be this machine's, not those every other machine computes: refused, naming why."""
    if not KERNELS or config.family == "static" or not str(config.devices[0]).startswith("cpu"):
        return
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return
    import torch

    wanted = KERNELS["ATEN_CPU_CAPABILITY"].upper()
    running = torch.backends.cpu.get_cpu_capability()
    if running != wanted:
        raise InputError(
            f"torch runs its {running} kernels, not the {wanted} ones releval pins so that vectors are the same "
            "bits on every machine: torch computed something before releval was imported (import releval "
            "first), or this CPU lacks AVX2 (RELEVAL_KERNELS=native lets torch choose; the vectors are then "
            "this machine's own)",
            field=f"models.{config.name}",
        )


def truncation_from_lengths(config: ModelConfig, lengths: np.ndarray) -> Truncation:
    """How max_seq_length cuts texts of these token counts (static models never cut)."""
    if config.family == "static":
        from releval.retrieval.static import NO_TRUNCATION

        return Truncation(lengths, NO_TRUNCATION)
    return Truncation(lengths, config.max_seq_length)


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


def query_cost_figures(config: ModelConfig, lengths: np.ndarray) -> dict[str, Any]:
    """run.json's ``query_cost_per_1k`` of a priced endpoint model: 1,000 queries of the mean token count
    of ``lengths`` (the queries' tokens as the endpoint counted them); nothing for any other config."""
    if config.family != "endpoint" or config.price_per_million_tokens is None or not len(lengths):
        return {}
    from releval.retrieval.endpoint import cost

    return {"query_cost_per_1k": cost(config, int(np.sum(lengths)) * 1000 / len(lengths))}


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
    if config.family == "endpoint":
        from releval.retrieval.endpoint import encode_figures as endpoint_figures

        _, first = np.unique(keys, axis=0, return_index=True)  # each distinct text once: it is sent once
        figures |= endpoint_figures(config, assembled.lengths[first], loaded)
    return figures
