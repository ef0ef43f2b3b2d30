"""DVC stage `bm25@<chunking>`: BM25Okapi (rank-bm25 semantics, vectorised) over the chunks.

It indexes each chunk's text as the dense models read it: its document's title first under
``retriever.titles: prepend`` (see :mod:`releval.retrieval.chunking`). Chunks scoring <= 0 are
left out of a query's run (:mod:`releval.retrieval.bm25_run` says why).
"""

import argparse
from pathlib import Path

import polars as pl

from releval import paths
from releval.config import load_params, section
from releval.measurement import holdout
from releval.retrieval import runs
from releval.retrieval.bm25_run import bm25_cell, bm25_tokenizer
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
    tokenizer = bm25_tokenizer(cfg)
    chunks = pl.read_parquet(Path(args.chunks_dir) / f"{args.chunking}.parquet", columns=["chunk_id", "doc_id", "text"])
    queries = holdout.select_queries(pl.read_parquet(args.queries), args.split, source=args.queries)
    run, meta = bm25_cell(args.chunking, cfg, tokenizer, chunks, queries)
    runs.write_run(Path(args.out_root) / args.chunking, run, meta)
    print(f"bm25 {meta['config_id']}: {chunks.height} chunks, {queries.height} queries")


if __name__ == "__main__":
    entry(main)
