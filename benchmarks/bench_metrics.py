"""Benchmark releval's metric engine against pytrec_eval and ranx on one synthetic collection.

5,000 queries x 1,000 retrieved docs (seeded random), ~50 judgments per query, 6 metrics, all three
libraries under trec_eval's conventions so their means can be checked against each other. Each
library runs in a fresh process (spawned: polars' thread pool does not survive a fork) that loads
the same polars tables from parquet, so the peak memory reported (resident set high-water mark
above the process's size once the tables are loaded) is its own. Turning the tables into a
library's input is timed apart from scoring. ranx's numba functions are compiled into an empty
cache directory, so its first call includes compilation and its second does not. Speed is
reported here and never asserted in tests.

Run: ``python benchmarks/bench_metrics.py`` (Linux: it reads /proc/self/status).
"""

from __future__ import annotations

import multiprocessing
import os
import tempfile
import time
import warnings
from typing import Any, Callable

import numpy as np
import polars as pl

N_QUERIES, N_RETRIEVED, N_JUDGED, N_UNRETRIEVED_JUDGED, COLLECTION_SIZE = 5_000, 1_000, 40, 10, 200_000
RELEVAL_METRICS = ["ndcg@10", "ndcg@100", "map", "recall@100", "p@10", "mrr"]
RANX_METRICS = ["ndcg@10", "ndcg@100", "map", "recall@100", "precision@10", "mrr"]
PYTREC_EVAL_MEASURES = {"ndcg_cut.10,100", "map", "recall.100", "P.10", "recip_rank"}
PYTREC_EVAL_NAMES = ["ndcg_cut_10", "ndcg_cut_100", "map", "recall_100", "P_10", "recip_rank"]


def build_collection(seed: int = 0) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Judgments and a run; judged relevant docs score a little higher, as a real retriever's would."""
    rng = np.random.default_rng(seed)
    query_ids, run_docs, judged_docs = [], [], []
    for query in range(N_QUERIES):
        docs = rng.choice(COLLECTION_SIZE, N_RETRIEVED + N_UNRETRIEVED_JUDGED, replace=False)
        run_docs.append(docs[:N_RETRIEVED])
        judged_docs.append(
            np.concatenate([rng.choice(docs[:N_RETRIEVED], N_JUDGED, replace=False), docs[N_RETRIEVED:]])
        )
        query_ids.append(f"q{query:05d}")
    grades = rng.choice(4, N_QUERIES * (N_JUDGED + N_UNRETRIEVED_JUDGED), p=[0.5, 0.25, 0.15, 0.1])
    qrels = pl.DataFrame(
        {
            "query_id": np.repeat(query_ids, N_JUDGED + N_UNRETRIEVED_JUDGED),
            "doc_id": [f"d{doc:07d}" for doc in np.concatenate(judged_docs)],
            "grade": grades,
        }
    )
    run = pl.DataFrame(
        {
            "query_id": np.repeat(query_ids, N_RETRIEVED),
            "doc_id": [f"d{doc:07d}" for doc in np.concatenate(run_docs)],
            "score": rng.normal(size=N_QUERIES * N_RETRIEVED),
        }
    )
    boost = qrels.select("query_id", "doc_id", (pl.col("grade") * 0.4).alias("boost"))
    run = run.join(boost, on=["query_id", "doc_id"], how="left", maintain_order="left").select(
        "query_id", "doc_id", pl.col("score") + pl.col("boost").fill_null(0.0)
    )
    return qrels, run


def as_nested_dict(frame: pl.DataFrame, value: str) -> dict[str, dict[str, Any]]:
    nested: dict[str, dict[str, Any]] = {}
    for query_id, doc_id, item in frame.select("query_id", "doc_id", value).iter_rows():
        nested.setdefault(query_id, {})[doc_id] = item
    return nested


