"""DVC stage `retrieve@<model>-<chunking>`: encode the queries, search the index, write the run.

Also measures ANN recall@k against exact search on the same queries, and per-query latency
(one query encoded and searched at a time, as a live system would).
"""

import argparse
import json
import time
from pathlib import Path

import numpy as np
import polars as pl

from releval import io
from releval.measurement import holdout
from releval.retrieval import runs
from releval.config import load_params, section
from releval.retrieval.dense import IndexConfig, recall_against_exact, restore_index, search
from releval.retrieval.models import ModelConfig, encode, load_sentence_transformer, read_manifest
from releval.stage import entry, warn

LATENCY_SAMPLE = 100


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", required=True)
    parser.add_argument("--chunking", required=True)
    parser.add_argument("--queries", default="data/work/queries.parquet")
    parser.add_argument("--chunks-dir", default="data/work/chunks")
    parser.add_argument("--models-dir", default="data/models")
    parser.add_argument("--emb-root", default="data/work/emb")
    parser.add_argument("--index-root", default="data/work/index")
    parser.add_argument("--out-root", default="data/work/runs/dense")
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
    vectors = io.read_npy(emb_dir / "embeddings.npy")
    index = None if index_config.exact else restore_index(str(index_dir / "index.usearch"), index_config)
    model = load_sentence_transformer(read_manifest(Path(args.models_dir) / args.model), config)

    query_vectors = encode(model, queries["text"].to_list(), config, role="query")
    positions, scores = search(index, vectors, query_vectors, int(dense["top_k"]), index_config)
    recall_k = int(dense["recall_k"])
    exact_positions, _ = search(index, vectors, query_vectors, recall_k, index_config, exact=True)
    ann_recall = recall_against_exact(positions[:, :recall_k], exact_positions)
    if ann_recall < 0.95:
        warn(
            f"{args.model}/{args.chunking}: ANN recall@{recall_k} against exact search is {ann_recall:.3f}; "
            "raise retriever.index.expansion_search or use exact search"
        )
    latencies = _per_query_latency(
        model, config, index, vectors, queries["text"].to_list()[:LATENCY_SAMPLE], int(dense["top_k"]), index_config
    )
    run = runs.from_arrays(queries["query_id"].to_list(), positions, scores, chunks)
    encode_stats = json.loads((emb_dir / "encode.json").read_text())
    index_stats = json.loads((index_dir / "index.json").read_text())
    meta = {
        "config_id": runs.dense_id(args.model, args.chunking),
        "kind": "dense",
        "model": args.model,
        "chunking": args.chunking,
        "inputs": [],
        "ops": {
            "dimension": encode_stats["dimension"],
            "chunks_per_s": encode_stats["chunks_per_s"],
            "tokens_per_s": encode_stats["tokens_per_s"],
            "truncation_rate": encode_stats["truncation_rate"],
            "truncated_token_share": encode_stats["truncated_token_share"],
            "index_bytes": index_stats["index_bytes"],
            "index_build_s": index_stats["build_s"],
            f"ann_recall@{recall_k}": round(ann_recall, 6),
            **latencies,
            "peak_rss_bytes": runs.peak_rss_bytes(),  # the query side: model, vectors and index loaded
        },
        "models": {
            args.model: {
                "revision": encode_stats["model_revision"],
                "weights_sha256": encode_stats["weights_sha256"],
                "protocol": encode_stats["protocol"],
            }
        },
        "top_k": int(dense["top_k"]),
        "queries": queries.height,
    }
    runs.write_run(Path(args.out_root) / args.model / args.chunking, run, meta)
    print(
        f"retrieve {meta['config_id']}: {queries.height} queries, ANN recall@{recall_k} {ann_recall:.3f}, "
        f"p50 {latencies['latency_ms_p50']:.1f} ms"
    )


def _per_query_latency(model, config, index, vectors, texts, k, index_config) -> dict[str, float]:
    seconds = []
    for text in texts:
        start = time.perf_counter()
        query_vector = encode(model, [text], config, role="query")
        search(index, vectors, query_vector, k, index_config)
        seconds.append(time.perf_counter() - start)
    return runs.latency_summary(np.array(seconds))


if __name__ == "__main__":
    entry(main)
