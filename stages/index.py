"""DVC stage `index@<model>-<chunking>`: vectors → usearch index (HNSW, or none when exact).

A sparse cell's index is its vectors (a CSR matrix, searched exactly through its transpose, the
inverted index): nothing is built, its size and non-zeros are recorded.
"""

import argparse
import json
import time
from pathlib import Path

import numpy as np

from releval import io, paths
from releval.config import load_params, section
from releval.retrieval.dense import IndexConfig, build_index
from releval.retrieval.vectors import read_vectors
from releval.stage import entry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", required=True)
    parser.add_argument("--chunking", required=True)
    parser.add_argument("--emb-root", default=paths.EMBEDDINGS)
    parser.add_argument("--out-root", default=paths.INDEXES)
    args = parser.parse_args()
    config = IndexConfig.from_params(section(load_params(), "retriever.index"))
    emb_dir = Path(args.emb_root) / args.model / args.chunking
    encoded = json.loads((emb_dir / "encode.json").read_text(encoding="utf-8"))
    vectors = read_vectors(emb_dir)
    out = Path(args.out_root) / args.model / args.chunking
    stats = {"model": args.model, "chunking": args.chunking, "vectors": int(vectors.shape[0]), **vars(config)}
    if not isinstance(vectors, np.ndarray):  # sparse: the inverted index is built where it is searched
        stats.update({"searched_exactly": True, "index_bytes": encoded["index_bytes"], "build_s": 0.0})
    elif config.is_exact(len(vectors)):  # searched by brute force: the vectors are the index
        stats.update({"searched_exactly": True, "index_bytes": int(vectors.nbytes), "build_s": 0.0})
    else:
        start = time.perf_counter()
        index = build_index(vectors, config, desc=f"index {args.model}/{args.chunking}")
        stats["searched_exactly"] = False
        stats["build_s"] = round(time.perf_counter() - start, 3)
        with io.atomic_path(out / "index.usearch") as tmp:
            index.save(str(tmp))
        stats["index_bytes"] = (out / "index.usearch").stat().st_size
    io.write_json(out / "index.json", stats)
    print(f"index {args.model}/{args.chunking}: {stats['vectors']} vectors, {stats['index_bytes']} bytes")


if __name__ == "__main__":
    entry(main)
