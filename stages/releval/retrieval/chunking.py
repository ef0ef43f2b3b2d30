"""Token-window chunking with character offsets that map every chunk back to its document.

A document's text is tokenized once, without special tokens, by the declared tokenizer. Windows
of ``size`` tokens start every ``size - overlap`` tokens; the last window may be shorter and is
the first one that reaches the end (no window lies wholly inside the previous one). A chunk's
text is exactly ``doc.text[start:end]``, from the first token's start offset to the last token's
end offset, and its id ``f"{doc_id}#{start}-{end}"`` depends only on the document, the tokenizer
and (size, overlap). Titles are not chunked: offsets refer to ``text`` alone.

A window may begin inside a word (a WordPiece ``##`` continuation); re-tokenizing such a chunk on
its own can give a token or two more than ``n_tokens``, which counts tokens in document context.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Iterator

import polars as pl
from tokenizers import Encoding, Tokenizer

from releval.errors import InputError
from releval.tables import CHUNKS

# Characters per encode_batch call: large batches keep the tokenizer's threads busy; a character
# budget rather than a document count bounds memory when documents are long.
ENCODE_BATCH_CHARS = 4_000_000
STATS_QUANTILES = (0.05, 0.10, 0.25, 0.50, 0.75, 0.90, 0.95, 0.99)


def load_tokenizer(path_or_dir: str | os.PathLike) -> Tokenizer:
    """Load a ``tokenizer.json`` (or the one inside a folder), with truncation and padding off.

    Model folders often ship tokenizer.json with truncation on (all-MiniLM-L6-v2: 128 tokens);
    left on, it would silently cut every long document short before chunking.
    """
    path = Path(path_or_dir)
    file = path / "tokenizer.json" if path.is_dir() else path
    if not file.is_file():
        raise InputError("no tokenizer.json here", file=str(file), field="tokenizer")
    try:
        tokenizer = Tokenizer.from_file(str(file))
    except Exception as exc:  # tokenizers raises a bare Exception for unreadable files
        raise InputError(f"not a tokenizers file: {exc}", file=str(file), field="tokenizer") from None
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def chunk_documents(docs: pl.DataFrame, tokenizer: Tokenizer, size: int, overlap: int) -> pl.DataFrame:
    """Split ``docs`` (doc_id, text) into token windows; one row per chunk, in document order.

    Columns (:data:`releval.tables.CHUNKS`): chunk_id, doc_id, start, end (character offsets
    into the document's text), n_tokens, text. Documents whose text has no tokens give no chunk.
    """
    stride = _stride(size, overlap)
    tokenizer = _without_truncation(tokenizer)
    columns: dict[str, list] = {name: [] for name in CHUNKS.columns}
    for doc_ids, texts in _batches(docs, ENCODE_BATCH_CHARS):
        encodings = tokenizer.encode_batch(texts, add_special_tokens=False)
        for doc_id, text, encoding in zip(doc_ids, texts, encodings):
            for first, last in token_windows(len(encoding), size, stride):
                start, end = _char_span(encoding, first, last)
                columns["chunk_id"].append(f"{doc_id}#{start}-{end}")
                columns["doc_id"].append(doc_id)
                columns["start"].append(start)
                columns["end"].append(end)
                columns["n_tokens"].append(last - first)
                columns["text"].append(text[start:end])
    chunks = pl.DataFrame(columns, schema=CHUNKS.schema)
    _require_unique_ids(chunks, size)
    return chunks


def token_windows(n_tokens: int, size: int, stride: int) -> Iterator[tuple[int, int]]:
    """Half-open token ranges ``[first, last)``: every ``stride`` tokens, until one reaches the end."""
    if n_tokens == 0:
        return
    count = 1 + max(0, math.ceil((n_tokens - size) / stride))
    for k in range(count):
        first = k * stride
        yield first, min(first + size, n_tokens)


def chunk_stats(chunks: pl.DataFrame, docs: pl.DataFrame) -> dict:
    """Counts and token-length distribution of a chunking, as plain JSON-serialisable values.

    Quantiles use the nearest observed value, so they are token counts that occur.
    """
    chunked = chunks["doc_id"].n_unique()
    stats: dict = {
        "chunks": chunks.height,
        "documents": docs.height,
        "documents_with_chunks": chunked,
        "documents_without_chunks": docs.height - chunked,
        "chunks_per_document": _per_document(chunks, chunked),
        "tokens": None,
        "token_quantiles": None,
    }
    if chunks.height:
        n_tokens = chunks["n_tokens"]
        stats["tokens"] = {
            "min": int(n_tokens.min()),
            "mean": round(float(n_tokens.mean()), 3),
            "p50": _quantile(n_tokens, 0.50),
            "p95": _quantile(n_tokens, 0.95),
            "max": int(n_tokens.max()),
            "total": int(n_tokens.sum()),
        }
        stats["token_quantiles"] = {f"p{round(q * 100)}": _quantile(n_tokens, q) for q in STATS_QUANTILES}
    return stats


def spans_to_chunks(judged: pl.DataFrame, chunks: pl.DataFrame) -> pl.DataFrame:
    """Map judged documents or character spans onto the chunks that overlap them.

    ``judged`` has ``doc_id`` and any other columns (query_id, grade, ...), optionally ``start``
    and ``end``: a character span in the document's text, half-open; both null (or the columns
    absent) means the whole document. Returns the judged columns plus ``chunk_id``, one row per
    (judged row, overlapping chunk), in judged order then chunk order. Judged rows that overlap
    no chunk (documents without text, or not in this chunking) are dropped; anti-join on
    ``doc_id`` to find them. Span errors name the judged row (1-based) as the line.
    """
    absent = [name for name in ("start", "end") if name not in judged.columns]
    judged = _with_spans(judged)
    keys = chunks.select("doc_id", "chunk_id", pl.col("start").alias("_chunk_start"), pl.col("end").alias("_chunk_end"))
    overlaps = pl.col("start").is_null() | (
        (pl.col("_chunk_start") < pl.col("end")) & (pl.col("start") < pl.col("_chunk_end"))
    )
    return (
        judged.with_row_index("_row")
        .join(keys, on="doc_id", how="inner")
        .filter(overlaps)
        .sort("_row", "_chunk_start", maintain_order=True)
        .drop("_row", "_chunk_start", "_chunk_end", *absent)
    )


def _with_spans(judged: pl.DataFrame) -> pl.DataFrame:
    """Give ``judged`` Int64 start/end columns (null = whole document) after checking its spans."""
    for name in ("start", "end"):
        if name not in judged.columns:
            judged = judged.with_columns(pl.lit(None, dtype=pl.Int64).alias(name))
    judged = judged.with_columns(pl.col("start", "end").cast(pl.Int64))
    rows = judged.with_row_index("_row", offset=1)
    half_open = rows.filter(pl.col("start").is_null() != pl.col("end").is_null())
    if half_open.height:
        row = half_open.row(0, named=True)
        raise InputError(
            f"span of doc {row['doc_id']!r} has only one of start/end",
            file="<judged spans>",
            line=row["_row"],
            field="start" if row["start"] is None else "end",
        )
    empty = rows.filter(pl.col("end") <= pl.col("start"))
    if empty.height:
        row = empty.row(0, named=True)
        raise InputError(
            f"span of doc {row['doc_id']!r} is empty or reversed: [{row['start']}, {row['end']})",
            file="<judged spans>",
            line=row["_row"],
            field="end",
        )
    return judged


def _stride(size: int, overlap: int) -> int:
    if size <= 0:
        raise InputError(f"must be a positive number of tokens, found {size}", field="size")
    if overlap < 0:
        raise InputError(f"must be zero or more tokens, found {overlap}", field="overlap")
    if overlap >= size:
        raise InputError(f"must be smaller than size ({size}), found {overlap}", field="overlap")
    return size - overlap


def _require_unique_ids(chunks: pl.DataFrame, size: int) -> None:
    """Byte-level tokenizers split one character into several tokens; tiny windows inside such a
    character all get the same character span, hence the same id."""
    repeated = chunks.filter(pl.col("chunk_id").is_duplicated())
    if repeated.height:
        raise InputError(
            f"windows of {size} tokens give several chunks the same character span "
            f"(first: {repeated['chunk_id'][0]!r}); the tokenizer splits characters into "
            "several tokens, so use a larger size",
            field="size",
        )


def _without_truncation(tokenizer: Tokenizer) -> Tokenizer:
    """The tokenizer itself, or a copy with truncation and padding off (the caller's is untouched)."""
    if tokenizer.truncation is None and tokenizer.padding is None:
        return tokenizer
    copy = Tokenizer.from_str(tokenizer.to_str())
    copy.no_truncation()
    copy.no_padding()
    return copy


def _batches(docs: pl.DataFrame, max_chars: int) -> Iterator[tuple[list[str], list[str]]]:
    """Consecutive (doc_ids, texts) batches of about ``max_chars`` characters (at least one document)."""
    doc_ids, texts = docs["doc_id"].to_list(), docs["text"].to_list()
    first = chars = 0
    for index, text in enumerate(texts):
        chars += len(text)
        if chars >= max_chars:
            yield doc_ids[first : index + 1], texts[first : index + 1]
            first, chars = index + 1, 0
    if first < len(texts):
        yield doc_ids[first:], texts[first:]


def _char_span(encoding: Encoding, first: int, last: int) -> tuple[int, int]:
    # token_to_chars on the two boundary tokens only: building encoding.offsets would create a
    # Python tuple for every token of every document.
    return encoding.token_to_chars(first)[0], encoding.token_to_chars(last - 1)[1]


def _per_document(chunks: pl.DataFrame, chunked: int) -> dict | None:
    if not chunked:
        return None
    counts = chunks.group_by("doc_id").len()["len"]
    return {"mean": round(chunks.height / chunked, 3), "max": int(counts.max())}


def _quantile(values: pl.Series, q: float) -> int:
    return int(values.quantile(q, interpolation="nearest"))
