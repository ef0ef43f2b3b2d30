"""DVC stage `bm25@<chunking>`: BM25Okapi (rank-bm25 semantics, vectorised) over the chunks.

It indexes each chunk's text as the dense models read it: its document's title first under
``retriever.titles: prepend`` (see :mod:`releval.retrieval.chunking`).

Chunks scoring <= 0 are left out of a query's run: they share no term with it (or only terms
whose idf is floored at or below 0), so their order would be arbitrary, and no lexical system
would return them.
"""

import argparse
import time
from pathlib import Path

import numpy as np
import polars as pl

from releval import paths, progress
from releval.measurement import holdout
from releval.retrieval import runs
from releval.retrieval.bm25 import BM25Index, TokenizerConfig, tokenize
from releval.config import build, load_params, section
from releval.stage import entry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chunking", required=True)
    parser.add_argument("--queries", default=paths.QUERIES)
    parser.add_argument("--chunks-dir", default=paths.CHUNKS)
    parser.add_argument("--out-root", default=paths.BM25_RUNS)
    holdout.add_split_argument(parser)
    args = parser.parse_args()
    cfg = section(load_params(), "retriever.bm25")
    tokenizer = build(TokenizerConfig, cfg["tokenizer"], where="retriever.bm25.tokenizer")
    chunks = pl.read_parquet(Path(args.chunks_dir) / f"{args.chunking}.parquet", columns=["chunk_id", "doc_id", "text"])
    queries = holdout.select_queries(pl.read_parquet(args.queries), args.split, source=args.queries)
    start = time.perf_counter()
    # The summary counts chunks tokenised; its time includes the (vectorised) build after them.
    with progress.tracker(f"bm25 {args.chunking}", chunks.height, "chunks") as bar:
        documents = []
        for text in chunks["text"].to_list():
            documents.append(tokenize(text, tokenizer))
            bar.update()
        index = BM25Index.build(documents, k1=float(cfg["k1"]), b=float(cfg["b"]), epsilon=float(cfg["epsilon"]))
    build_s = time.perf_counter() - start
    positions, scores = top_k_in_blocks(
        index, [tokenize(t, tokenizer) for t in queries["text"].to_list()], int(cfg["top_k"]), args.chunking
    )
    positions = np.where(scores > 0, positions, -1)
    latencies = runs.per_query_latency(
        lambda text: index.top_k([tokenize(text, tokenizer)], int(cfg["top_k"])), queries["text"].to_list()
    )
    run = runs.from_arrays(queries["query_id"].to_list(), positions, scores, chunks)
    meta = {
        "config_id": runs.bm25_id(args.chunking),
        "kind": "bm25",
        "chunking": args.chunking,
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
    runs.write_run(Path(args.out_root) / args.chunking, run, meta)
    print(f"bm25 {meta['config_id']}: {chunks.height} chunks, {queries.height} queries")


QUERY_BLOCK = 64  # queries scored per call; a query's scores and top k do not depend on the others


def top_k_in_blocks(index: BM25Index, query_tokens: list[list[str]], k: int, chunking: str):
    """:meth:`BM25Index.top_k` of every query, a block at a time, with the queries' progress."""
    found = [
        index.top_k(query_tokens[rows], k)
        for rows in progress.blocks(len(query_tokens), QUERY_BLOCK, f"bm25 {chunking} search", "queries")
    ] or [index.top_k([], k)]
    return np.concatenate([p for p, _ in found]), np.concatenate([s for _, s in found])


if __name__ == "__main__":
    entry(main)
