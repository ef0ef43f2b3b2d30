"""Dense index and search over usearch: HNSW or exact, with scores where higher is better."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from releval.config import build
from releval.errors import InputError
from releval.progress import Progress, tracker
from releval.retrieval import runs


@dataclasses.dataclass(frozen=True)
class IndexConfig:
    """How a cell's vectors are searched.

    ``exact: auto`` (the default) searches exactly below ``exact_below`` vectors and through an
    HNSW graph above: exact search is deterministic (ties broken by chunk position) and costs
    about a millisecond per query at 20,000 384-d vectors on one core. usearch builds the graph
    byte for byte the same only on one thread (``build_threads: 1``, measured); with more, the
    graph and so the ANN rankings differ from build to build.
    """

    metric: str = "cos"
    dtype: str = "f32"
    connectivity: int = 16
    expansion_add: int = 128
    expansion_search: int = 64
    exact: bool | str = "auto"
    exact_below: int = 100_000
    build_threads: int = 1

    def __post_init__(self):
        if self.metric not in ("cos", "ip", "l2sq"):
            raise InputError("expected cos, ip or l2sq", file="params.yaml", field="retriever.index.metric")
        if self.dtype not in ("f32", "f16", "i8"):
            raise InputError("expected f32, f16 or i8", file="params.yaml", field="retriever.index.dtype")
        if self.exact not in (True, False, "auto"):
            raise InputError("expected true, false or auto", file="params.yaml", field="retriever.index.exact")
        if isinstance(self.build_threads, bool) or not isinstance(self.build_threads, int) or self.build_threads < 0:
            raise InputError(
                "expected an integer >= 0 (0: all cores)", file="params.yaml", field="retriever.index.build_threads"
            )

    def is_exact(self, n_vectors: int) -> bool:
        """Whether a cell of ``n_vectors`` vectors is searched exactly."""
        return self.exact is True or (self.exact == "auto" and n_vectors < self.exact_below)

    @classmethod
    def from_params(cls, data: dict) -> "IndexConfig":
        return build(cls, data, where="retriever.index")


def build_index(vectors: np.ndarray, config: IndexConfig, desc: str | None = None):
    """The HNSW graph of ``vectors`` (key: row position); with ``desc``, its progress as vectors are added.

    The vectors go in as one call, in row order: usearch's progress callback only reports, and the
    graph (so the saved bytes) is the one built without it (measured).
    """
    from usearch.index import Index

    index = Index(
        ndim=vectors.shape[1],
        metric=config.metric,
        dtype=config.dtype,
        connectivity=config.connectivity,
        expansion_add=config.expansion_add,
        expansion_search=config.expansion_search,
    )
    with tracker(desc, len(vectors), "vectors") as bar:
        keys = np.arange(len(vectors), dtype=np.uint64)
        index.add(keys, vectors, threads=config.build_threads, progress=_usearch_callback(bar))
    return index


def _usearch_callback(bar: Progress):
    """usearch's progress callback (vectors added so far, total) -> keep going, advancing ``bar``."""

    def report(added, total):
        bar.update(max(added - bar.done, 0))  # usearch reports a running count, from any of its threads
        return True

    # usearch checks the annotations are the types int, int -> bool; this module's would be strings.
    report.__annotations__ = {"added": int, "total": int, "return": bool}
    return report


def restore_index(path: str, config: IndexConfig):
    from usearch.index import Index

    index = Index.restore(path)
    index.expansion_search = config.expansion_search
    return index


def similarity_from_distance(distances: np.ndarray, metric: str) -> np.ndarray:
    """usearch returns distances (cos/ip: 1 − similarity; l2sq: squared distance); flip to 'higher is better'."""
    distances = distances.astype(np.float64)
    return -distances if metric == "l2sq" else 1.0 - distances


