"""One BM25 cell (stage `bm25@<chunking>`): tokenise the chunks, build the index, search every
query, and the run with its run.json.

Chunks scoring <= 0 are left out of a query's run: they share no term with it (or only terms
whose idf is floored at or below 0), so their order would be arbitrary, and no lexical system
would return them.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import polars as pl

from releval import progress
from releval.config import build
from releval.retrieval import runs
from releval.retrieval.bm25 import BM25Index, TokenizerConfig, tokenize


def bm25_tokenizer(cfg: Mapping[str, Any]) -> TokenizerConfig:
    """The tokenizer of ``cfg`` (params' retriever.bm25), checked."""
    return build(TokenizerConfig, cfg["tokenizer"], where="retriever.bm25.tokenizer")


def bm25_cell(
    chunking: str, cfg: Mapping[str, Any], tokenizer: TokenizerConfig, chunks: pl.DataFrame, queries: pl.DataFrame
) -> tuple[pl.DataFrame, dict[str, Any]]:
    """The BM25 run of ``queries`` over ``chunks`` (chunk_id, doc_id, text) under ``cfg`` (params'
    retriever.bm25) and its :func:`bm25_tokenizer`, and its run.json."""
    start = time.perf_counter()
    # The summary counts chunks tokenised; its time includes the (vectorised) build after them.
    with progress.tracker(f"bm25 {chunking}", chunks.height, "chunks") as bar:
        documents = []
        for text in chunks["text"].to_list():
            documents.append(tokenize(text, tokenizer))
            bar.update()
        index = BM25Index.build(documents, k1=float(cfg["k1"]), b=float(cfg["b"]), epsilon=float(cfg["epsilon"]))
    build_s = time.perf_counter() - start
    positions, scores = top_k_in_blocks(
        index, [tokenize(t, tokenizer) for t in queries["text"].to_list()], int(cfg["top_k"]), chunking
    )
    positions = np.where(scores > 0, positions, -1)
    latencies = runs.per_query_latency(
        lambda text: index.top_k([tokenize(text, tokenizer)], int(cfg["top_k"])), queries["text"].to_list()
    )
    run = runs.from_arrays(queries["query_id"].to_list(), positions, scores, chunks)
    meta = {
        "config_id": runs.bm25_id(chunking),
        "kind": "bm25",
        "chunking": chunking,
        "inputs": [],
        "bm25": {k: cfg[k] for k in ("k1", "b", "epsilon", "top_k")},
        "tokenizer": dict(cfg["tokenizer"]),
        "ops": {
            "index_bytes": int(index.nbytes),
            "index_build_s": round(build_s, 3),
            **latencies,
            "peak_rss_bytes": runs.peak_rss_bytes(),
        },
        "models": {},
        "top_k": int(cfg["top_k"]),
        "queries": queries.height,
    }
    return run, meta


QUERY_BLOCK = 64  # queries scored per call; a query's scores and top k do not depend on the others


def top_k_in_blocks(
    index: BM25Index, query_tokens: list[list[str]], k: int, chunking: str
) -> tuple[np.ndarray, np.ndarray]:
    """:meth:`BM25Index.top_k` of every query, a block at a time, with the queries' progress."""
    found = [
        index.top_k(query_tokens[rows], k)
        for rows in progress.blocks(len(query_tokens), QUERY_BLOCK, f"bm25 {chunking} search", "queries")
    ] or [index.top_k([], k)]
    return np.concatenate([p for p, _ in found]), np.concatenate([s for _, s in found])
