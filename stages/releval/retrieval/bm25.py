"""Vectorised BM25 with the scores of ``rank_bm25.BM25Okapi`` (equal up to float rounding).

Semantics reproduced from rank-bm25 0.2.2 (``BM25Okapi``):

* ``idf(t) = log(N - n_t + 0.5) - log(n_t + 0.5)`` for every term seen in the corpus;
  a negative idf is replaced by ``epsilon * mean(idf)`` (the mean taken over all terms
  *before* the replacement, so it may itself be negative); an idf of exactly 0 stays 0.
* ``score(d, q) = sum over query tokens t (repeats counted) of
  idf(t) * tf(t, d) * (k1 + 1) / (tf(t, d) + k1 * (1 - b + b * |d| / avgdl))``.
* A query token never seen in the corpus contributes 0.

Layout: the per-(term, document) contribution above does not depend on the query, so it is
computed once at build time into a term-major ``scipy.sparse`` CSR matrix ``W`` (terms x docs;
the transpose of a doc-term CSC). A batch of queries is the sparse product ``Q @ W`` with ``Q``
the (queries x terms) matrix of query-token counts; for one query that product only gathers the
query terms' rows of ``W``. ``get_scores`` and ``top_k`` share this kernel, so their scores are
identical bit for bit. A token repeated c times adds ``c * w`` rather than ``w`` c times, which
can differ from rank-bm25 in the last bits only.

Deliberate differences from rank-bm25, all at inputs where rank-bm25 crashes or returns NaN:

* an empty corpus, or a corpus whose documents are all empty, raises :class:`InputError`
  (rank-bm25 raises ``ZeroDivisionError``);
* empty documents are allowed: they contain no term, so they score exactly 0 for every query.
  A document lacking a query term always gets exactly 0 from it; rank-bm25 computes ``0/0 = NaN``
  there when ``k1 == 0``, or when ``b == 1`` and the document is empty;
* ``k1 >= 0``, ``0 <= b <= 1`` and a finite ``epsilon`` are checked (rank-bm25 checks nothing).
"""

from __future__ import annotations

import functools
import itertools
import math
import re
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Literal, Sequence

import numpy as np
import scipy.sparse as sp

from releval.errors import InputError, InputErrors


def _raise_all(problems: list[InputError]) -> None:
    if len(problems) == 1:
        raise problems[0]
    if problems:
        raise InputErrors(problems)


# --------------------------------------------------------------------------------------------
# Tokenizer
# --------------------------------------------------------------------------------------------

# The NLTK English list (without apostrophes: "\w+" splits "don't" into "don" and "t").
ENGLISH_STOPWORDS: frozenset[str] = frozenset(
    """
    i me my myself we our ours ourselves you your yours yourself yourselves he him his himself
    she her hers herself it its itself they them their theirs themselves what which who whom
    this that these those am is are was were be been being have has had having do does did
    doing a an the and but if or because as until while of at by for with about against between
    into through during before after above below to from up down in out on off over under again
    further then once here there when where why how all any both each few more most other some
    such no nor not only own same so than too very s t can will just don should now d ll m o re
    ve y ain aren couldn didn doesn hadn hasn haven isn ma mightn mustn needn shan shouldn wasn
    weren won wouldn
""".split()
)

STOPWORD_LISTS: dict[str, frozenset[str]] = {"none": frozenset(), "english": ENGLISH_STOPWORDS}
STEMMERS: tuple[str, ...] = ("none",)


@dataclass(frozen=True)
class TokenizerConfig:
    """How text becomes tokens. Steps, in order:

    1. ``lowercase``: ``str.lower()`` the whole text (before matching, so ``pattern`` sees
       lowercase text);
    2. ``pattern``: every non-overlapping regex match is a token (``re.finditer``, whole match);
    3. ``min_token_length``: drop shorter tokens (empty matches are always dropped);
    4. ``stopwords``: drop tokens whose lowercase form is in the named list;
    5. ``stemmer``: only ``"none"`` exists; the field is declared so configs state it.
    """

    lowercase: bool = True
    pattern: str = r"\w+"
    stopwords: Literal["none", "english"] = "none"
    min_token_length: int = 1
    stemmer: Literal["none"] = "none"

    def __post_init__(self) -> None:
        _raise_all([InputError(message, field=name) for name, message in _tokenizer_config_problems(self)])


