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
reaches the end. ``n_tokens`` is a chunk's count tokenized on its own, as a model reads it (taken
from the document's tokens where the tokenizer makes that exact, else by tokenizing the chunk
again: :class:`_OwnTokenCounter`), and a window whose text alone needs more than its content
tokens (a tokenizer whose pieces depend on context) is shortened until it fits. A chunk's body is exactly
``doc.text[start:end]``, from the first token's start offset to the last token's end offset, and
its id ``f"{doc_id}#{start}-{end}"`` depends only on the document, the tokenizer, (size, overlap)
and the titles term.

Titles (``retriever.titles``): ``prepend`` (the default, as BEIR and MTEB do) or ``ignore``. Under
``prepend`` every chunk of a titled document carries the title: the chunk's ``text``, what BM25,
the dense models and the rerankers all read, is ``title + " " + body`` (:func:`retriever_text`),
and ``start``/``end`` still locate the body in the document's text. Each window reserves the
title's tokens, so a chunk with its title still fits its size as a model input; a title longer
than :func:`title_budget` (half a window's content tokens, and always less than the window less
the overlap) is cut to its first that-many tokens, back to a word start where a word fits.
``ignore``, a document without a title (empty or only whitespace) and a title without tokens give
exactly the chunks they gave before titles were read. Titles are not chunked on their own: a
document whose text has no tokens gives no chunk, titled or not.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Callable, Iterator

import polars as pl
from tokenizers import Encoding, Tokenizer

from releval.config import section
from releval.errors import InputError
from releval.tables import CHUNKS

# Characters per encode_batch call: large batches keep the tokenizer's threads busy; a character
# budget rather than a document count bounds memory when documents are long.
ENCODE_BATCH_CHARS = 4_000_000
STATS_QUANTILES = (0.05, 0.10, 0.25, 0.50, 0.75, 0.90, 0.95, 0.99)
TITLES = ("prepend", "ignore")  # the values of the titles term; the first is the default
TITLES_FIELD = "retriever.titles"


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


def chunk_documents(
    docs: pl.DataFrame, tokenizer: Tokenizer, size: int, overlap: int, titles: str = TITLES[0]
) -> pl.DataFrame:
    """Split ``docs`` (doc_id, text, optional title) into token windows; one row per chunk, in document order.

    ``size``: tokens a chunk occupies as a model input, the tokenizer's special tokens and the
    carried title included (see the module docstring). ``titles``: ``prepend`` or ``ignore``.
    Columns (:data:`releval.tables.CHUNKS`): chunk_id, doc_id, start, end (character offsets of
    the body into the document's text), n_tokens (content tokens of the chunk's text tokenized
    alone, title included), text (what retrievers read: :func:`retriever_text`). Documents whose
    text has no tokens give no chunk.
    """
    content = content_tokens(tokenizer, size, overlap)
    tokenizer = _without_truncation(tokenizer)
    carried = _carried_titles(tokenizer, _titles(docs, titles), title_budget(content, overlap))
    counter = _OwnTokenCounter(tokenizer)
    frames = [
        _chunk_batch(counter, doc_ids, texts, heads, content, overlap)
        for doc_ids, texts, heads in _batches(docs, carried, ENCODE_BATCH_CHARS)
    ]
    # One contiguous frame, as one built at once: the parquet bytes depend on how a frame is split.
    chunks = pl.concat(frames, rechunk=True) if frames else pl.DataFrame(schema=CHUNKS.schema)
    _require_unique_ids(chunks, size)
    return chunks


