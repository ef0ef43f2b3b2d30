"""Run tables and configuration ids.

A run is a polars table ``query_id, chunk_id, doc_id, score, rank`` (rank 1 = best;
:data:`releval.tables.CHUNK_RUN`) over the chunks of one chunking; scoring collapses it to the
judged unit (documents: :data:`releval.tables.RANKED_DOC_RUN`). Every run is
written with a sidecar ``run.json`` that carries its configuration id, what it was made from
and its operational figures.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from releval import io
from releval.errors import InputError
from releval.tables import CHUNK_RUN, RANKED_DOC_RUN

RUN_SCHEMA = CHUNK_RUN.schema  # the old name, which provenance/archive.py and tests import


def dense_id(model: str, chunking: str) -> str:
    return f"{model}/{chunking}"


def bm25_id(chunking: str) -> str:
    return f"bm25/{chunking}"


def fused_id(fusion: str, model: str, chunking: str) -> str:
    return f"{fusion}({model},bm25)/{chunking}"


EXTERNAL = "external"
MODEL = "model"  # model/<model>/<chunking>: the runs of every model family (paths.MODEL_RUNS)
DOCUMENTS_UNIT = "documents"  # the "chunking" of a fusion whose members are all external runs


def external_id(name: str) -> str:
    """A run file produced elsewhere (``grid.external``): ``external/prod``."""
    return f"{EXTERNAL}/{name}"


def is_external(config_id: str) -> bool:
    return config_id.startswith(f"{EXTERNAL}/")


def member_name(member: str) -> str:
    """How a fused run names one member (its weight's key): ``minilm``, ``bm25``, ``external/prod``."""
    cid = run_path_id(member)
    return cid if is_external(cid) else cid.rsplit("/", 1)[0]


def multi_fused_id(fusion: str, members: Sequence[str]) -> str:
    """A fusion of several first-stage runs of one chunking: ``rrf(splade,minilm)/c256``.

    External runs (document level) fuse with runs of any one chunking: ``rrf(external/prod,minilm)/c256``,
    or ``rrf(external/a,external/b)/documents`` when every member is external."""
    ids = [run_path_id(member) for member in members]
    chunkings = {cid.rsplit("/", 1)[1] for cid in ids if not is_external(cid)}
    if len(ids) < 2 or len(chunkings) > 1 or len(set(ids)) != len(ids):
        raise InputError(
            f"a fusion needs two or more distinct first-stage runs of one chunking, got {list(members)}",
            file="params.yaml",
            field="grid.fused",
        )
    names = [member_name(member) for member in members]
    return f"{fusion}({','.join(names)})/{chunkings.pop() if chunkings else DOCUMENTS_UNIT}"


def fusion_inputs(loaded: Sequence[tuple[pl.DataFrame, dict[str, Any]]]) -> list[pl.DataFrame]:
    """The runs a fusion combines. Chunk runs of one chunking fuse chunk by chunk, as they are; when
    a member is an external run (its ids are not the pipeline's chunks), every member is collapsed
    to documents first (each document at its best chunk's score, ranked 1, 2, ... among documents,
    the chunk id becoming the document id), so the fusion is over documents, the unit the runs share."""
    if not any(meta.get("kind") == EXTERNAL for _, meta in loaded):
        return [run for run, _ in loaded]
    return [
        collapse_to_documents(run)
        .sort("query_id", "rank", maintain_order=True)
        .with_columns(
            pl.col("doc_id").alias("chunk_id"),
            pl.int_range(1, pl.len() + 1).over("query_id").cast(pl.Int64).alias("rank"),
        )
        .select(CHUNK_RUN.columns)
        for run, _ in loaded
    ]


def reranked_id(base_id: str, reranker: str) -> str:
    return f"{base_id}+rerank({reranker})"


def grid_config_ids(grid: dict) -> list[str]:
    """Every configuration the grid declares, by id, sorted."""
    ids = []
    for chunking in grid["chunkings"]:
        ids.append(bm25_id(chunking))
        for model in grid["models"]:
            ids.append(dense_id(model, chunking))
            ids.extend(fused_id(fusion, model, chunking) for fusion in grid.get("fusions") or [])
    ids.extend(external_id(name) for name in grid.get("external") or [])
    for entry in (grid.get("fused") or {}).values():
        ids.append(multi_fused_id(entry["fusion"], entry["runs"]))
    for entry in (grid.get("reranked") or {}).values():
        ids.append(reranked_id(run_path_id(entry["run"], grid), entry["reranker"]))
    return sorted(ids)


def grid_run_folders(grid: dict, root: str | Path) -> dict[str, Path]:
    """The run folder of every configuration the grid declares (config id -> folder), by path order."""
    root = Path(root)
    folders = {}
    for chunking in grid["chunkings"]:
        folders[bm25_id(chunking)] = root / "bm25" / chunking
        for model in grid["models"]:
            folders[dense_id(model, chunking)] = root / MODEL / model / chunking
            for fusion in grid.get("fusions") or []:
                folders[fused_id(fusion, model, chunking)] = root / "fused" / fusion / model / chunking
    for name in grid.get("external") or []:
        folders[external_id(name)] = root / EXTERNAL / name
    for key, entry in (grid.get("fused") or {}).items():
        folders[multi_fused_id(entry["fusion"], entry["runs"])] = root / "fused" / key
    for key, entry in (grid.get("reranked") or {}).items():
        folders[reranked_id(run_path_id(entry["run"], grid), entry["reranker"])] = root / "rerank" / key
    return dict(sorted(folders.items(), key=lambda item: item[1]))


def grid_runs(grid: dict, root: str | Path) -> tuple[list[Path], list[Path]]:
    """(the grid's run folders, by path; folders under ``root`` holding runs of cells not in the grid).

    A missing folder of a declared cell is an error: the grid has not been run.
    """
    declared = grid_run_folders(grid, root)
    missing = [(cid, f) for cid, f in declared.items() if not (f / "run.json").exists()]
    if missing:
        cid, folder = missing[0]
        raise InputError(
            f"no run of {cid} ({len(missing)} of {len(declared)} configurations missing); run `dvc repro`",
            file=str(folder),
        )
    wanted = set(declared.values())
    return list(declared.values()), [f for f in find_runs(root) if f not in wanted]


def run_path_id(path: str, grid: dict | None = None) -> str:
    """The configuration id of a first-stage run folder under data/work/runs (``model/minilm/c256`` →
    ``minilm/c256``; every model family's runs live under ``model/``). ``fused/<key>`` names an entry
    of ``grid.fused``, resolved through ``grid``; ``external/<name>`` a run file produced elsewhere."""
    parts = path.strip("/").split("/")
    if parts[0] == EXTERNAL and len(parts) == 2:
        return external_id(parts[1])
    if parts[0] == MODEL and len(parts) == 3:
        return dense_id(parts[1], parts[2])
    if parts[0] == "bm25" and len(parts) == 2:
        return bm25_id(parts[1])
    if parts[0] == "fused" and len(parts) == 4:
        return fused_id(*parts[1:])
    fused = (grid or {}).get("fused") or {}
    if parts[0] == "fused" and len(parts) == 2 and parts[1] in fused:
        return multi_fused_id(fused[parts[1]]["fusion"], fused[parts[1]]["runs"])
    if parts[0] == "dense" and len(parts) == 3:  # the folder's name until every family's runs shared it
        raise InputError(
            f"{path!r}: runs of models are under model/ now; write 'model/{parts[1]}/{parts[2]}'",
            file="params.yaml",
            field="grid",
        )
    raise InputError(f"not a first-stage run path: {path!r}", file="params.yaml", field="grid.reranked")


def from_arrays(
    query_ids: list[str], chunk_index: np.ndarray, scores: np.ndarray, chunks: pl.DataFrame
) -> pl.DataFrame:
    """Build a run from per-query arrays of chunk positions (−1 = no hit) and scores, best first."""
    n_queries, depth = chunk_index.shape
    valid = chunk_index >= 0
    rows_q = np.repeat(np.arange(n_queries), depth)[valid.ravel()]
    positions = chunk_index[valid]
    ranks = (np.cumsum(valid, axis=1)[valid]).astype(np.int64)
    return pl.DataFrame(
        {
            "query_id": np.asarray(query_ids, dtype=object)[rows_q].tolist(),
            "chunk_id": chunks["chunk_id"].gather(positions),
            "doc_id": chunks["doc_id"].gather(positions),
            "score": scores[valid].astype(np.float64),
            "rank": ranks,
        },
        schema=CHUNK_RUN.schema,
    )


def rank_by_score(run: pl.DataFrame) -> pl.DataFrame:
    """Order each query by score descending, chunk_id ascending (deterministic ties), and renumber."""
    ordered = run.sort(["query_id", "score", "chunk_id"], descending=[False, True, False])
    return ordered.with_columns(pl.int_range(1, pl.len() + 1).over("query_id").cast(pl.Int64).alias("rank"))


def collapse_to_documents(run: pl.DataFrame) -> pl.DataFrame:
    """One row per (query, document): the document's best-ranked chunk stands for it."""
    best = run.sort(["query_id", "rank"]).unique(subset=["query_id", "doc_id"], keep="first", maintain_order=True)
    return best.select(RANKED_DOC_RUN.columns)


def write_run(out_dir: str | Path, run: pl.DataFrame, meta: dict[str, Any]) -> None:
    out_dir = Path(out_dir)
    io.write_parquet(out_dir / "run.parquet", run.select(CHUNK_RUN.columns))
    io.write_json(out_dir / "run.json", meta)


def read_meta(run_dir: str | Path) -> dict[str, Any]:
    return json.loads((Path(run_dir) / "run.json").read_text(encoding="utf-8"))


def read_run(run_dir: str | Path) -> tuple[pl.DataFrame, dict[str, Any]]:
    return pl.read_parquet(Path(run_dir) / "run.parquet"), read_meta(run_dir)


def find_runs(root: str | Path) -> list[Path]:
    """Every run folder below ``root`` (a folder holding run.json and run.parquet), sorted."""
    return sorted(p.parent for p in Path(root).rglob("run.json") if (p.parent / "run.parquet").exists())


def peak_rss_bytes() -> int:
    """This process's peak resident memory so far (Linux reports ru_maxrss in KiB)."""
    import resource

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


# How per-query latency is measured: the first `queries` queries one at a time, as a live system
# receives them, after `warmup` untimed ones, with torch pinned to `threads` threads (the number
# of threads changes a single query's time far more than the model does on a shared machine).
LATENCY_PROTOCOL = {"queries": 100, "warmup": 5, "threads": 1}


@contextlib.contextmanager
def pinned_torch_threads(threads: int) -> Iterator[None]:
    """torch limited to ``threads`` threads inside the block (nothing to do when torch is not loaded)."""
    torch = sys.modules.get("torch")
    if torch is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def per_query_seconds(answer_one: Callable[[Any], object], items: Sequence[Any]) -> np.ndarray:
    """Seconds of ``answer_one(item)`` for each item LATENCY_PROTOCOL times, one at a time and in
    order (the first ``queries`` items, after the first ``warmup`` answered untimed)."""
    items = list(items)
    seconds = []
    with pinned_torch_threads(LATENCY_PROTOCOL["threads"]):
        for item in items[: LATENCY_PROTOCOL["warmup"]]:
            answer_one(item)
        for item in items[: LATENCY_PROTOCOL["queries"]]:
            start = time.perf_counter()
            answer_one(item)
            seconds.append(time.perf_counter() - start)
    return np.array(seconds, dtype=np.float64)


def latency_sample(items: Sequence[Any]) -> list[Any]:
    """The items :func:`per_query_seconds` answers (warm-up and timed), in order: what its times are of."""
    return list(items)[: max(LATENCY_PROTOCOL["queries"], LATENCY_PROTOCOL["warmup"])]


def query_encoding_seconds(encoder, texts: Sequence[str]) -> np.ndarray:
    """:func:`per_query_seconds` of ``encoder`` (a loaded Encoder) encoding each text alone as a query."""
    return per_query_seconds(lambda text: encoder.encode([text], role="query"), texts)


def per_query_latency(answer_one: Callable[[str], object], texts: Sequence[str]) -> dict[str, float]:
    """p50/p95 milliseconds of ``answer_one(text)`` under LATENCY_PROTOCOL."""
    return latency_summary(per_query_seconds(answer_one, texts))


def encode_and_search_latency(encode_seconds: np.ndarray, search_seconds: np.ndarray) -> dict[str, float]:
    """p50/p95 of each query's encoding time plus its search time, both per query for the same
    queries in the same order: one query encoded and searched at a time, its two parts timed apart."""
    encode_seconds = np.asarray(encode_seconds, dtype=np.float64)
    search_seconds = np.asarray(search_seconds, dtype=np.float64)
    if encode_seconds.shape != search_seconds.shape:
        raise ValueError(f"encoding times of {encode_seconds.shape} queries, search times of {search_seconds.shape}")
    return latency_summary(encode_seconds + search_seconds)


def latency_summary(seconds: np.ndarray) -> dict[str, float]:
    ms = np.asarray(seconds, dtype=np.float64) * 1000.0
    return {"latency_ms_p50": float(np.percentile(ms, 50)), "latency_ms_p95": float(np.percentile(ms, 95))}
