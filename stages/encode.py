"""DVC stage `encode@<model>-<chunking>`: chunks → vectors under the model's use protocol.

Any family (dense, sparse, static, endpoint; see releval.retrieval.encoders). Records throughput
(chunks/s, tokens/s), dimension (sparse: vocabulary size and non-zeros per chunk), wall time and
the truncation rate: the share of chunks longer than the model's max_seq_length as the model
tokenizes them (its prompt, the carried title and special tokens included), whose tails it never
sees; endpoint models also the tokens and requests sent and, where a price is declared, the cost
(releval.retrieval.endpoint). The recorded protocol names the titles term the chunks were built
under. This stage owns the truncation warning: printed here, once per model and chunking, and only
when content tokens are lost.
"""

import argparse
import functools
from pathlib import Path

import polars as pl

from releval import io, paths
from releval.config import load_params, section
from releval.retrieval import store
from releval.retrieval.chunking import titles_term
from releval.retrieval.encoders import encode_figures, load_encoder
from releval.retrieval.families import family_class
from releval.retrieval.executors import Executor
from releval.retrieval.models import ModelConfig, read_manifest
from releval.retrieval.vectors import write_vectors
from releval.stage import entry, warn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", required=True)
    parser.add_argument("--chunking", required=True)
    parser.add_argument("--chunks-dir", default=paths.CHUNKS)
    parser.add_argument("--models-dir", default=paths.MODELS)
    parser.add_argument("--out-root", default=paths.EMBEDDINGS)
    parser.add_argument("--store", default=paths.EMBEDDING_STORE, help="the embedding store (see releval store)")
    parser.add_argument("--warn-truncation", type=float, default=0.0, help="warn above this share of cut chunks")
    args = parser.parse_args()
    params = load_params()
    config = ModelConfig.from_params(args.model, section(params, f"models.{args.model}"))
    manifest = read_manifest(Path(args.models_dir) / args.model)
    texts = pl.read_parquet(Path(args.chunks_dir) / f"{args.chunking}.parquet", columns=["text"])["text"].to_list()
    executor = Executor.from_params(params.get("encode") or {})
    placed = executor.placed(config)
    cell = store.EmbeddingStore(args.store, store.namespace_terms(manifest, placed, "document"), config.family)
    load = functools.cache(lambda: load_encoder(manifest, config))  # loaded only when a vector is missing
    cell_name = f"{args.model}/{args.chunking}"
    compute, desc = executor.compute(manifest, config, "document"), f"encode {cell_name}"
    assembled, module_protocol = store.encode_through_store(texts, cell, load, "document", desc, compute)
    cut = family_class(config.family).cut(config, assembled.lengths)
    keys = store.text_keys(texts)
    ref = store.write_ref(args.store, cell, keys, cell_name, store.head_commit())
    loaded = load() if load.cache_info().currsize else None
    stats = {
        "model": args.model,
        "chunking": args.chunking,
        **encode_figures(config, manifest, assembled, cut, config.chunk_protocol(titles_term(params)), keys, loaded),
        "encoder": module_protocol,
        "chunks": len(texts),
        **store.throughput(cell, assembled, cell_name),
        "devices": list(placed.devices),
        "executor": executor.describe(),
        "store": store.cell_figures(cell, ref, assembled),
    }
    if message := cut.warning(args.model, args.chunking, args.warn_truncation):
        warn(message)
    out = Path(args.out_root) / args.model / args.chunking
    write_vectors(out, assembled.vectors)
    io.write_json(out / "encode.json", stats)
    print(
        f"encode {cell_name} ({config.family}): {len(texts)} chunks, {assembled.computed} encoded "
        f"now, {assembled.reused} from the store; {stats['chunks_per_s']} chunks/s, "
        f"truncated {cut.rate:.1%} of chunks, {cut.lost_share:.1%} of tokens"
    )


if __name__ == "__main__":
    entry(main)