def _chunk_batch(
    counter: "_OwnTokenCounter",
    doc_ids: list[str],
    texts: list[str],
    heads: list[tuple[str, int]],
    content: int,
    overlap: int,
) -> pl.DataFrame:
    """The chunks of one batch of documents (:func:`chunk_documents`), in document order."""
    tokenizer = counter.tokenizer
    encodings = tokenizer.encode_batch(texts, add_special_tokens=False)
    # each window reserves its title's tokens; the body's windows hold the rest
    windows = [(content - reserved, content - reserved - overlap) for _, reserved in heads]
    ranges = [_token_ranges(encoding, *window) for encoding, window in zip(encodings, windows)]
    spans = [[_char_span(encoding, *r) for r in doc] for encoding, doc in zip(encodings, ranges)]
    pieces = [_chunk_texts(text, title, doc) for text, (title, _), doc in zip(texts, heads, spans)]
    counts = counter.counts(texts, heads, encodings, ranges, pieces)
    for index, (text, encoding, (title, _)) in enumerate(zip(texts, encodings, heads)):
        if any(count > content for count in counts[index]):  # rare: pieces that depend on context
            spans[index] = _fitted_spans(tokenizer, text, title, encoding, content, *windows[index])
            pieces[index] = _chunk_texts(text, title, spans[index])
            counts[index] = _own_token_counts(tokenizer, pieces[index])
    rows = [
        (f"{doc_id}#{start}-{end}", doc_id, start, end, count, piece)
        for doc_id, doc_spans, doc_counts, doc_pieces in zip(doc_ids, spans, counts, pieces)
        for (start, end), count, piece in zip(doc_spans, doc_counts, doc_pieces)
    ]
    return pl.DataFrame(rows, schema=CHUNKS.schema, orient="row")


def retriever_text(title: str, body: str) -> str:
    """What every retriever reads for a chunk: ``title + " " + body`` (BEIR's joining), or the body alone."""
    return f"{title} {body}" if title else body


