"""One retrieval cell (stage `retrieve@<model>-<chunking>`): encode the queries, search the index,
build the run and its run.json.

Any family (releval.retrieval.encoders). Also measures ANN recall@k against exact search on the
same queries (1.0 by construction where the search is exact, sparse cells always), and per-query
latency (one query encoded and searched at a time, as a live system would): search times measured
now, encoding times from the embedding store's record for these queries where it has one. The
model is loaded only when something needs it (query vectors or encoding times not in the store);
where it is not, the peak memory adds what the model added to the peak when it was measured.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from releval import progress
from releval.config import section
from releval.retrieval import encoders, runs, store
from releval.retrieval.dense import EXACT_BATCH, IndexConfig, model_run_meta, recall_against_exact
from releval.retrieval.encoders import open_index, query_vector_figures, search_cell
from releval.retrieval.families import family_class
from releval.retrieval.models import ModelConfig, read_manifest
from releval.retrieval.vectors import read_vectors
from releval.stage import warn


@dataclasses.dataclass(frozen=True)
class CellFolders:
    """Where one cell's inputs are: the chunking's chunks file, the cell's embeddings and index
    folders, the model's folder (its manifest) and the embedding store."""

    chunks: Path
    embeddings: Path
    index: Path
    model: Path
    store: str


@dataclasses.dataclass(frozen=True)
class Cell:
    """One cell's terms from params.yaml: the model, the chunking, the index and the search depths."""

    model: str
    chunking: str
    config: ModelConfig
    index_config: IndexConfig
    top_k: int
    recall_k: int

    @classmethod
    def from_params(cls, model: str, chunking: str, params: Mapping[str, Any]) -> Cell:
        config = ModelConfig.from_params(model, section(params, f"models.{model}"))
        index_config = IndexConfig.from_params(section(params, "retriever.index"))
        dense = section(params, "retriever.dense")
        return cls(model, chunking, config, index_config, int(dense["top_k"]), int(dense["recall_k"]))


def retrieve_cell(cell: Cell, queries: pl.DataFrame, folders: CellFolders) -> tuple[pl.DataFrame, dict[str, Any], str]:
    """The run of ``cell`` for ``queries``, its run.json and a one-line summary. Records the
    queries' vectors (and encoding times) in the embedding store as it goes."""
    model, chunking, config, index_config = cell.model, cell.chunking, cell.config, cell.index_config
    family = family_class(config.family)
    chunks = pl.read_parquet(folders.chunks, columns=["chunk_id", "doc_id"])
    encode_stats = json.loads((folders.embeddings / "encode.json").read_text())
    index_stats = json.loads((folders.index / "index.json").read_text())
    vectors = read_vectors(folders.embeddings)
    index = open_index(vectors, index_stats, folders.index, index_config)
    manifest = read_manifest(folders.model)
    encoder = functools.cache(lambda: encoders.load_encoder(manifest, config))  # loaded once, when first needed
    peak_without_model = runs.peak_rss_bytes()  # vectors and index loaded

    queries_cell = f"{model}/{chunking} queries"
    query_store = store.EmbeddingStore(folders.store, store.namespace_terms(manifest, config, "query"), config.family)
    texts = queries["text"].to_list()
    assembled, _ = store.encode_through_store(texts, query_store, encoder, "query", f"encode {queries_cell}")
    store.write_ref(folders.store, query_store, store.text_keys(texts), queries_cell, store.head_commit())
    query_vectors = assembled.vectors
    top_k, recall_k = cell.top_k, cell.recall_k
    (positions, scores), (exact_positions, _) = search_in_blocks(
        lambda rows: (
            search_cell(vectors, query_vectors[rows], top_k, index, index_config),
            search_cell(vectors, query_vectors[rows], recall_k, index, index_config, exact=True),
        ),
        queries.height,
        f"retrieve {model}/{chunking}",
    )
    ann_recall = recall_against_exact(positions[:, :recall_k], exact_positions)
    if ann_recall < 0.95:
        warn(
            f"{model}/{chunking}: ANN recall@{recall_k} against exact search is {ann_recall:.3f}; "
            "raise retriever.index.expansion_search or use exact search"
        )
    # Latency: each query's encoding time (the store's record for these queries, else measured now
    # with the model, loaded before the clock starts) plus its search time, measured now.
    sample = runs.latency_sample(texts)
    encode_seconds, model_peak_bytes, latency_from = store.query_latency(
        query_store,
        sample,
        runs.LATENCY_PROTOCOL,
        lambda: (runs.query_encoding_seconds(encoder(), sample), runs.peak_rss_bytes() - peak_without_model),
    )
    search_seconds = runs.per_query_seconds(
        lambda row: search_cell(vectors, query_vectors[row : row + 1], top_k, index, index_config), range(len(sample))
    )
    latencies = runs.encode_and_search_latency(encode_seconds, search_seconds)
    run = runs.from_arrays(queries["query_id"].to_list(), positions, scores, chunks)
    meta = model_run_meta(
        model,
        chunking,
        encode_stats=encode_stats,
        index_stats=index_stats,
        ann_recall={recall_k: ann_recall},
        latencies=latencies,
        latency_from=latency_from,
        # serving holds the model: where this run never loaded it, the peak plus what loading it
        # and encoding queries added to the peak when the encoding times were measured
        peak_rss_bytes=runs.peak_rss_bytes() + (0 if encoder.cache_info().currsize else model_peak_bytes),
        top_k=top_k,
        queries=queries.height,
        query_figures=query_vector_figures(query_vectors) | family.query_cost_figures(config, assembled.lengths),
    )
    summary = (
        f"retrieve {meta['config_id']}: {queries.height} queries, ANN recall@{recall_k} {ann_recall:.3f}, "
        f"p50 {latencies['latency_ms_p50']:.1f} ms (encoding times from {latency_from})"
    )
    return run, meta, summary


# Queries searched per call, with the progress shown between calls. A multiple of the exact
# search's batch, so that it multiplies the same query batches as one call would (same floats);
# HNSW and sparse searches treat each query on its own.
QUERY_BLOCK = EXACT_BATCH

Searches = tuple[tuple[np.ndarray, np.ndarray], ...]  # (positions, scores) of each search of a block


def search_in_blocks(search: Callable[[slice], Searches], n_queries: int, desc: str) -> Searches:
    """``search(rows)`` (the top-k and the exact top-recall_k of those queries) for all the queries,
    a block at a time, with their progress."""
    found = [search(rows) for rows in progress.blocks(n_queries, QUERY_BLOCK, desc, "queries")]
    if not found:  # no queries: the searches' own empty results, of the right widths
        return search(slice(0, 0))
    return tuple(tuple(np.concatenate(arrays) for arrays in zip(*parts)) for parts in zip(*found))
