"""BM25Index must reproduce rank_bm25.BM25Okapi scores (1e-9 absolute) on the same tokens."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from releval.retrieval.bm25 import ENGLISH_STOPWORDS, BM25Index, TokenizerConfig, tokenize, top_k_indices
from releval.errors import InputError

from support.cranfield import CRANFIELD, CRANFIELD_MISSING

TOLERANCE = 1e-9


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------


def zipf_corpus(
    rng: np.random.Generator, n_docs: int, vocab_size: int, max_len: int, empty_fraction: float = 0.1
) -> list[list[str]]:
    """Zipf-distributed tokens, so the top few terms occur in more than half of the documents."""
    probabilities = 1.0 / np.arange(1, vocab_size + 1)
    probabilities /= probabilities.sum()
    docs = []
    for _ in range(n_docs):
        length = 0 if rng.random() < empty_fraction else int(rng.integers(1, max_len + 1))
        docs.append([f"w{i}" for i in rng.choice(vocab_size, size=length, p=probabilities)])
    return docs


def random_queries(rng: np.random.Generator, vocab_size: int, n_queries: int) -> list[list[str]]:
    """Queries mixing known terms, repeated terms and terms absent from the corpus."""
    queries = [[], ["unseen"], ["w0", "w0", "w0"]]
    for _ in range(n_queries):
        length = int(rng.integers(1, 8))
        terms = [f"w{i}" for i in rng.integers(0, vocab_size + 5, size=length)]  # some unseen
        terms += terms[: int(rng.integers(0, 3))]  # repeats
        queries.append(terms)
    return queries


def max_abs_diff_to_reference(docs, queries, **params) -> float:
    index = BM25Index.build(docs, **params)
    reference = BM25Okapi(docs, **params)
    return max(float(np.max(np.abs(index.get_scores(q) - reference.get_scores(q)))) for q in queries)


def expected_top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """The documented tie rule, by brute force: score descending, then index ascending."""
    return np.lexsort((np.arange(len(scores)), -scores))[:k]


def raw_idf(docs: list[list[str]]) -> dict[str, float]:
    n = len(docs)
    df: dict[str, int] = {}
    for doc in docs:
        for term in set(doc):
            df[term] = df.get(term, 0) + 1
    return {t: np.log(n - f + 0.5) - np.log(f + 0.5) for t, f in df.items()}


# ---------------------------------------------------------------------------------------------
# equality with rank-bm25 on random corpora
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize(
    "params",
    [
        {},
        {"k1": 1.2, "b": 0.75, "epsilon": 0.25},
        {"k1": 0.9, "b": 0.4, "epsilon": 0.5},
        {"k1": 2.0, "b": 0.0, "epsilon": 0.0},
    ],
)
def test_scores_match_rank_bm25_on_random_corpora(seed, params):
    rng = np.random.default_rng(seed)
    docs = zipf_corpus(rng, n_docs=int(rng.integers(5, 120)), vocab_size=40, max_len=30)
    if not any(docs):
        docs[0] = ["w0"]
    queries = random_queries(rng, vocab_size=40, n_queries=30)
    assert max_abs_diff_to_reference(docs, queries, **params) <= TOLERANCE


def test_idf_and_average_length_match_rank_bm25():
    docs = zipf_corpus(np.random.default_rng(2), n_docs=80, vocab_size=50, max_len=20)
    index = BM25Index.build(docs)
    reference = BM25Okapi(docs)
    assert index.avgdl == reference.avgdl
    assert list(index.vocabulary) == list(reference.idf)  # both in order of first occurrence
    np.testing.assert_allclose(index.idf, [reference.idf[t] for t in index.vocabulary], rtol=0, atol=1e-12)
    np.testing.assert_array_equal(index.doc_lengths, reference.doc_len)


def test_random_corpora_exercise_the_negative_idf_path():
    rng = np.random.default_rng(0)
    docs = zipf_corpus(rng, n_docs=100, vocab_size=40, max_len=30)
    negatives = [t for t, idf in raw_idf(docs).items() if idf < 0]
    assert negatives, "the Zipf corpus should contain terms in more than half of the documents"
    index = BM25Index.build(docs)
    reference = BM25Okapi(docs)
    for term in negatives:
        assert index.idf[index.vocabulary[term]] == pytest.approx(reference.idf[term], abs=TOLERANCE)
        assert index.idf[index.vocabulary[term]] == pytest.approx(0.25 * reference.average_idf)


def test_negative_mean_idf_gives_negative_floor_like_rank_bm25():
    # Every term occurs in 3 of 4 documents: all raw idfs are negative, so is their mean.
    docs = [["a", "b", "c"], ["a", "b"], ["b", "c", "a"], ["c"]]
    reference = BM25Okapi(docs)
    assert reference.average_idf < 0
    queries = [["a"], ["b", "c"], ["a", "a", "c"], ["zz"]]
    assert max_abs_diff_to_reference(docs, queries) <= TOLERANCE


def test_idf_of_exactly_zero_is_not_floored():
    docs = [["a", "x"], ["a"], ["b"], ["b"]]  # "a" occurs in exactly half: idf = 0
    index = BM25Index.build(docs)
    assert index.idf[index.vocabulary["a"]] == 0.0
    assert max_abs_diff_to_reference(docs, [["a"], ["a", "x"], ["x", "b"]]) <= TOLERANCE


def test_repeated_query_tokens_count_once_per_occurrence():
    docs = zipf_corpus(np.random.default_rng(1), n_docs=50, vocab_size=20, max_len=15)
    index = BM25Index.build(docs)
    once = index.get_scores(["w3"])
    np.testing.assert_allclose(index.get_scores(["w3", "w3", "w3"]), 3 * once, rtol=0, atol=TOLERANCE)


def test_unseen_and_empty_queries_score_zero():
    index = BM25Index.build([["a", "b"], ["b", "c"], ["c"]])
    assert not index.get_scores([]).any()
    assert not index.get_scores(["never", "seen"]).any()
    np.testing.assert_array_equal(index.get_scores(["c", "never"]), index.get_scores(["c"]))


def test_scores_are_float64_for_every_document():
    index = BM25Index.build([["a"], [], ["b", "a"]])
    scores = index.get_scores(["a"])
    assert scores.dtype == np.float64 and scores.shape == (3,)


# ---------------------------------------------------------------------------------------------
# empty corpus, empty documents, invalid input
# ---------------------------------------------------------------------------------------------


def test_empty_corpus_is_rejected():
    with pytest.raises(InputError, match="no documents"):
        BM25Index.build([])


def test_corpus_of_only_empty_documents_is_rejected():
    with pytest.raises(InputError, match="all 3 documents are empty"):
        BM25Index.build([[], [], []])


def test_empty_documents_score_zero_and_others_match_rank_bm25():
    docs = [["a", "b"], [], ["b", "c", "c"], [], ["a"]]
    index = BM25Index.build(docs)
    for query in (["a"], ["c", "b"], ["b", "b"]):
        scores = index.get_scores(query)
        assert scores[1] == 0.0 and scores[3] == 0.0
        np.testing.assert_allclose(scores, BM25Okapi(docs).get_scores(query), rtol=0, atol=TOLERANCE)


@pytest.mark.filterwarnings("ignore:invalid value encountered in divide:RuntimeWarning")
def test_b_equal_one_gives_zero_where_rank_bm25_gives_nan():
    # rank-bm25 computes 0 / 0 for an empty document when b == 1; an absent term contributes 0 here.
    docs = [["a", "b"], [], ["b", "c"]]
    ours = BM25Index.build(docs, b=1.0).get_scores(["a"])
    theirs = BM25Okapi(docs, b=1.0).get_scores(["a"])
    assert np.isnan(theirs[1]) and ours[1] == 0.0
    np.testing.assert_allclose(ours[[0, 2]], theirs[[0, 2]], rtol=0, atol=TOLERANCE)


@pytest.mark.parametrize(
    "params, field",
    [
        ({"k1": -0.1}, "k1"),
        ({"k1": float("inf")}, "k1"),
        ({"b": 1.5}, "b"),
        ({"b": -0.1}, "b"),
        ({"epsilon": float("nan")}, "epsilon"),
        ({"k1": "1.5"}, "k1"),
    ],
)
def test_invalid_parameters_are_rejected(params, field):
    with pytest.raises(InputError, match=f"field '{field}'"):
        BM25Index.build([["a"]], **params)


def test_all_parameter_problems_are_reported_together():
    with pytest.raises(InputError) as caught:
        BM25Index.build([["a"]], k1=-1, b=2)
    assert "field 'k1'" in str(caught.value) and "field 'b'" in str(caught.value)


def test_strings_instead_of_token_lists_are_rejected():
    with pytest.raises(InputError, match="document 1 is a string"):
        BM25Index.build([["a"], "a b"])
    with pytest.raises(InputError, match="tokens must be strings"):
        BM25Index.build([["a", 3]])
    index = BM25Index.build([["a"]])
    with pytest.raises(InputError, match="query 0 is a string"):
        index.get_scores("a")
    with pytest.raises(InputError, match="query 1 is a string"):
        index.top_k([["a"], "a"], k=1)


# ---------------------------------------------------------------------------------------------
# top_k
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 3, 10, 500])
def test_top_k_agrees_with_get_scores_and_the_tie_rule(k):
    rng = np.random.default_rng(7)
    docs = zipf_corpus(rng, n_docs=200, vocab_size=30, max_len=10)
    queries = random_queries(rng, vocab_size=30, n_queries=40)
    index = BM25Index.build(docs)
    indices, scores = index.top_k(queries, k)
    expected_k = min(k, len(docs))
    assert indices.shape == scores.shape == (len(queries), expected_k)
    assert indices.dtype == np.int64 and scores.dtype == np.float64
    for row, query in enumerate(queries):
        full = index.get_scores(query)
        np.testing.assert_array_equal(indices[row], expected_top_k(full, expected_k))
        np.testing.assert_array_equal(scores[row], full[indices[row]])  # same kernel: bit for bit


def test_top_k_breaks_ties_by_ascending_document_index():
    docs = [["x"], ["a"], ["a"], ["y"], ["a"], ["z"], ["w"]]  # "a" in 3 of 7: positive idf
    indices, scores = BM25Index.build(docs).top_k([["a"], []], k=4)
    np.testing.assert_array_equal(indices[0], [1, 2, 4, 0])  # three equal hits, then zeros by index
    np.testing.assert_array_equal(indices[1], [0, 1, 2, 3])  # all zero: first k by index
    assert scores[0, 0] == scores[0, 1] == scores[0, 2] > 0 == scores[0, 3]


def test_top_k_indices_ties_at_the_cut_keep_lowest_indices():
    scores = np.array([[1.0, 3.0, 2.0, 2.0, 2.0, 3.0]])
    np.testing.assert_array_equal(top_k_indices(scores, 3), [[1, 5, 2]])
    np.testing.assert_array_equal(top_k_indices(scores, 6), [[1, 5, 2, 3, 4, 0]])


@pytest.mark.parametrize("seed", range(5))
def test_top_k_indices_on_heavily_tied_random_scores(seed):
    rng = np.random.default_rng(seed)
    scores = rng.integers(-2, 3, size=(20, 37)).astype(np.float64)
    for k in (1, 5, 36, 37):
        expected = np.stack([expected_top_k(row, k) for row in scores])
        np.testing.assert_array_equal(top_k_indices(scores, k), expected)


def test_top_k_handles_negative_scores():
    # A negative epsilon floor makes matching documents score below the non-matching ones.
    docs = [["a", "b", "c"], ["a", "b"], ["b", "c", "a"], ["c"]]
    index = BM25Index.build(docs)
    full = index.get_scores(["a"])
    assert (full < 0).any()
    indices, _ = index.top_k([["a"]], k=4)
    np.testing.assert_array_equal(indices[0], expected_top_k(full, 4))


def test_top_k_batches_larger_than_one_dense_block(monkeypatch):
    import releval.retrieval.bm25 as bm25

    monkeypatch.setattr(bm25, "_MAX_DENSE_BLOCK", 50)  # 1 query per block with 40 documents
    rng = np.random.default_rng(3)
    docs = zipf_corpus(rng, n_docs=40, vocab_size=15, max_len=8)
    queries = random_queries(rng, vocab_size=15, n_queries=10)
    index = BM25Index.build(docs)
    indices, _ = index.top_k(queries, k=5)
    for row, query in enumerate(queries):
        np.testing.assert_array_equal(indices[row], expected_top_k(index.get_scores(query), 5))


def test_top_k_of_empty_batch_and_invalid_k():
    index = BM25Index.build([["a"], ["b"]])
    indices, scores = index.top_k([], k=3)
    assert indices.shape == scores.shape == (0, 2)
    for bad_k in (0, -1, 1.5, True):
        with pytest.raises(InputError, match="field 'k'"):
            index.top_k([["a"]], k=bad_k)


# ---------------------------------------------------------------------------------------------
# tokenizer
# ---------------------------------------------------------------------------------------------


def test_default_tokenizer_lowercases_and_splits_on_word_characters():
    assert tokenize("Mach-2 flow, at  RE=10^6 ; don't") == ["mach", "2", "flow", "at", "re", "10", "6", "don", "t"]


def test_tokenizer_defaults_are_declared():
    cfg = TokenizerConfig()
    assert (cfg.lowercase, cfg.pattern, cfg.stopwords, cfg.min_token_length, cfg.stemmer) == (
        True,
        r"\w+",
        "none",
        1,
        "none",
    )


def test_tokenizer_keeps_case_when_asked():
    assert tokenize("Boundary Layer", TokenizerConfig(lowercase=False)) == ["Boundary", "Layer"]


def test_lowercasing_happens_before_the_pattern_matches():
    assert tokenize("ABC def", TokenizerConfig(pattern="[a-z]+")) == ["abc", "def"]
    assert tokenize("ABC def", TokenizerConfig(pattern="[a-z]+", lowercase=False)) == ["def"]


def test_english_stopwords_are_removed_case_insensitively():
    text = "The effect of the Shock on a wing"
    assert tokenize(text, TokenizerConfig(stopwords="english")) == ["effect", "shock", "wing"]
    keep_case = TokenizerConfig(stopwords="english", lowercase=False)
    assert tokenize(text, keep_case) == ["effect", "Shock", "wing"]


def test_english_stopword_list_is_a_small_lowercase_frozenset():
    assert isinstance(ENGLISH_STOPWORDS, frozenset)
    assert 100 < len(ENGLISH_STOPWORDS) < 300
    assert all(word == word.lower() and re.fullmatch(r"\w+", word) for word in ENGLISH_STOPWORDS)
    assert {"the", "and", "of", "is"} <= ENGLISH_STOPWORDS


def test_min_token_length_drops_short_tokens():
    assert tokenize("a an wing x2", TokenizerConfig(min_token_length=2)) == ["an", "wing", "x2"]


def test_pattern_with_groups_yields_whole_matches_and_empty_matches_are_dropped():
    assert tokenize("ab-cd", TokenizerConfig(pattern=r"(a|c)(b|d)")) == ["ab", "cd"]
    assert tokenize("ab cd", TokenizerConfig(pattern=r"\w*")) == ["ab", "cd"]


def test_tokenizer_handles_unicode_and_empty_text():
    assert tokenize("Élan ÜBER straße") == ["élan", "über", "straße"]
    assert tokenize("") == []
    assert tokenize(" ,.; ") == []


def test_tokenize_is_deterministic():
    cfg = TokenizerConfig(stopwords="english", min_token_length=2)
    text = "The pressure distribution on a cone at hypersonic speeds"
    assert tokenize(text, cfg) == tokenize(text, cfg)


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"pattern": "("}, "pattern"),
        ({"stopwords": "french"}, "stopwords"),
        ({"min_token_length": 0}, "min_token_length"),
        ({"min_token_length": 1.5}, "min_token_length"),
        ({"stemmer": "porter"}, "stemmer"),
        ({"lowercase": "yes"}, "lowercase"),
    ],
)
def test_invalid_tokenizer_config_is_rejected(kwargs, field):
    with pytest.raises(InputError, match=f"field '{field}'"):
        TokenizerConfig(**kwargs)


def test_tokenizer_config_is_immutable_and_hashable():
    cfg = TokenizerConfig()
    with pytest.raises(AttributeError):
        cfg.lowercase = False  # type: ignore[misc]
    assert hash(cfg) == hash(TokenizerConfig())


# ---------------------------------------------------------------------------------------------
# Cranfield: every document score of all 225 queries
# ---------------------------------------------------------------------------------------------


def read_smart_abstracts(path: Path) -> list[str]:
    """Minimal SMART reader: the ``.W`` text of each ``.I`` record, in file order."""
    records = re.split(r"^\.I .*$", path.read_text(encoding="utf-8"), flags=re.MULTILINE)[1:]
    texts = []
    for record in records:
        fields = dict(re.findall(r"^\.([TABW])\s*$\n(.*?)(?=^\.[TABW]\s*$|\Z)", record, flags=re.MULTILINE | re.DOTALL))
        texts.append(fields.get("W", ""))
    return texts


@pytest.fixture(scope="module")
def cranfield() -> tuple[list[list[str]], list[list[str]]]:
    docs_path, queries_path = CRANFIELD / "cran.all.1400", CRANFIELD / "cran.qry"
    if not (docs_path.is_file() and queries_path.is_file()):
        pytest.skip(CRANFIELD_MISSING)
    docs = [tokenize(text) for text in read_smart_abstracts(docs_path)]
    queries = [tokenize(text) for text in read_smart_abstracts(queries_path)]
    return docs, queries


def test_cranfield_reader_counts(cranfield):
    docs, queries = cranfield
    assert len(docs) == 1400 and len(queries) == 225
    assert sum(1 for doc in docs if not doc) == 2  # the README's two empty abstracts
    assert all(queries)


def test_cranfield_all_scores_match_rank_bm25(cranfield):
    docs, queries = cranfield
    index = BM25Index.build(docs)
    reference = BM25Okapi(docs)
    worst = max(float(np.max(np.abs(index.get_scores(q) - reference.get_scores(q)))) for q in queries)
    assert worst <= TOLERANCE


def test_cranfield_top_k_agrees_with_get_scores(cranfield):
    docs, queries = cranfield
    index = BM25Index.build(docs)
    indices, scores = index.top_k(queries, k=100)
    for row, query in enumerate(queries):
        full = index.get_scores(query)
        np.testing.assert_array_equal(indices[row], expected_top_k(full, 100))
        np.testing.assert_array_equal(scores[row], full[indices[row]])  # same kernel: bit for bit
