"""Learned sparse retrieval (SPLADE): vocabulary-sized term weights, searched exactly.

A SPLADE model is a masked-language-model transformer whose logits over the vocabulary are
turned into one weight per term (``log(1 + relu(logit))``, max-pooled over the tokens). A text
becomes a row of a CSR matrix over the vocabulary; a query's score for a document is the dot
product of their rows, i.e. the sum over shared terms. Search walks the inverted index (the
documents' matrix transposed: one postings list per term), so it is exact and costs in
proportion to the postings of the query's terms, not to the number of documents.

The folder a sparse config points to holds a bare ``BertForMaskedLM`` (weights, tokenizer,
config; no sentence-transformers ``modules.json``), so the modules are built here, explicitly:
the transformer with its fill-mask head, then SPLADE pooling (max, relu). Everything the
modules do is read back by :func:`sparse_protocol` and recorded next to the scores.

Matrices are kept in canonical CSR form (indices sorted within each row, no duplicates, no
stored zeros) with fixed dtypes, so identical vectors are identical arrays and identical bytes.
Token counts and truncation need nothing sparse-specific: :func:`releval.retrieval.models.token_lengths`
works on a ``SparseEncoder`` as is (it reads ``model.tokenizer``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse

from releval import io
from releval.errors import InputError

DATA_FILE = "sparse_data.npy"  # float32 weights, row after row
INDICES_FILE = "sparse_indices.npy"  # int32 term ids, ascending within a row
INDPTR_FILE = "sparse_indptr.npy"  # int64 row starts into the two arrays above (n_rows + 1)
SHAPE_FILE = "sparse_shape.json"  # rows, vocabulary size, non-zeros; written last
SPARSE_FILES = (DATA_FILE, INDICES_FILE, INDPTR_FILE, SHAPE_FILE)

# Candidate scores held at once while searching: a batch of queries against the documents
# holds at most this many (document, score) pairs, about 0.5 GB with the sort's work arrays
# at worst (every document a candidate of every query), e.g. 8 queries at a time over 10^6
# documents.
SEARCH_SCORES = 1 << 23


# --------------------------------------------------------------------------- the model


def load_sparse_encoder(folder: Path, config):
    """A ``SparseEncoder`` over the MLM folder, under the config's length, device and dtype.

    Built from modules (the folder has no sentence-transformers ``modules.json``): a
    ``Transformer`` with ``transformer_task="fill-mask"`` (what the deprecated
    ``MLMTransformer`` wraps) and ``SpladePooling(max, relu)``. Local files only. Multi-device
    configs load on the first device; :func:`encode_sparse` spreads the work over all of them.
    SPLADE scores are unnormalised dot products, so a config that asks for normalised vectors
    is refused rather than silently recorded as normalised.
    """
    import torch
    import transformers
    from sentence_transformers import SparseEncoder
    from sentence_transformers.sparse_encoder.modules import SpladePooling, Transformer

    where = f"models.{config.name}"
    if config.normalize:
        raise InputError(
            "SPLADE scores are dot products of unnormalised term weights; set normalize: false",
            file="params.yaml",
            field=f"{where}.normalize",
        )
    folder = Path(folder)
    if not (folder / "config.json").is_file():
        raise InputError("no config.json: not a transformers model folder", file=str(folder), field="source")
    transformers.utils.logging.disable_progress_bar()
    offline = {"local_files_only": True}
    transformer = Transformer(
        str(folder),
        transformer_task="fill-mask",
        max_seq_length=config.max_seq_length,
        model_kwargs=dict(offline),
        processor_kwargs=dict(offline),
        config_kwargs=dict(offline),
    )
    positions = getattr(transformer.auto_model.config, "max_position_embeddings", None)
    if positions is not None and config.max_seq_length > positions:
        raise InputError(
            f"the model has {positions} positions; max_seq_length {config.max_seq_length} is longer",
            file="params.yaml",
            field=f"{where}.max_seq_length",
        )
    pooling = SpladePooling(pooling_strategy="max", activation_function="relu")
    model = SparseEncoder(modules=[transformer, pooling], device=config.devices[0], local_files_only=True)
    if config.dtype != "float32":
        model = model.to(getattr(torch, config.dtype))
    return model


def vocabulary_size(model) -> int:
    """Width of the model's sparse vectors: the MLM head's output size."""
    return int(model[0].auto_model.get_output_embeddings().weight.shape[0])


def sparse_protocol(model) -> dict[str, Any]:
    """The use protocol as the loaded modules carry it, recorded next to every score.

    Read from the model, not from the config, so a module that does something else than
    declared shows in the record. ``query_document_differ`` is true when queries and documents
    do not go through the same computation (a Router module, per-task lengths, query expansion);
    the prompts, which also differ per role, are in ``ModelConfig.protocol``.
    """
    from sentence_transformers.sparse_encoder.modules import Router, SpladePooling, Transformer

    modules = list(model)
    transformer = next((m for m in modules if isinstance(m, Transformer)), None)
    pooling = next((m for m in modules if isinstance(m, SpladePooling)), None)
    if transformer is None or pooling is None:
        raise ValueError(f"not a SPLADE model: modules {[type(m).__name__ for m in modules]}")
    differ = (
        any(isinstance(m, Router) for m in modules)
        or transformer.query_length != transformer.document_length
        or transformer.query_expansion is not None
    )
    return {
        "modules": [type(m).__name__ for m in modules],
        "architecture": type(transformer.auto_model).__name__,
        "transformer_task": transformer.transformer_task,
        "pooling_strategy": pooling.pooling_strategy,
        "activation_function": pooling.activation_function,
        "max_seq_length": int(model.max_seq_length),
        "vocabulary_size": vocabulary_size(model),
        "similarity": model.similarity_fn_name,
        "max_active_dims": model.max_active_dims,
        "weights_dtype": str(next(transformer.auto_model.parameters()).dtype).removeprefix("torch."),
        "query_document_differ": bool(differ),
    }


def encode_sparse(model, texts: Sequence[str], config, role: str) -> scipy.sparse.csr_matrix:
    """Encode ``texts`` as a canonical float32 CSR matrix of shape (len(texts), vocabulary).

    Queries go through ``encode_query``, documents through ``encode_document`` (the library's
    per-role entry points), each with the config's prompt for the role passed as is: "" stays
    "", so no prompt stored in a folder can be added unannounced. Deterministic for a given
    config (the batches, hence the padding, follow ``batch_size``).
    """
    if role not in ("query", "document"):
        raise ValueError(f"role must be 'query' or 'document', not {role!r}")
    encode = model.encode_query if role == "query" else model.encode_document
    prompt = config.query_prompt if role == "query" else config.document_prompt
    texts = list(texts)
    width = vocabulary_size(model)
    if not texts:
        return as_canonical(scipy.sparse.csr_matrix((0, width), dtype=np.float32))
    tensor = encode(
        texts,
        prompt=prompt,
        batch_size=config.batch_size,
        show_progress_bar=False,
        convert_to_tensor=True,
        convert_to_sparse_tensor=True,
        save_to_cpu=True,
        device=list(config.devices) if len(config.devices) > 1 else None,
    )
    tensor = tensor.coalesce()
    rows, columns = tensor.indices().numpy()
    weights = tensor.values().float().numpy()
    matrix = scipy.sparse.csr_matrix((weights, (rows, columns)), shape=(len(texts), width), dtype=np.float32)
    return as_canonical(matrix)


# --------------------------------------------------------------------------- the matrix and its storage


def as_canonical(matrix) -> scipy.sparse.csr_matrix:
    """A CSR copy with float32 weights, sorted indices, no duplicates and no stored zeros."""
    canonical = scipy.sparse.csr_matrix(matrix, dtype=np.float32, copy=True)
    canonical.sum_duplicates()  # also sorts the indices
    canonical.eliminate_zeros()
    canonical.sort_indices()
    return canonical


def is_canonical(matrix) -> bool:
    """Whether ``matrix`` is CSR with sorted, unique indices and no stored zeros."""
    return (
        scipy.sparse.issparse(matrix)
        and matrix.format == "csr"
        and bool(matrix.has_canonical_format)
        and bool(np.all(matrix.data != 0))
    )


def _stored_arrays(matrix: scipy.sparse.csr_matrix) -> dict[str, np.ndarray]:
    """The three arrays as written: fixed dtypes, so the bytes depend on the values only."""
    return {
        DATA_FILE: np.ascontiguousarray(matrix.data, dtype=np.float32),
        INDICES_FILE: np.ascontiguousarray(matrix.indices, dtype=np.int32),
        INDPTR_FILE: np.ascontiguousarray(matrix.indptr, dtype=np.int64),
    }


def write_sparse(folder: str | Path, matrix) -> None:
    """Write ``matrix`` (canonicalised) into ``folder`` as three ``.npy`` arrays and a shape file.

    Not ``scipy.sparse.save_npz``: its zip entries carry timestamps, so identical matrices
    would give different bytes. Each file is written atomically; the shape file, written last,
    records the non-zeros so :func:`read_sparse` notices arrays from two different writes.
    """
    folder = Path(folder)
    canonical = as_canonical(matrix)
    for name, array in _stored_arrays(canonical).items():
        io.write_npy(folder / name, array)
    rows, width = canonical.shape
    io.write_json(folder / SHAPE_FILE, {"format": "csr", "rows": rows, "vocabulary_size": width, "nnz": canonical.nnz})


def read_sparse(folder: str | Path) -> scipy.sparse.csr_matrix:
    """The matrix :func:`write_sparse` wrote, checked for consistency."""
    folder = Path(folder)
    for name in SPARSE_FILES:
        if not (folder / name).is_file():
            raise InputError("sparse vectors incomplete; run the stage that encodes them", file=str(folder / name))
    shape = json.loads((folder / SHAPE_FILE).read_text(encoding="utf-8"))
    data, indices, indptr = (io.read_npy(folder / name) for name in (DATA_FILE, INDICES_FILE, INDPTR_FILE))
    rows, width = int(shape["rows"]), int(shape["vocabulary_size"])
    if not (len(indptr) == rows + 1 and len(data) == len(indices) == indptr[-1] == shape["nnz"]):
        raise InputError(
            f"arrays do not match the shape file (rows {rows}, nnz {shape['nnz']}); re-run the encoding",
            file=str(folder),
        )
    matrix = scipy.sparse.csr_matrix((data, indices, indptr), shape=(rows, width))
    try:
        matrix.check_format(full_check=True)
    except ValueError as exc:
        raise InputError(f"malformed sparse vectors ({exc}); re-run the encoding", file=str(folder)) from None
    return matrix


def sparse_stats(matrix) -> dict[str, Any]:
    """The operational figures of a sparse cell: how many terms a row keeps, and the index's size.

    ``index_bytes`` is the stored arrays' size (float32 weights, int32 term ids, int64 row
    starts): 8 bytes a non-zero. Searching holds the inverted index beside them, in float64
    (12 bytes a non-zero), see :func:`sparse_search`.
    """
    canonical = as_canonical(matrix)
    per_row = np.diff(canonical.indptr).astype(np.float64)
    rows, width = canonical.shape
    has_rows = rows > 0
    return {
        "rows": int(rows),
        "vocabulary_size": int(width),
        "nnz": int(canonical.nnz),
        "nnz_per_row_mean": float(per_row.mean()) if has_rows else 0.0,
        "nnz_per_row_median": float(np.median(per_row)) if has_rows else 0.0,
        "nnz_per_row_p95": float(np.percentile(per_row, 95)) if has_rows else 0.0,
        "active_terms": int(np.unique(canonical.indices).size),
        "index_bytes": int(sum(array.nbytes for array in _stored_arrays(canonical).values())),
    }


# --------------------------------------------------------------------------- search


def inverted_index(documents) -> scipy.sparse.csr_matrix:
    """The inverted index of a sparse cell: for each term, the documents holding it and their
    weights, in float64 (shape vocabulary x documents). Built once per cell and searched by
    :func:`search_inverted` for every query; 12 bytes a document non-zero (~1.8 GB for 10^6
    documents of 150 terms)."""
    return _search_input(documents, "documents").T.tocsr().astype(np.float64)


def sparse_search(documents, queries, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k documents of each query by dot product: :func:`search_inverted` over the
    :func:`inverted_index` of ``documents``."""
    return search_inverted(inverted_index(documents), queries, k)


