"""DVC stage `encode@<model>-<chunking>`: chunks → embeddings under the model's use protocol.

Records throughput (chunks/s, tokens/s), dimension, wall time and the truncation rate: the
share of chunks longer than the model's max_seq_length, whose tails the model never sees.
"""

import argparse
from pathlib import Path

import numpy as np
import polars as pl

from releval import io, paths
from releval.config import load_params, section
from releval.retrieval.models import ModelConfig, load_sentence_transformer, read_manifest, timed_encode, token_lengths
from releval.stage import entry, warn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", required=True)
    parser.add_argument("--chunking", required=True)
    parser.add_argument("--chunks-dir", default=paths.CHUNKS)
    parser.add_argument("--models-dir", default=paths.MODELS)
    parser.add_argument("--out-root", default=paths.EMBEDDINGS)
    parser.add_argument(
        "--warn-truncation", type=float, default=0.05, help="warn when more than this share of chunks is truncated"
    )
    args = parser.parse_args()
    config = ModelConfig.from_params(args.model, section(load_params(), f"models.{args.model}"))
    manifest = read_manifest(Path(args.models_dir) / args.model)
    chunks = pl.read_parquet(Path(args.chunks_dir) / f"{args.chunking}.parquet", columns=["chunk_id", "text"])
    texts = chunks["text"].to_list()
    model = load_sentence_transformer(manifest, config)
    lengths = token_lengths(model, texts, config.document_prompt)
    truncated = int((lengths > config.max_seq_length).sum())
    rate = truncated / max(len(texts), 1)
    vectors, seconds = timed_encode(model, texts, config, role="document")
    seen_tokens = int(np.minimum(lengths, config.max_seq_length).sum())
    lost_share = 1.0 - seen_tokens / max(int(lengths.sum()), 1)
    stats = {
        "model": args.model,
        "chunking": args.chunking,
        "model_revision": manifest["revision"],
        "weights_sha256": manifest["weights_sha256"],
        "protocol": config.protocol(),
        "chunks": len(texts),
        "dimension": int(vectors.shape[1]) if vectors.ndim == 2 else 0,
        "wall_s": round(seconds, 3),
        "chunks_per_s": round(len(texts) / seconds, 2) if seconds else None,
        "tokens_per_s": round(seen_tokens / seconds, 1) if seconds else None,
        "truncated_chunks": truncated,
        "truncation_rate": round(rate, 6),
        "truncated_token_share": round(lost_share, 6),
        "token_length_p95": float(np.percentile(lengths, 95)) if len(lengths) else 0.0,
        "devices": list(config.devices),
    }
    if rate > args.warn_truncation:
        warn(
            f"{args.model}/{args.chunking}: {truncated} of {len(texts)} chunks ({rate:.1%}) exceed "
            f"max_seq_length={config.max_seq_length} (prompt and special tokens included); "
            f"{lost_share:.1%} of all tokens are never encoded"
        )
    out = Path(args.out_root) / args.model / args.chunking
    io.write_npy(out / "embeddings.npy", vectors)
    io.write_json(out / "encode.json", stats)
    print(
        f"encode {args.model}/{args.chunking}: {len(texts)} chunks, {stats['chunks_per_s']} chunks/s, "
        f"truncated {rate:.1%} of chunks, {lost_share:.1%} of tokens"
    )


if __name__ == "__main__":
    entry(main)
