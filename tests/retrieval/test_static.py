"""releval.retrieval.static: WordLlama l2_supercat (256-d) as a static retriever.

Vectors are checked against WordLlama's own ``embed``, token counts against its tokenizer, and
loading with every socket blocked: the model comes from the installed wheel, never the network.
"""

from __future__ import annotations

import socket

import numpy as np
import pytest

from releval.errors import InputError
from releval.retrieval import static
from releval.retrieval.families.static import StaticFamily
from releval.retrieval.models import ModelConfig

CONFIG, DIM = "l2_supercat", 256

TEXTS = [
    "how do plants make food",
    "Photosynthesis converts light energy into chemical energy stored in glucose.",
    "",
    "a",
    "Ein Satz auf Deutsch mit Umlauten: Größe, Übung, Äpfel.",
    "日本語のテキストとemoji 👍🏽, tabs\tand\nnewlines",
    " ".join(["retrieval evaluation needs judged pools"] * 120),  # ~600 tokens: never truncated
]


def config(**overrides) -> ModelConfig:
    return ModelConfig(name="wordllama", source=f"wordllama:{CONFIG}", family="static", dimension=DIM, **overrides)


@pytest.fixture
def no_network(monkeypatch):
    """Every outgoing connection raises; the fixture checks that it does."""

    def refuse(*args, **kwargs):
        raise OSError("network blocked by the test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    with pytest.raises(OSError, match="blocked"):
        socket.create_connection(("huggingface.co", 443))


@pytest.fixture(scope="module")
def model():
    return static.load_static(CONFIG, DIM, config())


@pytest.mark.slow
def test_vectors_equal_wordllama_embed(model):
    ours = static.encode_static(model, TEXTS, config(batch_size=3), "document")
    theirs = model.inference.embed(TEXTS, norm=False)
    assert ours.dtype == np.float32 and ours.shape == (len(TEXTS), DIM)
    norms = np.linalg.norm(theirs, axis=1, keepdims=True)
    nonempty = norms[:, 0] > 0
    np.testing.assert_allclose(ours[nonempty], theirs[nonempty] / norms[nonempty], rtol=0, atol=1e-6)
    with np.errstate(invalid="ignore"):
        library_normalised = model.inference.embed(TEXTS, norm=True)
    np.testing.assert_allclose(ours[nonempty], library_normalised[nonempty], rtol=0, atol=1e-6)
    raw = static.encode_static(model, TEXTS, config(normalize=False), "document")
    np.testing.assert_allclose(raw, theirs, rtol=0, atol=1e-6)


@pytest.mark.slow
def test_a_text_without_tokens_is_the_zero_vector_not_nan(model):
    vectors = static.encode_static(model, ["", "word"], config(), "query")
    assert np.isfinite(vectors).all()
    assert not vectors[0].any() and np.linalg.norm(vectors[1]) == pytest.approx(1.0, abs=1e-6)


@pytest.mark.slow
def test_pooling_is_the_mean_of_token_rows(model):
    text = "the mitochondria is the powerhouse of the cell"
    ids = model.inference.tokenizer.encode(text, add_special_tokens=False).ids
    expected = model.inference.embedding[ids].mean(axis=0)
    got = static.encode_static(model, [text], config(normalize=False), "document")[0]
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6)


@pytest.mark.slow
def test_prompt_is_prepended_for_its_role(model):
    cfg = config(query_prompt="search: ", document_prompt="")
    query = static.encode_static(model, ["heat flow"], cfg, "query")
    document = static.encode_static(model, ["heat flow"], cfg, "document")
    prompted = static.encode_static(model, ["search: heat flow"], config(), "document")
    np.testing.assert_array_equal(query, prompted)
    assert not np.allclose(query, document)


@pytest.mark.slow
def test_ranks_the_relevant_passage_first(model):
    passages = [
        "The stock market fell sharply after the central bank raised interest rates.",
        "Plants use sunlight, water and carbon dioxide to produce glucose and oxygen in their leaves.",
        "The engine of a car burns petrol to move the pistons.",
        "A recipe for chocolate cake with butter, sugar and eggs.",
    ]
    queries = static.encode_static(model, ["how do plants make food from sunlight"], config(), "query")
    documents = static.encode_static(model, passages, config(), "document")
    scores = (documents @ queries.T)[:, 0]
    assert int(np.argmax(scores)) == 1
    assert scores[1] - np.sort(scores)[-2] > 0.05  # not a near tie