def _tokenizer_config_problems(cfg: TokenizerConfig) -> list[tuple[str, str]]:
    problems = []
    if not isinstance(cfg.lowercase, bool):
        problems.append(("lowercase", f"must be true or false, got {cfg.lowercase!r}"))
    try:
        re.compile(cfg.pattern)
    except (re.error, TypeError) as exc:
        problems.append(("pattern", f"not a valid regular expression: {exc}"))
    if cfg.stopwords not in STOPWORD_LISTS:
        problems.append(("stopwords", f"must be one of {sorted(STOPWORD_LISTS)}, got {cfg.stopwords!r}"))
    if not isinstance(cfg.min_token_length, int) or isinstance(cfg.min_token_length, bool) or cfg.min_token_length < 1:
        problems.append(("min_token_length", f"must be an integer >= 1, got {cfg.min_token_length!r}"))
    if cfg.stemmer not in STEMMERS:
        problems.append(("stemmer", f"must be one of {list(STEMMERS)}, got {cfg.stemmer!r}"))
    return problems


def tokenize(text: str, cfg: TokenizerConfig = TokenizerConfig()) -> list[str]:
    """Split ``text`` into tokens as declared by ``cfg`` (pure and deterministic).

    Tokens are interned (:func:`sys.intern`): every occurrence of a term in a corpus is one shared
    string, so a tokenised corpus costs a pointer per token rather than a string per token.
    """
    if cfg.lowercase:
        text = text.lower()
    pattern = _compiled(cfg.pattern)
    # findall gives the whole matches only for a pattern without groups; finditer is the general case
    tokens = pattern.findall(text) if pattern.groups == 0 else [match.group(0) for match in pattern.finditer(text)]
    stopwords = STOPWORD_LISTS[cfg.stopwords]
    if stopwords or cfg.min_token_length > 1:
        tokens = [token for token in tokens if len(token) >= cfg.min_token_length and token.lower() not in stopwords]
    else:
        tokens = [token for token in tokens if token]  # empty matches are always dropped
    return list(map(sys.intern, tokens))


@functools.lru_cache(maxsize=64)
def _compiled(pattern: str) -> re.Pattern:
    return re.compile(pattern)


# --------------------------------------------------------------------------------------------
# Index
# --------------------------------------------------------------------------------------------

# Upper bound on the dense (queries x docs) score block materialised at once by top_k.
_MAX_DENSE_BLOCK = 1 << 22  # 4M float64 = 32 MiB


