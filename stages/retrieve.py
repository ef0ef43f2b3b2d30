"""DVC stage `retrieve@<model>-<chunking>`: encode the queries, search the index, write the run.

Any family (releval.retrieval.encoders). Also measures ANN recall@k against exact search on the
same queries (1.0 by construction where the search is exact, sparse cells always), and per-query
latency (one query encoded and searched at a time, as a live system would).
"""

import argparse
import json
from pathlib import Path

import polars as pl

from releval import paths
from releval.measurement import holdout
from releval.retrieval import runs
from releval.config import load_params, section
from releval.retrieval.dense import IndexConfig, model_run_meta, recall_against_exact
from releval.retrieval.encoders import load_encoder, open_index, query_vector_figures, read_vectors, search_cell
from releval.retrieval.models import ModelConfig, read_manifest
from releval.stage import entry, warn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", required=True)
    parser.add_argument("--chunking", required=True)
    parser.add_argument("--queries", default=paths.QUERIES)
    parser.add_argument("--chunks-dir", default=paths.CHUNKS)
    parser.add_argument("--models-dir", default=paths.MODELS)
    parser.add_argument("--emb-root", default=paths.EMBEDDINGS)
    parser.add_argument("--index-root", default=paths.INDEXES)
    parser.add_argument("--out-root", default=paths.DENSE_RUNS)
    holdout.add_split_argument(parser)
    args = parser.parse_args()
    params = load_params()
    config = ModelConfig.from_params(args.model, section(params, f"models.{args.model}"))
    index_config = IndexConfig.from_params(section(params, "retriever.index"))
    dense = section(params, "retriever.dense")
    queries = holdout.select_queries(pl.read_parquet(args.queries), args.split, source=args.queries)
    chunks = pl.read_parquet(Path(args.chunks_dir) / f"{args.chunking}.parquet", columns=["chunk_id", "doc_id"])
    emb_dir = Path(args.emb_root) / args.model / args.chunking
    index_dir = Path(args.index_root) / args.model / args.chunking
    encode_stats = json.loads((emb_dir / "encode.json").read_text())
    index_stats = json.loads((index_dir / "index.json").read_text())
    vectors = read_vectors(emb_dir, config.family)
    index = open_index(vectors, index_stats, index_dir, index_config)
    encoder = load_encoder(read_manifest(Path(args.models_dir) / args.model), config)

    query_vectors = encoder.encode(queries["text"].to_list(), role="query")
    positions, scores = search_cell(vectors, query_vectors, int(dense["top_k"]), index, index_config)
    recall_k = int(dense["recall_k"])
    exact_positions, _ = search_cell(vectors, query_vectors, recall_k, index, index_config, exact=True)
    ann_recall = recall_against_exact(positions[:, :recall_k], exact_positions)
    if ann_recall < 0.95:
        warn(
            f"{args.model}/{args.chunking}: ANN recall@{recall_k} against exact search is {ann_recall:.3f}; "
            "raise retriever.index.expansion_search or use exact search"
        )
    top_k = int(dense["top_k"])
    latencies = runs.per_query_latency(
        lambda text: search_cell(vectors, encoder.encode([text], role="query"), top_k, index, index_config),
        queries["text"].to_list(),
    )
    run = runs.from_arrays(queries["query_id"].to_list(), positions, scores, chunks)
    meta = model_run_meta(
        args.model,
        args.chunking,
        encode_stats=encode_stats,
        index_stats=index_stats,
        ann_recall={recall_k: ann_recall},
        latencies=latencies,
        top_k=top_k,
        queries=queries.height,
        query_figures=query_vector_figures(query_vectors),
    )
    runs.write_run(Path(args.out_root) / args.model / args.chunking, run, meta)
    print(
        f"retrieve {meta['config_id']}: {queries.height} queries, ANN recall@{recall_k} {ann_recall:.3f}, "
        f"p50 {latencies['latency_ms_p50']:.1f} ms"
    )


if __name__ == "__main__":
    entry(main)
