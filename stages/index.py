"""DVC stage `index@<model>-<chunking>`: embeddings → usearch index (HNSW, or none when exact)."""

import argparse
import time
from pathlib import Path

from releval import io, paths
from releval.config import load_params, section
from releval.retrieval.dense import IndexConfig, build_index
from releval.stage import entry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", required=True)
    parser.add_argument("--chunking", required=True)
    parser.add_argument("--emb-root", default=paths.EMBEDDINGS)
    parser.add_argument("--out-root", default=paths.INDEXES)
    args = parser.parse_args()
    config = IndexConfig.from_params(section(load_params(), "retriever.index"))
    vectors = io.read_npy(Path(args.emb_root) / args.model / args.chunking / "embeddings.npy")
    out = Path(args.out_root) / args.model / args.chunking
    stats = {
        "model": args.model,
        "chunking": args.chunking,
        "vectors": int(len(vectors)),
        **{k: v for k, v in vars(config).items()},
    }
    stats["searched_exactly"] = config.is_exact(len(vectors))
    if stats["searched_exactly"]:  # searched by brute force: the vectors are the index
        stats.update({"index_bytes": int(vectors.nbytes), "build_s": 0.0})
    else:
        start = time.perf_counter()
        index = build_index(vectors, config)
        stats["build_s"] = round(time.perf_counter() - start, 3)
        with io.atomic_path(out / "index.usearch") as tmp:
            index.save(str(tmp))
        stats["index_bytes"] = (out / "index.usearch").stat().st_size
    io.write_json(out / "index.json", stats)
    print(f"index {args.model}/{args.chunking}: {stats['vectors']} vectors, {stats['index_bytes']} bytes")


if __name__ == "__main__":
    entry(main)