def timed(function: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = function()
    return time.perf_counter() - start, result


def measure_releval(qrels: pl.DataFrame, run: pl.DataFrame) -> dict[str, Any]:
    from releval.measurement.metrics import Contract, evaluate

    calls = [timed(lambda: evaluate(qrels, run, RELEVAL_METRICS, Contract.trec_eval())) for _ in range(3)]
    return {
        "convert_s": 0.0,
        "first_s": calls[0][0],
        "scoring_s": min(t for t, _ in calls[1:]),
        "compile_s": None,
        "means": [calls[-1][1].mean[name] for name in RELEVAL_METRICS],
    }


def measure_pytrec_eval(qrels: pl.DataFrame, run: pl.DataFrame) -> dict[str, Any]:
    import pytrec_eval

    convert_s, (qrels_dict, run_dict) = timed(lambda: (as_nested_dict(qrels, "grade"), as_nested_dict(run, "score")))

    def score() -> dict[str, float]:
        per_query = pytrec_eval.RelevanceEvaluator(qrels_dict, PYTREC_EVAL_MEASURES).evaluate(run_dict)
        return {name: float(np.mean([values[name] for values in per_query.values()])) for name in PYTREC_EVAL_NAMES}

    calls = [timed(score) for _ in range(2)]
    return {
        "convert_s": convert_s,
        "first_s": calls[0][0],
        "scoring_s": calls[1][0],
        "compile_s": None,
        "means": [calls[-1][1][name] for name in PYTREC_EVAL_NAMES],
    }


def measure_ranx(qrels: pl.DataFrame, run: pl.DataFrame) -> dict[str, Any]:
    os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="releval-bench-numba-")
    import ranx
    from numba.core.errors import NumbaTypeSafetyWarning

    warnings.simplefilter("ignore", NumbaTypeSafetyWarning)  # raised inside ranx's own ndcg; not ours to fix

    def convert() -> tuple[Any, Any]:
        return ranx.Qrels(as_nested_dict(qrels, "grade")), ranx.Run(as_nested_dict(run, "score"))

    convert_s, (ranx_qrels, ranx_run) = timed(convert)
    calls = [timed(lambda: ranx.evaluate(ranx_qrels, ranx_run, RANX_METRICS)) for _ in range(2)]
    return {
        "convert_s": convert_s,
        "first_s": calls[0][0],
        "scoring_s": calls[1][0],
        "compile_s": calls[0][0] - calls[1][0],
        "means": [float(calls[-1][1][name]) for name in RANX_METRICS],
    }


def memory_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def _child(measure: Callable, qrels_path: str, run_path: str, results) -> None:
    qrels, run = pl.read_parquet(qrels_path), pl.read_parquet(run_path)
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")  # restart the resident high-water mark at the current size
    start_kib = memory_kib("VmRSS")
    result = measure(qrels, run)
    results.put({**result, "peak_mib": (memory_kib("VmHWM") - start_kib) / 1024})


def in_own_process(measure: Callable, qrels_path: str, run_path: str) -> dict[str, Any]:
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    process = context.Process(target=_child, args=(measure, qrels_path, run_path, results))
    process.start()
    result = results.get()
    process.join()
    return result


def format_table(results: dict[str, dict[str, Any]]) -> str:
    base = results["releval"]
    base_end_to_end = base["convert_s"] + base["first_s"]
    header = (
        f"{'library':<12}{'convert s':>11}{'first call s':>14}{'scoring s':>11}{'compile s':>11}"
        f"{'peak MiB':>10}{'scoring x':>11}{'end-to-end x':>14}"
    )
    lines = [header, "-" * len(header)]
    for name, result in results.items():
        compile_s = "-" if result["compile_s"] is None else f"{result['compile_s']:.2f}"
        end_to_end = result["convert_s"] + result["first_s"]
        lines.append(
            f"{name:<12}{result['convert_s']:>11.2f}{result['first_s']:>14.2f}{result['scoring_s']:>11.2f}"
            f"{compile_s:>11}{result['peak_mib']:>10.0f}{result['scoring_s'] / base['scoring_s']:>11.1f}"
            f"{end_to_end / base_end_to_end:>14.1f}"
        )
    lines += ["", f"{'mean':<12}" + "".join(f"{name:>14}" for name in results)]
    for i, metric in enumerate(RELEVAL_METRICS):
        lines.append(f"{metric:<12}" + "".join(f"{result['means'][i]:>14.6f}" for result in results.values()))
    return "\n".join(lines)


def main() -> None:
    build_s, (qrels, run) = timed(build_collection)
    print(
        f"collection: {N_QUERIES} queries x {N_RETRIEVED} retrieved = {run.height:,} run rows, "
        f"{qrels.height:,} judgments (built in {build_s:.1f} s); {os.cpu_count()} CPUs; metrics: "
        f"{', '.join(RELEVAL_METRICS)} under trec_eval's conventions"
    )
    with tempfile.TemporaryDirectory(prefix="releval-bench-") as folder:
        qrels_path, run_path = os.path.join(folder, "qrels.parquet"), os.path.join(folder, "run.parquet")
        qrels.write_parquet(qrels_path)
        run.write_parquet(run_path)
        del qrels, run
        results = {
            name: in_own_process(measure, qrels_path, run_path)
            for name, measure in [
                ("releval", measure_releval),
                ("pytrec_eval", measure_pytrec_eval),
                ("ranx", measure_ranx),
            ]
        }
    print(format_table(results))
    print(
        "\nconvert: polars tables -> the library's input; first call: includes numba compilation for ranx; "
        "scoring: a later call; x: time relative to releval (scoring, and convert + first call)."
    )


if __name__ == "__main__":
    main()