def search(
    index, vectors: np.ndarray, queries: np.ndarray, k: int, config: IndexConfig, exact: bool | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Top-k positions (−1 where fewer hits) and similarities for each query."""
    k = min(k, len(vectors))
    if exact if exact is not None else config.is_exact(len(vectors)):
        return exact_search(vectors, queries, k, config.metric)
    matches = index.search(queries, k)
    keys = np.asarray(matches.keys).reshape(len(queries), -1).astype(np.int64)
    distances = np.asarray(matches.distances).reshape(len(queries), -1)
    # One query gives a Matches (no counts; only real hits), a batch gives BatchMatches.
    counts = np.asarray(matches.counts if hasattr(matches, "counts") else [keys.shape[1]]).reshape(-1)
    # k columns always, so that the results of blocks of queries (one query included) stack.
    keys = np.pad(keys, ((0, 0), (0, k - keys.shape[1])))
    distances = np.pad(distances, ((0, 0), (0, k - distances.shape[1])))
    filled = np.arange(keys.shape[1])[None, :] < counts[:, None]
    keys = np.where(filled, keys, -1)
    # Slots past a query's count hold whatever usearch left there (NaN, garbage): never computed on.
    similarities = similarity_from_distance(np.where(filled, distances, 0.0), config.metric)
    return keys, np.where(filled, similarities, -np.inf)


EXACT_BATCH = 64  # queries scored at once: 64 x 100,000 float64 similarities is 51 MB


def exact_search(vectors: np.ndarray, queries: np.ndarray, k: int, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """Top-k by brute force in float64, equal similarities ordered by position: the same on every run
    and every machine (every sum in a similarity is exact, see :func:`grid_products`).

    Similarities are usearch's (cos: cosine, ip: inner product, l2sq: minus the squared distance),
    so exact and HNSW scores are on one scale.
    """
    bits = grid_bits(np.shape(vectors)[1])
    base = on_grid(vectors, bits)
    tiny = np.finfo(np.float64).tiny
    base_squares = base.squares()
    base_norms = np.maximum(np.sqrt(base_squares), tiny)
    k = min(k, len(base.high))
    keys = np.empty((len(queries), k), dtype=np.int64)
    scores = np.empty((len(queries), k), dtype=np.float64)
    for start in range(0, len(queries), EXACT_BATCH):
        batch = on_grid(queries[start : start + EXACT_BATCH], bits)
        sims = grid_products(batch, base)
        if metric == "cos":
            sims /= np.maximum(np.sqrt(batch.squares()), tiny)[:, None] * base_norms[None, :]
        elif metric == "l2sq":
            sims = -((batch.squares()[:, None] - 2.0 * sims) + base_squares[None, :])
        # Stable sort of the negated scores: ties keep position order.
        order = np.argsort(-sims, axis=1, kind="stable")[:, :k]
        keys[start : start + len(sims)] = order
        scores[start : start + len(sims)] = np.take_along_axis(sims, order, axis=1)
    return keys, scores


# --- dot products that every machine computes alike ---------------------------------------------
#
# A float64 matrix product sums in the order its BLAS kernel chooses, and kernels are chosen per
# machine (numpy's OpenBLAS runs its SkylakeX kernel on an AVX-512 CPU, its Haswell one elsewhere:
# measured, the same vectors gave different last bits of the similarities). Sums of integers are
# exact in any order while no partial sum passes 2**53. So each row is written as integers: scaled by
# a power of two to below 2**bits, ``high`` its rounding and ``low`` the rounding of what is left,
# 2**bits times finer (:func:`on_grid`); a dot product is then three products of integer matrices,
# each exact whatever the kernel, the threads or the order (:func:`grid_bits` keeps every sum under
# 2**53), scaled back by powers of two (exact) and added once (one rounding, the same everywhere);
# a cosine divides by norms from such sums. The row is kept to about 2 * bits bits (44 at 384
# dimensions) below its largest component, so a cosine is within ~1e-13 of the float64 one computed
# any other way: the rankings are float64 search's, only ties closer than that are decided apart.


@dataclasses.dataclass(frozen=True)
class GridRows:
    """Rows as ``(high + low * 2**-bits) * 2**(exponent - bits)``: ``high``, ``low`` integers stored as
    float64, at most 2**bits and 2**(bits - 1) in size; ``exponent`` one power of two per row."""

    high: np.ndarray
    low: np.ndarray
    exponent: np.ndarray
    bits: int

    def squares(self) -> np.ndarray:
        """Each row's dot product with itself."""
        return _combine(
            np.einsum("ij,ij->i", self.high, self.high),
            2.0 * np.einsum("ij,ij->i", self.high, self.low),
            2 * self.exponent - 2 * self.bits,
            self.bits,
        )


def grid_bits(dimension: int) -> int:
    """The bits b of :class:`GridRows` for vectors of ``dimension``: a sum of ``dimension`` products of two
    integers of at most 2**b is at most 2**53 (every partial sum an integer float64 holds exactly)."""
    return (53 - max(int(dimension) - 1, 1).bit_length()) // 2


def on_grid(rows: np.ndarray, bits: int) -> GridRows:
    """``rows`` (float64, finite) as :class:`GridRows`."""
    rows = np.asarray(rows, dtype=np.float64)
    _, exponent = np.frexp(np.abs(rows).max(axis=1, initial=0.0))  # every |x| of the row < 2**exponent
    scaled = np.ldexp(rows, (bits - exponent)[:, None])  # exact: a power of two; |scaled| < 2**bits
    high = np.rint(scaled)
    scaled -= high  # exact (Sterbenz); at most 1/2
    low = np.rint(np.ldexp(scaled, bits, out=scaled), out=scaled)
    return GridRows(high, low, exponent.astype(np.int64), bits)


def _combine(main: np.ndarray, cross: np.ndarray, exponent: np.ndarray, bits: int) -> np.ndarray:
    """``main * 2**exponent + cross * 2**(exponent - bits)``: both exact, one rounding in their sum."""
    return np.ldexp(main, exponent) + np.ldexp(cross, exponent - bits)


def grid_products(a: GridRows, b: GridRows) -> np.ndarray:
    """``(len(a), len(b))`` float64 dot products, the same bits on every machine (see above)."""
    main = a.high @ b.high.T  # integers, each partial sum at most 2**53: exact
    cross = a.high @ b.low.T  # at most 2**52 each
    cross += a.low @ b.high.T  # the sum at most 2**53: exact
    return _combine(main, cross, a.exponent[:, None] + b.exponent[None, :] - 2 * a.bits, a.bits)


def grid_pair_products(a: GridRows, b: GridRows) -> np.ndarray:
    """Dot product of row i of ``a`` with row i of ``b``, for each i (float64, the same on every machine)."""
    main = np.einsum("ij,ij->i", a.high, b.high)
    cross = np.einsum("ij,ij->i", a.high, b.low) + np.einsum("ij,ij->i", a.low, b.high)
    return _combine(main, cross, a.exponent + b.exponent - 2 * a.bits, a.bits)


def recall_against_exact(approx: np.ndarray, exact: np.ndarray) -> float:
    """Mean share of each query's exact top-k that the approximate search also returned."""
    k = exact.shape[1]
    hits = [len(set(a[a >= 0]) & set(e[e >= 0])) / max((e >= 0).sum(), 1) for a, e in zip(approx[:, :k], exact)]
    return float(np.mean(hits)) if hits else 1.0


def model_run_meta(
    model: str,
    chunking: str,
    *,
    encode_stats: Mapping[str, Any],
    index_stats: Mapping[str, Any],
    ann_recall: Mapping[int, float],
    latencies: Mapping[str, float],
    latency_from: str,
    peak_rss_bytes: int,
    top_k: int,
    queries: int,
    query_figures: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """run.json of one model's run (any family): what was encoded and indexed, at what cost, and
    the model's use protocol. ``kind`` is the family (dense, sparse or static). ``latency_from``
    (where the encoding part of the latency came from) sits beside ``ops``, not in it: scoring sorts
    ``ops`` by name into cost figures, kept with the quality figures, and machine figures
    (measurement.operations), and this note changes from run to run."""
    family = encode_stats.get("family", "dense")
    sparse_figures = {
        name: encode_stats[key]
        for name, key in (
            ("vocabulary_size", "vocabulary_size"),
            ("doc_nonzeros_mean", "nnz_per_row_mean"),
            ("doc_nonzeros_p95", "nnz_per_row_p95"),
        )
        if key in encode_stats
    }
    return {
        "config_id": runs.dense_id(model, chunking),
        "kind": family,
        "model": model,
        "chunking": chunking,
        "inputs": [],
        "ops": {
            "dimension": encode_stats["dimension"],
            **sparse_figures,
            **dict(query_figures or {}),
            **{key: encode_stats[key] for key in ("index_cost",) if key in encode_stats},  # priced endpoints
            "chunks_per_s": encode_stats["chunks_per_s"],
            "tokens_per_s": encode_stats["tokens_per_s"],
            "truncation_rate": encode_stats["truncation_rate"],
            "truncated_token_share": encode_stats["truncated_token_share"],
            "index_bytes": index_stats["index_bytes"],
            "index_build_s": index_stats["build_s"],
            **{f"ann_recall@{k}": round(value, 6) for k, value in ann_recall.items()},
            **latencies,
            "peak_rss_bytes": peak_rss_bytes,  # the query side: model, vectors and index loaded
        },
        "latency_from": latency_from,
        "models": {
            model: {
                "revision": encode_stats["model_revision"],
                "weights_sha256": encode_stats["weights_sha256"],
                "protocol": encode_stats["protocol"],
                **({"encoder": encode_stats["encoder"]} if "encoder" in encode_stats else {}),
            }
        },
        "top_k": top_k,
        "queries": queries,
    }
