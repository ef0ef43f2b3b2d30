"""DVC stage `chunk@<chunking>`: documents → token-window chunks with stable, offset-carrying ids.

``tokens`` is a chunk's length as a model input: its content tokens plus the declared
tokenizer's special tokens (2 for [CLS] … [SEP]), so a c256 chunk fits a model whose
max_seq_length is 256. The stats record both numbers. Under ``retriever.titles: prepend`` each
chunk's text starts with its document's title, whose tokens every window reserves (a title over
half a window is cut); the stats record the term, how many documents carry a title and how many
titles were cut.
"""

import argparse
import time
from pathlib import Path

import polars as pl

from releval import io, paths
from releval.retrieval.chunking import (
    chunk_documents,
    chunk_stats,
    content_tokens,
    load_tokenizer,
    special_tokens,
    title_stats,
    titles_term,
)
from releval.config import load_params, section
from releval.errors import InputError
from releval.retrieval.models import resolve_folder
from releval.stage import entry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chunking", required=True)
    parser.add_argument("--docs", default=paths.DOCS)
    parser.add_argument("--out-dir", default=paths.CHUNKS)
    args = parser.parse_args()
    params = load_params()
    cfg = section(params, f"chunkings.{args.chunking}")
    for key in ("tokens", "overlap", "tokenizer"):
        if key not in cfg:
            raise InputError("missing", file="params.yaml", field=f"chunkings.{args.chunking}.{key}")
    for key in ("tokens", "overlap"):
        if not isinstance(cfg[key], int) or isinstance(cfg[key], bool):
            raise InputError(
                "must be an integer number of tokens", file="params.yaml", field=f"chunkings.{args.chunking}.{key}"
            )
    tokenizer_source = str(cfg["tokenizer"])
    tokenizer_path = resolve_folder(tokenizer_source) if ":" in tokenizer_source else Path(tokenizer_source)
    tokenizer = load_tokenizer(tokenizer_path)
    try:
        content = content_tokens(tokenizer, cfg["tokens"], cfg["overlap"])
    except InputError as exc:
        key = "tokens" if exc.field == "size" else "overlap"
        raise InputError(exc.detail, file="params.yaml", field=f"chunkings.{args.chunking}.{key}") from None
    titles = titles_term(params)
    docs = pl.read_parquet(args.docs)
    start = time.perf_counter()
    chunks = chunk_documents(docs, tokenizer, int(cfg["tokens"]), int(cfg["overlap"]), titles)
    stats = chunk_stats(chunks, docs)
    stats.update(
        {
            "chunking": args.chunking,
            "tokens": cfg["tokens"],
            "content_tokens": content,
            "special_tokens": special_tokens(tokenizer),
            "overlap": cfg["overlap"],
            "tokenizer": tokenizer_source,
            **title_stats(docs, tokenizer, int(cfg["tokens"]), int(cfg["overlap"]), titles),
            "wall_s": round(time.perf_counter() - start, 3),
        }
    )
    out_dir = Path(args.out_dir)
    io.write_parquet(out_dir / f"{args.chunking}.parquet", chunks)
    io.write_json(out_dir / f"{args.chunking}.json", stats)
    print(
        f"chunk {args.chunking}: {chunks.height} chunks of up to {content} content tokens "
        f"(+{cfg['tokens'] - content} special) from {docs.height} documents"
    )


if __name__ == "__main__":
    entry(main)
