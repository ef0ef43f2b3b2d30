"""Token-window chunking with character offsets that map every chunk back to its document.

A chunking's ``size`` is what a chunk occupies as a model input: its content tokens plus the
special tokens the declared tokenizer adds around one sequence ([CLS] … [SEP] for BERT
tokenizers, so 2). A window holds ``size - specials`` content tokens, and a chunk of c256
therefore fits a model whose max_seq_length is 256 exactly when the model tokenizes as the
declared tokenizer does (every grid model shares one chunking; a model's own tokenizer and
prompt are counted where it encodes, see :mod:`releval.retrieval.models`).

A document's text is tokenized once, without special tokens. Windows start every ``content -
overlap`` tokens and keep the pre-tokenizer's words whole: a start or an end that would fall
inside a word (before a WordPiece ``##`` piece) moves back to the word's first token, so a chunk
tokenized alone gives the tokens it had in the document; only a word longer than a window is
split. Without overlap the windows tile the document; the last window is the first one that
reaches the end. Every chunk is then re-tokenized on its own, as a model reads it: ``n_tokens``
is that count, and a window whose text alone needs more than its content tokens (a tokenizer
whose pieces depend on context) is shortened until it fits. A chunk's text is exactly
``doc.text[start:end]``, from the first token's start offset to the last token's end offset, and
its id ``f"{doc_id}#{start}-{end}"`` depends only on the document, the tokenizer and (size,
overlap). Titles are not chunked: offsets refer to ``text`` alone.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Iterator

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

    ``size``: tokens a chunk occupies as a model input, the tokenizer's special tokens included
    (see the module docstring). Columns (:data:`releval.tables.CHUNKS`): chunk_id, doc_id,
    start, end (character offsets into the document's text), n_tokens (content tokens of the
    chunk's text tokenized alone), text. Documents whose text has no tokens give no chunk.
    """
    content = content_tokens(tokenizer, size, overlap)
    stride = content - overlap
    tokenizer = _without_truncation(tokenizer)
    columns: dict[str, list] = {name: [] for name in CHUNKS.columns}
    for doc_ids, texts in _batches(docs, ENCODE_BATCH_CHARS):
        encodings = tokenizer.encode_batch(texts, add_special_tokens=False)
        spans = [_spans(encoding, content, stride) for encoding in encodings]
        own = iter(_own_token_counts(tokenizer, [text[s:e] for text, doc in zip(texts, spans) for s, e in doc]))
        counts = [[next(own) for _ in doc] for doc in spans]
        for index, (text, encoding) in enumerate(zip(texts, encodings)):
            if any(count > content for count in counts[index]):  # rare: pieces that depend on context
                spans[index] = _fitted_spans(tokenizer, text, encoding, content, stride)
                counts[index] = _own_token_counts(tokenizer, [text[s:e] for s, e in spans[index]])
        for doc_id, text, doc_spans, doc_counts in zip(doc_ids, texts, spans, counts):
            for (start, end), count in zip(doc_spans, doc_counts):
                columns["chunk_id"].append(f"{doc_id}#{start}-{end}")
                columns["doc_id"].append(doc_id)
                columns["start"].append(start)
                columns["end"].append(end)
                columns["n_tokens"].append(count)
                columns["text"].append(text[start:end])
    chunks = pl.DataFrame(columns, schema=CHUNKS.schema)
    _require_unique_ids(chunks, size)
    return chunks


def special_tokens(tokenizer: Tokenizer) -> int:
    """How many special tokens the tokenizer adds around one sequence ([CLS] … [SEP]: 2)."""
    processor = tokenizer.post_processor
    return 0 if processor is None else processor.num_special_tokens_to_add(False)


def content_tokens(tokenizer: Tokenizer, size: int, overlap: int) -> int:
    """Content tokens of a ``size``-token window: ``size`` less the tokenizer's special tokens.

    Errors name the field (``size`` or ``overlap``) of a window that cannot hold content
    or whose overlap leaves no stride.
    """
    if size <= 0:
        raise InputError(f"must be a positive number of tokens, found {size}", field="size")
    if overlap < 0:
        raise InputError(f"must be zero or more tokens, found {overlap}", field="overlap")
    specials = special_tokens(tokenizer)
    content = size - specials
    if content <= 0:
        raise InputError(
            f"must be more than the {specials} special tokens the tokenizer adds, found {size}", field="size"
        )
    if overlap >= content:
        room = f"size ({size})" if not specials else f"size less the tokenizer's {specials} special tokens ({content})"
        raise InputError(f"must be smaller than {room}, found {overlap}", field="overlap")
    return content


def token_windows(
    n_tokens: int,
    size: int,
    stride: int,
    is_word_start: Callable[[int], bool] | None = None,
    fits: Callable[[int, int], bool] | None = None,
) -> Iterator[tuple[int, int]]:
    """Half-open token ranges ``[first, last)`` of at most ``size`` tokens, until one reaches the end.

    Each window starts ``stride`` tokens after the previous one. With ``is_word_start``, windows
    keep words whole: a start moves back, and an end that would split a word moves back, to the
    nearest word start after the window's first token (a word longer than the window is split);
    without it every token starts a word. With ``stride == size`` the windows tile the tokens.
    ``fits(first, last)``: whether a window's text fits on its own; one that does not is
    shortened until it does, and the next window starts no later than its end.
    """
    if n_tokens == 0:
        return

    def word_start_at_or_before(index: int, first: int) -> int:
        if is_word_start is None:
            return index
        found = index
        while found > first and not is_word_start(found):
            found -= 1
        return found if found > first else index

    first, previous_last = 0, 0
    while True:
        last = min(first + size, n_tokens)
        if last < n_tokens and word_start_at_or_before(last, first) > previous_last:
            last = word_start_at_or_before(last, first)  # else a word too long to keep whole: split it
        while fits is not None and last - first > 1 and not fits(first, last):
            last = word_start_at_or_before(last - 1, first)
        yield first, last
        if last == n_tokens:
            return
        first, previous_last = word_start_at_or_before(min(first + stride, last), first), last


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


def _word_starts(encoding: Encoding) -> Callable[[int], bool]:
    """Whether a token begins a word (the pre-tokenizer's unit), not a piece like WordPiece ``##s``."""
    return lambda index: encoding.token_to_word(index) != encoding.token_to_word(index - 1)


def _own_token_counts(tokenizer: Tokenizer, texts: list[str]) -> list[int]:
    """Content tokens of each text tokenized on its own (special tokens not counted)."""
    return [len(encoding) for encoding in tokenizer.encode_batch(texts, add_special_tokens=False)]


def _spans(
    encoding: Encoding, content: int, stride: int, fits: Callable[[int, int], bool] | None = None
) -> list[tuple[int, int]]:
    """Character spans of one document's windows (:func:`token_windows`, words kept whole)."""
    windows = token_windows(len(encoding), content, stride, _word_starts(encoding), fits)
    return [_char_span(encoding, first, last) for first, last in windows]


def _fitted_spans(
    tokenizer: Tokenizer, text: str, encoding: Encoding, content: int, stride: int
) -> list[tuple[int, int]]:
    """One document's spans, each window shortened until its text alone has at most ``content`` tokens."""

    def fits(first: int, last: int) -> bool:
        start, end = _char_span(encoding, first, last)
        return _own_token_counts(tokenizer, [text[start:end]])[0] <= content

    return _spans(encoding, content, stride, fits)


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