@dataclass(frozen=True, eq=False)
class BM25Index:
    """A BM25Okapi index; build with :meth:`BM25Index.build`."""

    vocabulary: dict[str, int]  # term -> row of ``weights``, in order of first occurrence
    weights: sp.csr_array  # terms x docs, BM25 contribution of one occurrence in the query
    idf: np.ndarray  # per term, after the epsilon floor
    doc_lengths: np.ndarray  # tokens per document
    avgdl: float
    k1: float
    b: float
    epsilon: float

    @classmethod
    def build(
        cls, tokenised_docs: Sequence[Sequence[str]], k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25
    ) -> "BM25Index":
        """Index pre-tokenised documents (same parameters and defaults as ``BM25Okapi``)."""
        _check_parameters(k1, b, epsilon)
        _check_corpus(tokenised_docs)
        vocabulary, term_ids, doc_lengths = _encode_corpus(tokenised_docs)
        _check_tokens(vocabulary, doc_lengths)
        term_freqs = _term_frequency_matrix(term_ids, doc_lengths, len(vocabulary))
        del term_ids  # the token stream (an id per token) is not needed past here
        avgdl = int(doc_lengths.sum()) / len(doc_lengths)
        idf = okapi_idf(np.diff(term_freqs.indptr), len(doc_lengths), epsilon)
        weights = _weight_matrix(term_freqs, idf, doc_lengths, avgdl, k1, b)
        return cls(vocabulary, weights, idf, doc_lengths, avgdl, float(k1), float(b), float(epsilon))

    @property
    def n_docs(self) -> int:
        return self.weights.shape[1]

    @property
    def nbytes(self) -> int:
        """Bytes held by the numeric arrays (the vocabulary dict is not counted)."""
        w = self.weights
        return w.data.nbytes + w.indices.nbytes + w.indptr.nbytes + self.idf.nbytes + self.doc_lengths.nbytes

    def get_scores(self, query_tokens: Sequence[str]) -> np.ndarray:
        """BM25 score of every document for one query (float64, length ``n_docs``).

        The 1 x terms query vector times ``weights`` touches only the query terms' rows: a
        sparse row gather. It is the same kernel as :meth:`top_k`, so the two agree bit for bit
        and the tie rule of ``top_k`` holds for these scores too.
        """
        return self._score_block(self._query_matrix([query_tokens]))[0]

    def top_k(self, queries: Sequence[Sequence[str]], k: int) -> tuple[np.ndarray, np.ndarray]:
        """Best ``k`` documents for each query of a batch.

        Returns ``(indices, scores)``, both of shape ``(len(queries), min(k, n_docs))``: document
        indices (int64) and their scores (float64). Order: score descending, then document index
        ascending, so ties (including the many documents scoring 0) resolve deterministically.
        """
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise InputError(f"must be an integer >= 1, got {k!r}", field="k")
        if isinstance(queries, str):
            raise InputError("expected a list of tokenised queries, got a string", field="queries")
        k = min(int(k), self.n_docs)
        query_matrix = self._query_matrix(queries)
        n_queries = query_matrix.shape[0]
        indices = np.empty((n_queries, k), dtype=np.int64)
        scores = np.empty((n_queries, k), dtype=np.float64)
        block = max(1, _MAX_DENSE_BLOCK // self.n_docs)
        for start in range(0, n_queries, block):
            stop = min(start + block, n_queries)
            block_scores = self._score_block(query_matrix[start:stop])
            block_indices = top_k_indices(block_scores, k)
            indices[start:stop] = block_indices
            scores[start:stop] = np.take_along_axis(block_scores, block_indices, axis=1)
        return indices, scores

    def _score_block(self, query_matrix: sp.csr_array) -> np.ndarray:
        """Dense (queries x docs) scores: one sparse product, summing query terms in term-id order."""
        return (query_matrix @ self.weights).toarray()

    def _query_matrix(self, queries: Sequence[Sequence[str]]) -> sp.csr_array:
        """Queries x terms matrix of query-token counts (unseen tokens dropped), terms sorted."""
        indptr, cols, counts = [0], [], []
        for query_number, query in enumerate(queries):
            _check_query(query, query_number)
            known = sorted(
                (self.vocabulary[term], count) for term, count in Counter(query).items() if term in self.vocabulary
            )
            cols.extend(col for col, _ in known)
            counts.extend(count for _, count in known)
            indptr.append(len(cols))
        # Same index dtype as the weights, or scipy would upcast a copy of them on every product.
        index_dtype = self.weights.indices.dtype
        return sp.csr_array(
            (
                np.asarray(counts, dtype=np.float64),
                np.asarray(cols, dtype=index_dtype),
                np.asarray(indptr, dtype=index_dtype),
            ),
            shape=(len(queries), len(self.vocabulary)),
        )


def okapi_idf(doc_freqs: np.ndarray, n_docs: int, epsilon: float) -> np.ndarray:
    """rank-bm25's BM25Okapi idf: log-odds, with negatives floored to epsilon * mean idf."""
    doc_freqs = doc_freqs.astype(np.float64)
    idf = np.log(n_docs - doc_freqs + 0.5) - np.log(doc_freqs + 0.5)
    floor = epsilon * (math.fsum(idf) / len(idf))
    return np.where(idf < 0, floor, idf)


def top_k_indices(scores: np.ndarray, k: int) -> np.ndarray:
    """Per row of ``scores`` (queries x docs), the ``k`` best columns: score desc, index asc."""
    n_rows, n_cols = scores.shape
    k = min(k, n_cols)
    if k == 0:
        return np.empty((n_rows, 0), dtype=np.int64)
    kth_best = np.partition(scores, n_cols - k, axis=1)[:, n_cols - k]
    result = np.empty((n_rows, k), dtype=np.int64)
    for i, (row, threshold) in enumerate(zip(scores, kth_best)):
        above = np.flatnonzero(row > threshold)  # fewer than k, by definition of the k-th best
        tied = np.flatnonzero(row == threshold)[: k - len(above)]
        result[i] = _rank_row(row, np.concatenate([above, tied]))
    return result


def _rank_row(row: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """Sort ascending ``candidates`` by score descending; the stable sort keeps index order on ties."""
    return candidates[np.argsort(-row[candidates], kind="stable")]


def _encode_corpus(docs: Sequence[Sequence[str]]) -> tuple[dict[str, int], np.ndarray, np.ndarray]:
    """Term ids of all tokens, concatenated in document order, and the length of each document."""
    doc_lengths = np.fromiter((len(doc) for doc in docs), dtype=np.int64, count=len(docs))
    n_tokens = int(doc_lengths.sum())
    # A missing term gets len(vocabulary) (computed before it is inserted): the next id, in order of
    # first occurrence. map() over the chained tokens keeps the per-token loop in C.
    ids: defaultdict[str, int] = defaultdict()
    ids.default_factory = ids.__len__
    term_ids = np.fromiter(
        map(ids.__getitem__, itertools.chain.from_iterable(docs)), dtype=_index_dtype(n_tokens), count=n_tokens
    )
    return dict(ids), term_ids, doc_lengths


def _index_dtype(largest: int) -> type[np.signedinteger]:
    return np.int32 if largest < np.iinfo(np.int32).max else np.int64


def _term_frequency_matrix(term_ids: np.ndarray, doc_lengths: np.ndarray, n_terms: int) -> sp.csr_array:
    """Terms x docs matrix of raw term frequencies, column indices sorted within each row.

    The token stream already is a docs x terms CSR matrix with one entry per token; summing its
    duplicates and transposing avoids a COO detour that would need a doc id per token.
    """
    indptr = np.zeros(len(doc_lengths) + 1, dtype=term_ids.dtype)
    np.cumsum(doc_lengths, out=indptr[1:])
    ones = np.ones(len(term_ids), dtype=np.int32)
    doc_term = sp.csr_array((ones, term_ids, indptr), shape=(len(doc_lengths), n_terms))
    doc_term.sum_duplicates()
    return doc_term.T.tocsr()


def _weight_matrix(
    term_freqs: sp.csr_array, idf: np.ndarray, doc_lengths: np.ndarray, avgdl: float, k1: float, b: float
) -> sp.csr_array:
    """Replace each tf entry by its BM25 contribution, with rank-bm25's order of operations.

    ``idf * (tf * (k1 + 1) / (tf + length_norm))``, computed in place in two arrays of one float
    per entry (operands swapped where IEEE addition and multiplication are commutative, so the
    values are the same to the last bit).
    """
    length_norm = k1 * (1 - b + b * doc_lengths.astype(np.float64) / avgdl)
    data = term_freqs.data.astype(np.float64)
    denominator = length_norm[term_freqs.indices]
    denominator += data
    data *= k1 + 1
    data /= denominator
    del denominator
    data *= np.repeat(idf, np.diff(term_freqs.indptr))
    return sp.csr_array((data, term_freqs.indices, term_freqs.indptr), shape=term_freqs.shape)


def _check_parameters(k1: float, b: float, epsilon: float) -> None:
    problems = []
    if not (_is_real(k1) and math.isfinite(k1) and k1 >= 0):
        problems.append(InputError(f"must be a finite number >= 0, got {k1!r}", field="k1"))
    if not (_is_real(b) and 0 <= b <= 1):
        problems.append(InputError(f"must be a number in [0, 1], got {b!r}", field="b"))
    if not (_is_real(epsilon) and math.isfinite(epsilon)):
        problems.append(InputError(f"must be a finite number, got {epsilon!r}", field="epsilon"))
    _raise_all(problems)


def _check_corpus(docs: Sequence[Sequence[str]]) -> None:
    if isinstance(docs, str):
        raise InputError("expected a list of tokenised documents, got a string", field="tokenised_docs")
    if len(docs) == 0:
        raise InputError("corpus has no documents; BM25 needs at least one", field="tokenised_docs")
    for number, doc in enumerate(docs):
        if isinstance(doc, str):
            raise InputError(f"document {number} is a string; expected a list of tokens", field="tokenised_docs")


def _check_tokens(vocabulary: dict[str, int], doc_lengths: np.ndarray) -> None:
    if not vocabulary:
        raise InputError(
            f"all {len(doc_lengths)} documents are empty; average document length would be 0", field="tokenised_docs"
        )
    bad = next((term for term in vocabulary if not isinstance(term, str)), None)
    if bad is not None:
        raise InputError(f"tokens must be strings, found {bad!r}", field="tokenised_docs")


def _check_query(query: Sequence[str], number: int) -> None:
    if isinstance(query, str):
        raise InputError(f"query {number} is a string; expected a list of tokens", field="query_tokens")


def _is_real(value: object) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
