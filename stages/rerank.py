"""DVC stage `rerank@<name>`: rescore the top-N of a first-stage run.

Two kinds. `biencoder`: a second, stronger embedding model (one of `models`, used under its own
protocol) scores each query against each candidate chunk; the default grid uses this. The
`crossencoder` kind loads a sentence-transformers CrossEncoder from a user-supplied folder; no
trained cross-encoder ships in any package installable here, so that path is tested for its
mechanics only (with a randomly initialised model), never for quality.
"""

import argparse
from pathlib import Path

import polars as pl

from releval import paths
from releval.config import load_params, section
from releval.retrieval import runs
from releval.retrieval.rerank import rerank_top_n, reranked_meta, rescore_pairs, top_n_pairs
from releval.stage import entry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--name", required=True, help="an entry of grid.reranked")
    parser.add_argument("--queries", default=paths.QUERIES)
    parser.add_argument("--chunks-dir", default=paths.CHUNKS)
    parser.add_argument("--models-dir", default=paths.MODELS)
    parser.add_argument("--runs-root", default=paths.RUNS)
    parser.add_argument("--emb-root", default=paths.EMBEDDINGS)
    args = parser.parse_args()
    params = load_params()
    entry_cfg = section(params, f"grid.reranked.{args.name}")
    reranker_name = entry_cfg["reranker"]
    cfg = section(params, f"rerankers.{reranker_name}")
    base, base_meta = runs.read_run(Path(args.runs_root) / entry_cfg["run"])
    top_n = int(cfg["top_n"])
    pairs = top_n_pairs(base, top_n)
    chunks = pl.read_parquet(Path(args.chunks_dir) / f"{base_meta['chunking']}.parquet", columns=["chunk_id", "text"])
    queries = pl.read_parquet(args.queries, columns=["query_id", "text"])
    new_scores, models = rescore_pairs(
        params,
        reranker_name,
        cfg,
        pairs,
        queries,
        chunks,
        Path(args.models_dir),
        Path(args.emb_root),
        base_meta["chunking"],
        desc=f"rerank {args.name}",
    )
    reranked = rerank_top_n(base, new_scores.table, top_n)
    meta = reranked_meta(base_meta, reranker_name, cfg, pairs.height, new_scores.seconds, models, queries.height)
    out = paths.rebase(paths.RERANKED_RUNS, paths.RUNS, args.runs_root) / args.name
    runs.write_run(out, reranked, meta)
    print(f"rerank {meta['config_id']}: {pairs.height} pairs in {new_scores.seconds:.1f} s")


if __name__ == "__main__":
    entry(main)