@pytest.mark.slow
def test_encoding_is_deterministic_and_independent_of_batch_size(model):
    first = static.encode_static(model, TEXTS * 5, config(batch_size=64), "document")
    second = static.encode_static(model, TEXTS * 5, config(batch_size=64), "document")
    one_by_one = static.encode_static(model, TEXTS * 5, config(batch_size=1), "document")
    assert first.tobytes() == second.tobytes() == one_by_one.tobytes()


@pytest.mark.slow
def test_loads_and_encodes_with_sockets_blocked(no_network):
    model = static.load_static(CONFIG, DIM, config())
    vectors = static.encode_static(model, TEXTS, config(), "document")
    assert vectors.shape == (len(TEXTS), DIM) and np.isfinite(vectors).all()


@pytest.mark.slow
def test_wordllama_default_lookup_would_go_to_the_network(no_network, tmp_path):
    """Why load_static passes the package folder: elsewhere WordLlama misses the tokenizer
    (it looks in ``tokenizer/``, the wheel has ``tokenizers/``) and tries to download it."""
    wordllama = static._wordllama()
    with pytest.raises(FileNotFoundError, match="Failed to download tokenizer"):
        wordllama.WordLlama.load(config=CONFIG, dim=DIM, cache_dir=tmp_path)


@pytest.mark.slow
def test_token_lengths_are_wordllamas_and_untruncated(model):
    lengths = static.static_token_lengths(model, TEXTS, "")
    tokenizer = model.inference.tokenizer
    expected = [len(tokenizer.encode(t, add_special_tokens=False).ids) for t in TEXTS]
    assert lengths.tolist() == expected
    assert lengths[2] == 0 and lengths[-1] > 512
    prompted = static.static_token_lengths(model, ["heat flow"], "search: ")
    assert prompted[0] == len(tokenizer.encode("search: heat flow", add_special_tokens=False).ids)
    cut = StaticFamily(config(), {}, model).truncation(TEXTS)
    assert cut.truncated == 0 and cut.lost_tokens == 0 and cut.seen_tokens == int(lengths.sum())


@pytest.mark.slow
def test_protocol_records_what_the_model_does(model):
    protocol = static.static_protocol(model)
    assert protocol["dimension"] == DIM and protocol["vocabulary"] == 32000
    assert protocol["truncation"] is None and protocol["special_tokens"] is False
    assert protocol["trained_max_length"] == 256 and protocol["stored_dtype"] == "float16"
    assert protocol["pooling"].startswith("mean")
    assert protocol["library"].startswith("wordllama==")


def test_files_are_the_shipped_weights_and_tokenizer():
    files = static.static_files(CONFIG, DIM)
    assert [(f.parent.name, f.name) for f in files] == [
        ("weights", "l2_supercat_256.safetensors"),
        ("tokenizers", "l2_supercat_tokenizer_config.json"),
    ]
    digest = static.static_weights_sha256(CONFIG, DIM)
    assert len(digest) == 64 and digest == static.static_weights_sha256(CONFIG, DIM)


def test_missing_or_unknown_models_are_refused_by_name():
    with pytest.raises(InputError, match="l2_supercat_512.safetensors"):
        static.static_files(CONFIG, 512)  # a valid WordLlama dimension the wheel does not ship
    with pytest.raises(InputError, match="no dimension 300"):
        static.static_files(CONFIG, 300)
    with pytest.raises(InputError, match="unknown WordLlama config 'nope'"):
        static.static_files("nope", DIM)


def test_non_float32_or_gpu_protocols_are_refused():
    with pytest.raises(InputError, match="models.wordllama.dtype"):
        static.load_static(CONFIG, DIM, config(dtype="float16"))
    with pytest.raises(InputError, match="models.wordllama.devices"):
        static.load_static(CONFIG, DIM, config(devices=("cuda:0",)))


def test_files_hash_covers_names_and_bytes(tmp_path):
    weights, tokenizer = tmp_path / "weights.safetensors", tmp_path / "tokenizer.json"
    weights.write_bytes(b"\x00" * 16)
    tokenizer.write_text("{}")
    base = static.files_sha256(tmp_path, [weights, tokenizer])
    assert static.files_sha256(tmp_path, [tokenizer, weights]) == base  # order given does not matter
    tokenizer.write_text('{"x": 1}')
    changed = static.files_sha256(tmp_path, [weights, tokenizer])
    renamed = tmp_path / "other.json"
    tokenizer.rename(renamed)
    assert len({base, changed, static.files_sha256(tmp_path, [weights, renamed])}) == 3
