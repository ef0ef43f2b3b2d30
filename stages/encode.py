"""DVC stage `encode@<model>-<chunking>`: chunks → vectors under the model's use protocol.

Any family (dense, sparse, static; see releval.retrieval.encoders). Records throughput
(chunks/s, tokens/s), dimension (sparse: vocabulary size and non-zeros per chunk), wall time and
the truncation rate: the share of chunks longer than the model's max_seq_length as the model
tokenizes them (its prompt, the carried title and special tokens included), whose tails it never
sees. The recorded protocol names the titles term the chunks were built under. This stage owns
the truncation warning: it is printed here, once per model and chunking, and only when content
tokens are lost.
"""

import argparse
from pathlib import Path

import numpy as np
import polars as pl

from releval import io, paths
from releval.config import load_params, section
from releval.retrieval.chunking import titles_term
from releval.retrieval import store
from releval.retrieval.encoders import load_encoder, truncation_from_lengths, vector_stats
from releval.retrieval.vectors import write_vectors
from releval.retrieval.executors import Executor
from releval.retrieval.models import ModelConfig, read_manifest
from releval.stage import entry, warn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", required=True)
    parser.add_argument("--chunking", required=True)
    parser.add_argument("--chunks-dir", default=paths.CHUNKS)
    parser.add_argument("--models-dir", default=paths.MODELS)
    parser.add_argument("--out-root", default=paths.EMBEDDINGS)
    parser.add_argument("--store", default=paths.EMBEDDING_STORE, help="the embedding store (see releval store)")
    parser.add_argument(
        "--warn-truncation",
        type=float,
        default=0.0,
        help="warn when more than this share of chunks loses content tokens (default 0: any)",
    )
    args = parser.parse_args()
    params = load_params()
    config = ModelConfig.from_params(args.model, section(params, f"models.{args.model}"))
    titles = titles_term(params)
    manifest = read_manifest(Path(args.models_dir) / args.model)
    texts = pl.read_parquet(Path(args.chunks_dir) / f"{args.chunking}.parquet", columns=["text"])["text"].to_list()
    executor = Executor.from_params(params.get("encode") or {})
    placed = executor.placed(config)
    cell = store.EmbeddingStore(args.store, store.namespace_terms(manifest, placed, "document"), config.family)
    assembled, module_protocol = store.encode_through_store(
        texts,
        cell,
        lambda: load_encoder(manifest, config),
        "document",
        f"encode {args.model}/{args.chunking}",
        compute=executor.compute(manifest, config, "document"),
    )
    cut = truncation_from_lengths(config, assembled.lengths)
    cell_name = f"{args.model}/{args.chunking}"
    throughput = store.throughput(cell, assembled, cell_name)
    ref = store.write_ref(args.store, cell, store.text_keys(texts), cell_name, store.head_commit())
    vectors = assembled.vectors
    stats = {
        "model": args.model,
        "chunking": args.chunking,
        "family": config.family,
        "model_revision": manifest["revision"],
        "weights_sha256": manifest["weights_sha256"],
        "protocol": config.chunk_protocol(titles),
        "encoder": module_protocol,
        "chunks": len(texts),
        **vector_stats(vectors),
        "wall_s": round(assembled.encode_s, 3),
        **throughput,
        "truncated_chunks": cut.truncated,
        "truncation_rate": round(cut.rate, 6),
        "truncated_token_share": round(cut.lost_share, 6),
        "token_length_p95": float(np.percentile(cut.lengths, 95)) if len(cut.lengths) else 0.0,
        "devices": list(placed.devices),
        "executor": executor.describe(),
        "store": {
            "namespace": cell.id,
            "ref": ref.stem,
            "encoded_chunks": assembled.computed,
            "reused_chunks": assembled.reused,
        },
    }
    message = cut.warning(args.model, args.chunking, args.warn_truncation)
    if message:
        warn(message)
    out = Path(args.out_root) / args.model / args.chunking
    write_vectors(out, vectors)
    io.write_json(out / "encode.json", stats)
    print(
        f"encode {args.model}/{args.chunking} ({config.family}): {len(texts)} chunks, {assembled.computed} encoded "
        f"now, {assembled.reused} from the store; {stats['chunks_per_s']} chunks/s, "
        f"truncated {cut.rate:.1%} of chunks, {cut.lost_share:.1%} of tokens"
    )


if __name__ == "__main__":
    entry(main)