def title_budget(content: int, overlap: int) -> int:
    """Content tokens a title may take in a window of ``content`` tokens: at most half of them, and
    fewer than ``content - overlap``, so that the body's windows still advance."""
    return max(min(content // 2, content - overlap - 1), 0)


def titles_term(params: Mapping[str, Any]) -> str:
    """The titles term of ``params`` (``retriever.titles``): ``prepend`` or ``ignore``."""
    return _checked_titles(section(dict(params), TITLES_FIELD), file="params.yaml", field=TITLES_FIELD)


def title_stats(docs: pl.DataFrame, tokenizer: Tokenizer, size: int, overlap: int, titles: str) -> dict[str, Any]:
    """The titles term and what it did: documents whose chunks carry a title, and titles cut to
    :func:`title_budget` tokens (counts; JSON-serialisable)."""
    own = _titles(docs, titles)
    budget = title_budget(content_tokens(tokenizer, size, overlap), overlap)
    carried = [title for title, _ in _carried_titles(_without_truncation(tokenizer), own, budget)]
    return {
        "titles": titles,
        "titled_documents": sum(1 for title in carried if title),
        "titles_cut": sum(1 for title, whole in zip(carried, own) if title and title != whole),
    }


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


def chunking_config(params: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    """params' ``chunkings.<name>``, with its ``tokens``, ``overlap`` and ``tokenizer`` present and
    the token counts integers (else an InputError naming the field)."""
    cfg = section(dict(params), f"chunkings.{name}")
    for key in ("tokens", "overlap", "tokenizer"):
        if key not in cfg:
            raise InputError("missing", file="params.yaml", field=f"chunkings.{name}.{key}")
    for key in ("tokens", "overlap"):
        if not isinstance(cfg[key], int) or isinstance(cfg[key], bool):
            raise InputError("must be an integer number of tokens", file="params.yaml", field=f"chunkings.{name}.{key}")
    return cfg


def window_content(tokenizer: Tokenizer, cfg: Mapping[str, Any], name: str) -> int:
    """:func:`content_tokens` of chunking ``name``'s window, its errors naming the params.yaml field."""
    try:
        return content_tokens(tokenizer, cfg["tokens"], cfg["overlap"])
    except InputError as exc:
        key = "tokens" if exc.field == "size" else "overlap"
        raise InputError(exc.detail, file="params.yaml", field=f"chunkings.{name}.{key}") from None


def chunk_corpus(
    docs: pl.DataFrame, tokenizer: Tokenizer, cfg: Mapping[str, Any], name: str, titles: str
) -> tuple[pl.DataFrame, dict[str, Any]]:
    """Chunking ``name`` (its checked :func:`chunking_config`) of ``docs``: the chunks and the
    stats the chunk stage writes beside them (:func:`chunk_stats`, the chunking's terms, the
    titles' figures and the wall time)."""
    content = window_content(tokenizer, cfg, name)
    start = time.perf_counter()
    chunks = chunk_documents(docs, tokenizer, int(cfg["tokens"]), int(cfg["overlap"]), titles)
    stats = chunk_stats(chunks, docs)
    stats.update(
        {
            "chunking": name,
            "tokens": cfg["tokens"],
            "content_tokens": content,
            "special_tokens": special_tokens(tokenizer),
            "overlap": cfg["overlap"],
            "tokenizer": str(cfg["tokenizer"]),
            **title_stats(docs, tokenizer, int(cfg["tokens"]), int(cfg["overlap"]), titles),
            "wall_s": round(time.perf_counter() - start, 3),
        }
    )
    return chunks, stats


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


class _OwnTokenCounter:
    """Each chunk's ``n_tokens``: the content tokens of its text (title included) tokenized alone.

    Most chunks are not tokenized again. A word-local tokenizer (:func:`_word_local`: BERT's) gives
    a text the tokens of its words, each word (the pre-tokenizer's: a run of letters and digits, or
    one punctuation character, between whitespace) tokenized on its own. A window that starts and
    ends at word boundaries therefore has, alone, exactly the tokens it had in its document, and
    ``title + " " + body`` the title's tokens plus the body's. Only the other chunks are tokenized
    again: those of any other tokenizer, windows that split a word longer than a window, and
    documents whose text or title holds an added token's literal (``[SEP]``), which such a
    tokenizer matches before splitting words.
    """

    def __init__(self, tokenizer: Tokenizer):
        self.tokenizer = tokenizer
        self.literals = _added_literals(tokenizer) if _word_local(tokenizer) else None
        self._title_tokens: dict[str, int] = {"": 0}

    def counts(
        self,
        texts: list[str],
        heads: list[tuple[str, int]],
        encodings: list[Encoding],
        ranges: list[list[tuple[int, int]]],
        pieces: list[list[str]],
    ) -> list[list[int]]:
        counts: list[list] = []
        again: list[tuple[int, int]] = []  # (document, chunk) tokenized again
        for doc, (text, (title, _), encoding, doc_ranges) in enumerate(zip(texts, heads, encodings, ranges)):
            known = self._known_counts(text, title, encoding, doc_ranges)
            again.extend((doc, chunk) for chunk, count in enumerate(known) if count is None)
            counts.append(known)
        tokenized = _own_token_counts(self.tokenizer, [pieces[doc][chunk] for doc, chunk in again])
        for (doc, chunk), count in zip(again, tokenized):
            counts[doc][chunk] = count
        return counts

    def _known_counts(
        self, text: str, title: str, encoding: Encoding, doc_ranges: list[tuple[int, int]]
    ) -> list[int | None]:
        """Each window's count where it follows from the document's tokens, else None."""
        if self.literals is None or any(literal in text or literal in title for literal in self.literals):
            return [None] * len(doc_ranges)
        title_tokens = self._title_count(title)
        is_word_start = _word_starts(encoding)
        n_tokens = len(encoding)
        return [
            title_tokens + last - first
            if (first == 0 or is_word_start(first)) and (last == n_tokens or is_word_start(last))
            else None
            for first, last in doc_ranges
        ]

    def _title_count(self, title: str) -> int:
        if title not in self._title_tokens:
            self._title_tokens[title] = len(self.tokenizer.encode(title, add_special_tokens=False))
        return self._title_tokens[title]


def _word_local(tokenizer: Tokenizer) -> bool:
    """Whether ``tokenizer`` tokenizes each word on its own: BERT's normalizer (one character at a
    time), BERT's pre-tokenizer (words split at whitespace and punctuation) and WordPiece (a word's
    pieces depend on that word alone), with added tokens matched verbatim (not normalized) and
    holding no whitespace, so a literal in a chunk's text is one in its document's text or title."""
    from tokenizers import models, normalizers, pre_tokenizers

    added = tokenizer.get_added_tokens_decoder().values()
    return (
        (tokenizer.normalizer is None or isinstance(tokenizer.normalizer, normalizers.BertNormalizer))
        and isinstance(tokenizer.pre_tokenizer, pre_tokenizers.BertPreTokenizer)
        and isinstance(tokenizer.model, models.WordPiece)
        and not any(token.normalized or any(c.isspace() for c in token.content) for token in added)
    )


def _added_literals(tokenizer: Tokenizer) -> tuple[str, ...]:
    return tuple(token.content for token in tokenizer.get_added_tokens_decoder().values())


def _token_ranges(encoding: Encoding, content: int, stride: int) -> list[tuple[int, int]]:
    """One document's windows as token ranges (:func:`token_windows`, words kept whole)."""
    return list(token_windows(len(encoding), content, stride, _word_starts(encoding)))


def _spans(
    encoding: Encoding, content: int, stride: int, fits: Callable[[int, int], bool] | None = None
) -> list[tuple[int, int]]:
    """Character spans of one document's windows (:func:`token_windows`, words kept whole)."""
    windows = token_windows(len(encoding), content, stride, _word_starts(encoding), fits)
    return [_char_span(encoding, first, last) for first, last in windows]


def _fitted_spans(
    tokenizer: Tokenizer, text: str, title: str, encoding: Encoding, content: int, window: int, stride: int
) -> list[tuple[int, int]]:
    """One document's spans of ``window`` body tokens, each shortened until its text with its
    title (:func:`retriever_text`) has at most ``content`` tokens alone."""

    def fits(first: int, last: int) -> bool:
        start, end = _char_span(encoding, first, last)
        return _own_token_counts(tokenizer, [retriever_text(title, text[start:end])])[0] <= content

    return _spans(encoding, window, stride, fits)


def _chunk_texts(text: str, title: str, spans: list[tuple[int, int]]) -> list[str]:
    return [retriever_text(title, text[start:end]) for start, end in spans]


def _titles(docs: pl.DataFrame, titles: str) -> list[str]:
    """Each document's title, stripped, under the titles term ("" when ignored or absent)."""
    if _checked_titles(titles) == "ignore" or "title" not in docs.columns:
        return [""] * docs.height
    return [title.strip() for title in docs["title"].fill_null("").to_list()]


def _checked_titles(titles: object, *, file: str | None = None, field: str = "titles") -> str:
    if titles not in TITLES:
        raise InputError(f"must be one of {', '.join(TITLES)}, found {titles!r}", file=file, field=field)
    return str(titles)


def _carried_titles(tokenizer: Tokenizer, titles: list[str], budget: int) -> list[tuple[str, int]]:
    """Each title as its document's chunks carry it, and the tokens every window reserves for it.

    A title of more than ``budget`` tokens is cut after its first ``budget`` tokens, or back to
    the start of the word they end in (a first word longer than the budget is split); a title
    without tokens is none. The reservation never exceeds ``budget``.
    """
    carried: list[tuple[str, int]] = [("", 0)] * len(titles)
    present = [index for index, title in enumerate(titles) if title]
    encodings = tokenizer.encode_batch([titles[index] for index in present], add_special_tokens=False)
    for index, encoding in zip(present, encodings):
        title = titles[index]
        if len(encoding) > budget:
            last = budget
            is_word_start = _word_starts(encoding)
            while 0 < last and not is_word_start(last):
                last -= 1
            last = last or budget
            title = title[: encoding.token_to_chars(last - 1)[1]].rstrip() if budget else ""
        reserved = min(len(tokenizer.encode(title, add_special_tokens=False)), budget) if title else 0
        carried[index] = (title, reserved) if reserved else ("", 0)
    return carried


def _batches(
    docs: pl.DataFrame, titles: list[tuple[str, int]], max_chars: int
) -> Iterator[tuple[list[str], list[str], list[tuple[str, int]]]]:
    """Consecutive (doc_ids, texts, titles) batches of about ``max_chars`` characters (at least one document).

    Only a batch's texts are Python strings at a time; the frame keeps the rest.
    """
    lengths = docs["text"].str.len_chars().to_list()
    first = chars = 0
    for index, length in enumerate(lengths):
        chars += length
        if chars >= max_chars or index == len(lengths) - 1:
            batch = docs.slice(first, index + 1 - first)
            yield batch["doc_id"].to_list(), batch["text"].to_list(), titles[first : index + 1]
            first, chars = index + 1, 0


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