def search_inverted(postings: scipy.sparse.csr_matrix, queries, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k documents of each query by dot product, through the inverted index ``postings``.

    Returns positions (int64) and scores (float64), both of shape (n_queries, min(k, n_documents)).
    Scores are summed in float64. Equal scores are ordered by document position, ascending.

    A document that shares no term with the query is not a hit: SPLADE weights are never
    negative, so score 0 means exactly that, and such slots hold position -1 and score -inf
    (the convention of :func:`releval.retrieval.dense.search` for "no hit"). A query with fewer
    than k hits therefore ends in -1s. Negative weights would break that equivalence and are
    refused.

    Memory stays bounded: queries are scored a batch at a time, at most ``SEARCH_SCORES``
    candidate (query, document) pairs per batch.
    """
    queries = _search_input(queries, "queries")
    if postings.shape[0] != queries.shape[1]:
        raise InputError(
            f"queries have {queries.shape[1]} terms, documents {postings.shape[0]}: not the same model",
            field="vocabulary_size",
        )
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 0:
        raise InputError(f"k must be a non-negative integer, not {k!r}", field="k")
    n_queries, n_documents = queries.shape[0], postings.shape[1]
    k = min(int(k), n_documents)
    positions = np.full((n_queries, k), -1, dtype=np.int64)
    scores = np.full((n_queries, k), -np.inf, dtype=np.float64)
    if k == 0 or n_queries == 0:
        return positions, scores
    step = max(1, SEARCH_SCORES // n_documents)
    for start in range(0, n_queries, step):
        batch = queries[start : start + step].astype(np.float64)
        product = (batch @ postings).tocsr()  # only documents sharing a term with a query
        product.eliminate_zeros()  # products that underflow to 0 are no evidence of a shared term
        _fill_top_k(product, k, positions[start : start + step], scores[start : start + step])
    return positions, scores


def _search_input(matrix, name: str) -> scipy.sparse.csr_matrix:
    if not scipy.sparse.issparse(matrix):
        raise InputError(f"{name} must be a scipy sparse matrix, not {type(matrix).__name__}", field=name)
    matrix = matrix.tocsr()
    if matrix.nnz and (matrix.data.min() < 0 or not np.isfinite(matrix.data).all()):
        raise InputError(f"{name} hold negative or non-finite weights; SPLADE weights are >= 0", field=name)
    return matrix


def _fill_top_k(product: scipy.sparse.csr_matrix, k: int, positions: np.ndarray, scores: np.ndarray) -> None:
    """Write each row's k best (score descending, then document ascending) into the slices given.

    Only the candidates at or above a row's k-th best score are sorted (a partition finds it):
    common terms make most documents candidates, and sorting them all is what would cost.
    """
    for row in range(product.shape[0]):
        start, end = product.indptr[row], product.indptr[row + 1]
        documents, weights = product.indices[start:end], product.data[start:end]
        if end - start > k:
            threshold = np.partition(weights, end - start - k)[end - start - k]
            best = weights >= threshold  # ties at the threshold stay: position decides among them
            documents, weights = documents[best], weights[best]
        order = np.lexsort((documents, -weights))[:k]  # the last key sorts first
        positions[row, : len(order)] = documents[order]
        scores[row, : len(order)] = weights[order]
