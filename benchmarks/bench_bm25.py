"""BM25: rank-bm25 ``BM25Okapi.get_scores`` against the vectorised ``releval.retrieval.bm25.BM25Index``.

Builds a seeded corpus of ``--docs`` chunks (Cranfield abstracts replicated with token
perturbation, or synthetic Zipfian text when ../shared/data/cranfield is absent), scores
``--queries`` queries with both implementations, checks the scores agree, and prints
per-query latency, the speed ratio, index build time and index memory.

    python benchmarks/bench_bm25.py [--docs 50000] [--queries 100] [--seed 0]
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
import tracemalloc
from pathlib import Path

import numpy as np
from rank_bm25 import BM25Okapi

from releval.retrieval.bm25 import BM25Index, tokenize

CRANFIELD = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "cranfield"
PERTURB_RATE = 0.15  # share of tokens replaced in each replicated document
SYNTHETIC_VOCAB = 200_000  # distinct noise / synthetic terms, drawn Zipf-like


def read_smart_abstracts(path: Path) -> list[str]:
    """The ``.W`` text of each ``.I`` record (minimal SMART reader, for benchmarking only)."""
    records = re.split(r"^\.I .*$", path.read_text(encoding="utf-8"), flags=re.MULTILINE)[1:]
    return [
        dict(re.findall(r"^\.([TABW])\s*$\n(.*?)(?=^\.[TABW]\s*$|\Z)", record, flags=re.MULTILINE | re.DOTALL)).get(
            "W", ""
        )
        for record in records
    ]


def zipf_terms(rng: np.random.Generator, size: int) -> list[str]:
    ranks = np.minimum(rng.zipf(1.2, size=size), SYNTHETIC_VOCAB)
    return [f"z{rank}" for rank in ranks]


def perturbed_replicas(seed_docs: list[list[str]], n_docs: int, rng: np.random.Generator) -> list[list[str]]:
    """Copies of random seed documents with ~PERTURB_RATE of their tokens replaced by Zipf noise."""
    picks = rng.integers(0, len(seed_docs), size=n_docs)
    corpus = []
    for pick in picks:
        doc = list(seed_docs[pick])
        positions = np.flatnonzero(rng.random(len(doc)) < PERTURB_RATE)
        for position, term in zip(positions, zipf_terms(rng, len(positions))):
            doc[position] = term
        corpus.append(doc)
    return corpus


def synthetic_corpus(n_docs: int, rng: np.random.Generator) -> list[list[str]]:
    lengths = rng.integers(20, 200, size=n_docs)
    return [zipf_terms(rng, int(length)) for length in lengths]


def load_corpus_and_queries(n_docs: int, n_queries: int, seed: int) -> tuple[str, list[list[str]], list[list[str]]]:
    rng = np.random.default_rng(seed)
    docs_path, queries_path = CRANFIELD / "cran.all.1400", CRANFIELD / "cran.qry"
    if docs_path.is_file() and queries_path.is_file():
        seed_docs = [tokenize(text) for text in read_smart_abstracts(docs_path)]
        queries = [tokenize(text) for text in read_smart_abstracts(queries_path)]
        corpus = perturbed_replicas(seed_docs, n_docs, rng)
        source = f"Cranfield x{n_docs / len(seed_docs):.1f}, {PERTURB_RATE:.0%} tokens perturbed"
    else:
        corpus = synthetic_corpus(n_docs, rng)
        queries = [zipf_terms(rng, int(rng.integers(3, 12))) for _ in range(n_queries)]
        source = "synthetic Zipf text (Cranfield not found)"
    picked = rng.choice(len(queries), size=min(n_queries, len(queries)), replace=False)
    return source, corpus, [queries[i] for i in sorted(picked)]


def timed(function, *args):
    start = time.perf_counter()
    result = function(*args)
    return result, time.perf_counter() - start


def latencies(score, queries: list[list[str]]) -> tuple[list[float], list[np.ndarray]]:
    times, results = [], []
    for query in queries:
        result, seconds = timed(score, query)
        times.append(seconds)
        results.append(result)
    return times, results


def peak_build_memory(corpus: list[list[str]]) -> int:
    tracemalloc.start()
    BM25Index.build(corpus)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def describe(name: str, times: list[float]) -> str:
    ms = sorted(t * 1e3 for t in times)
    p95 = ms[min(len(ms) - 1, int(0.95 * len(ms)))]
    return f"{name:<22} mean {statistics.fmean(ms):9.3f} ms  median {statistics.median(ms):9.3f} ms  p95 {p95:9.3f} ms"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=50_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--k", type=int, default=10)
    args = parser.parse_args(argv)

    source, corpus, queries = load_corpus_and_queries(args.docs, args.queries, args.seed)
    n_tokens = sum(map(len, corpus))
    print(f"corpus: {len(corpus):,} docs, {n_tokens:,} tokens ({source}); {len(queries)} queries")

    index, build_ours = timed(BM25Index.build, corpus)
    reference, build_ref = timed(BM25Okapi, corpus)
    print(f"build: vectorised {build_ours:.2f} s, rank-bm25 {build_ref:.2f} s")
    print(
        f"index: {len(index.vocabulary):,} terms, {index.weights.nnz:,} nonzeros, "
        f"arrays {index.nbytes / 2**20:.1f} MiB, peak traced during build "
        f"{peak_build_memory(corpus) / 2**20:.1f} MiB"
    )

    ref_times, ref_scores = latencies(reference.get_scores, queries)
    our_times, our_scores = latencies(index.get_scores, queries)
    (top_indices, top_scores), batch_seconds = timed(index.top_k, queries, args.k)

    max_diff = max(float(np.max(np.abs(a - b))) for a, b in zip(ref_scores, our_scores))
    top_ok = all(
        np.array_equal(top_indices[i], np.lexsort((np.arange(len(s)), -s))[: args.k]) for i, s in enumerate(our_scores)
    )
    print(
        f"max |score difference| over all queries and docs: {max_diff:.3e} "
        f"({'OK' if max_diff <= 1e-9 else 'MISMATCH'} at 1e-9); top_k consistent: {top_ok}"
    )

    print(describe("rank-bm25 get_scores", ref_times))
    print(describe("vectorised get_scores", our_times))
    print(
        f"{'vectorised top_k batch':<22} {batch_seconds * 1e3:.1f} ms for {len(queries)} queries "
        f"(k={args.k}) = {batch_seconds * 1e3 / len(queries):.3f} ms/query"
    )
    mean_ratio = statistics.fmean(ref_times) / statistics.fmean(our_times)
    median_ratio = statistics.median(ref_times) / statistics.median(our_times)
    batch_ratio = sum(ref_times) / batch_seconds
    print(
        f"speed ratio (rank-bm25 / vectorised): mean {mean_ratio:.0f}x, median {median_ratio:.0f}x, "
        f"batch top_k {batch_ratio:.0f}x (goal >= 20x)"
    )


if __name__ == "__main__":
    main()
