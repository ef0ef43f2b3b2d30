"""DVC stage `retrieve@<model>-<chunking>`: encode the queries, search the index, write the run.

Any family; also ANN recall@k against exact search and per-query latency, recorded in run.json
(releval.retrieval.retrieve says how each is measured).
"""

import argparse
from pathlib import Path

import polars as pl

from releval import paths
from releval.config import load_params
from releval.measurement import holdout
from releval.retrieval import runs
from releval.retrieval.retrieve import Cell, CellFolders, retrieve_cell
from releval.stage import entry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", required=True)
    parser.add_argument("--chunking", required=True)
    parser.add_argument("--queries", default=paths.QUERIES)
    parser.add_argument("--chunks-dir", default=paths.CHUNKS)
    parser.add_argument("--models-dir", default=paths.MODELS)
    parser.add_argument("--emb-root", default=paths.EMBEDDINGS)
    parser.add_argument("--index-root", default=paths.INDEXES)
    parser.add_argument("--out-root", default=paths.MODEL_RUNS)
    parser.add_argument("--store", default=paths.EMBEDDING_STORE, help="the embedding store (see releval store)")
    holdout.add_split_argument(parser)
    args = parser.parse_args()
    cell = Cell.from_params(args.model, args.chunking, load_params())
    queries = holdout.select_queries(pl.read_parquet(args.queries), args.split, source=args.queries)
    folders = CellFolders(
        chunks=Path(args.chunks_dir) / f"{args.chunking}.parquet",
        embeddings=Path(args.emb_root) / args.model / args.chunking,
        index=Path(args.index_root) / args.model / args.chunking,
        model=Path(args.models_dir) / args.model,
        store=args.store,
    )
    run, meta, summary = retrieve_cell(cell, queries, folders)
    runs.write_run(Path(args.out_root) / args.model / args.chunking, run, meta)
    print(summary)


if __name__ == "__main__":
    entry(main)
