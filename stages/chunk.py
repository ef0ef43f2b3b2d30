"""DVC stage `chunk@<chunking>`: documents → token-window chunks with stable, offset-carrying ids.

``tokens`` is a chunk's length as a model input: its content tokens plus the declared
tokenizer's special tokens (2 for [CLS] … [SEP]), so a c256 chunk fits a model whose
max_seq_length is 256. The stats record both numbers. Under ``retriever.titles: prepend`` each
chunk's text starts with its document's title, whose tokens every window reserves (a title over
half a window is cut); the stats record the term, how many documents carry a title and how many
titles were cut.
"""

import argparse
from pathlib import Path

import polars as pl

from releval import io, paths
from releval.config import load_params
from releval.retrieval.chunking import (
    chunk_corpus,
    chunking_config,
    load_tokenizer,
    titles_term,
    window_content,
)
from releval.retrieval.models import resolve_folder
from releval.stage import entry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chunking", required=True)
    parser.add_argument("--docs", default=paths.DOCS)
    parser.add_argument("--out-dir", default=paths.CHUNKS)
    args = parser.parse_args()
    params = load_params()
    cfg = chunking_config(params, args.chunking)
    tokenizer_source = str(cfg["tokenizer"])
    tokenizer_path = resolve_folder(tokenizer_source) if ":" in tokenizer_source else Path(tokenizer_source)
    tokenizer = load_tokenizer(tokenizer_path)
    window_content(tokenizer, cfg, args.chunking)  # a window that cannot hold content stops here
    titles = titles_term(params)
    docs = pl.read_parquet(args.docs)
    chunks, stats = chunk_corpus(docs, tokenizer, cfg, args.chunking, titles)
    out_dir = Path(args.out_dir)
    io.write_parquet(out_dir / f"{args.chunking}.parquet", chunks)
    io.write_json(out_dir / f"{args.chunking}.json", stats)
    content = stats["content_tokens"]
    print(
        f"chunk {args.chunking}: {chunks.height} chunks of up to {content} content tokens "
        f"(+{cfg['tokens'] - content} special) from {docs.height} documents"
    )


if __name__ == "__main__":
    entry(main)
