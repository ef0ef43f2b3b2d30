"""Second-stage rescoring of a run's top-N.

The top ``top_n`` chunks of each query are reordered by the new scores; the rest keep their
first-stage order below every rescored chunk. The tail's scores are synthetic (the lowest new
score minus 1, 2, 3, ...) so that one score column still orders the whole run.

The new scores come from a reranker of one of two kinds (see stages/rerank.py): a `biencoder`
(an embedding model of `models`, under its own protocol) or a `crossencoder` from a folder. Both
read a chunk's text as the first stage did (its title prepended under ``retriever.titles:
prepend``) and record the titles term in their protocol.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import polars as pl

from releval.config import section
from releval.errors import InputError
from releval.progress import tracker
from releval.retrieval import runs
from releval.retrieval.chunking import titles_term
from releval.retrieval.encoders import load_encoder, pair_scores
from releval.retrieval.vectors import read_vectors
from releval.retrieval.models import ModelConfig, read_manifest, resolve_folder, weights_sha256


def rerank_top_n(run: pl.DataFrame, new_scores: pl.DataFrame, top_n: int) -> pl.DataFrame:
    """``new_scores``: query_id, chunk_id, score for (at least) every chunk in each query's top_n."""
    if top_n <= 0:
        raise InputError("must be positive", field="reranker.top_n")
    head = (
        run.filter(pl.col("rank") <= top_n)
        .drop("score")
        .join(new_scores.select("query_id", "chunk_id", "score"), on=["query_id", "chunk_id"], how="left")
    )
    missing = head.filter(pl.col("score").is_null())
    if missing.height:
        raise InputError(
            f"{missing.height} candidate(s) have no new score "
            f"(first: query {missing['query_id'][0]}, chunk {missing['chunk_id'][0]})",
            field="score",
        )
    floor = head.group_by("query_id").agg(pl.col("score").min().alias("floor"))
    tail = (
        run.filter(pl.col("rank") > top_n)
        .join(floor, on="query_id", how="left")
        .with_columns((pl.col("floor").fill_null(0.0) - (pl.col("rank") - top_n).cast(pl.Float64)).alias("score"))
        .drop("floor")
    )
    return runs.rank_by_score(pl.concat([head.select(run.columns), tail.select(run.columns)]))


def top_n_pairs(run: pl.DataFrame, top_n: int) -> pl.DataFrame:
    """The (query, chunk) pairs a reranker must score."""
    return run.filter(pl.col("rank") <= top_n).select("query_id", "chunk_id").unique(maintain_order=True)


class Rescored(NamedTuple):
    table: pl.DataFrame  # query_id, chunk_id, score
    seconds: float  # scoring time, model loading excluded


def rescore_pairs(
    params: Mapping[str, Any],
    reranker_name: str,
    cfg: Mapping[str, Any],
    pairs: pl.DataFrame,
    queries: pl.DataFrame,
    chunks: pl.DataFrame,
    models_dir: Path,
    emb_root: Path,
    chunking: str,
    desc: str | None = None,
) -> tuple[Rescored, dict[str, Any]]:
    """New scores for ``pairs`` from the reranker ``cfg`` (rerankers.<reranker_name>), and the models it
    used; with ``desc``, the pairs' progress (see :mod:`releval.progress`)."""
    if cfg["kind"] == "biencoder":
        emb_dir = emb_root / cfg["model"] / chunking
        return biencoder_scores(params, cfg, pairs, queries, chunks, models_dir, emb_dir, desc)
    if cfg["kind"] == "crossencoder":
        return crossencoder_scores(cfg, pairs, queries, chunks, titles_term(params), desc)
    raise InputError(
        f"unknown reranker kind {cfg['kind']!r}; expected biencoder or crossencoder",
        file="params.yaml",
        field=f"rerankers.{reranker_name}.kind",
    )


def reranked_meta(
    base_meta: Mapping[str, Any],
    reranker_name: str,
    cfg: Mapping[str, Any],
    pairs: int,
    seconds: float,
    models: Mapping[str, Any],
    queries: int,
) -> dict[str, Any]:
    """run.json of a reranked run: the first stage's, with the rescoring's cost added."""
    ops = dict(base_meta["ops"])
    per_query_ms = 1000.0 * seconds / max(queries, 1)
    for key in ("latency_ms_p50", "latency_ms_p95"):
        ops[key] = ops[key] + per_query_ms  # mean rescoring cost per query (model loading excluded)
    return {
        "config_id": runs.reranked_id(base_meta["config_id"], reranker_name),
        "kind": "reranked",
        "model": base_meta.get("model"),
        "chunking": base_meta["chunking"],
        "reranker": {"name": reranker_name, **dict(cfg)},
        "inputs": [base_meta["config_id"]],
        "ops": {
            **ops,
            "rerank_pairs": pairs,
            "rerank_s": round(seconds, 3),
            # first stage and reranker are served together: their peaks add up
            "peak_rss_bytes": ops.get("peak_rss_bytes", 0) + runs.peak_rss_bytes(),
        },
        "models": {**base_meta["models"], **models},
        "queries": base_meta["queries"],
    }


def _texts(pairs: pl.DataFrame, queries: pl.DataFrame, chunks: pl.DataFrame) -> pl.DataFrame:
    return pairs.join(queries.rename({"text": "query_text"}), on="query_id", how="left").join(
        chunks.rename({"text": "chunk_text"}), on="chunk_id", how="left"
    )


def biencoder_scores(
    params: Mapping[str, Any],
    cfg: Mapping[str, Any],
    pairs: pl.DataFrame,
    queries: pl.DataFrame,
    chunks: pl.DataFrame,
    models_dir: Path,
    emb_dir: Path,
    desc: str | None = None,
) -> tuple[Rescored, dict[str, Any]]:
    """Each pair's dot product under the model ``cfg["model"]`` (its own protocol); chunk vectors
    come from the encode stage (``emb_dir``) when it used the same weights and protocol.

    The time goes into encoding the chunks and queries, each in one call (as the encode stage
    batches them): the pairs are counted done at the end."""
    name = cfg["model"]
    config = ModelConfig.from_params(name, section(params, f"models.{name}"))
    protocol = config.chunk_protocol(titles_term(params))
    manifest = read_manifest(models_dir / name)
    encoder = load_encoder(manifest, config)
    with tracker(desc, pairs.height, "pairs") as bar:
        scored, seconds = _biencoder_pair_scores(encoder, config, protocol, manifest, pairs, queries, chunks, emb_dir)
        bar.update(scored.height)
    models = {
        name: {
            "revision": manifest["revision"],
            "weights_sha256": manifest["weights_sha256"],
            "protocol": protocol,
        }
    }
    return Rescored(scored, seconds), models


def _biencoder_pair_scores(
    encoder,
    config: ModelConfig,
    protocol: Mapping[str, Any],
    manifest: Mapping[str, Any],
    pairs: pl.DataFrame,
    queries: pl.DataFrame,
    chunks: pl.DataFrame,
    emb_dir: Path,
) -> tuple[pl.DataFrame, float]:
    """``query_id, chunk_id, score`` of each pair, and the seconds it took (the model is loaded)."""
    start = time.perf_counter()
    table = _texts(pairs, queries, chunks)
    reusable = reusable_embeddings(emb_dir, protocol, manifest, chunks)
    if reusable is not None:  # the grid already encoded this chunking with this model and protocol
        chunk_ids, chunk_vectors = chunks["chunk_id"].to_list(), reusable
    else:
        unique_chunks = table.select("chunk_id", "chunk_text").unique(subset="chunk_id", maintain_order=True)
        chunk_ids = unique_chunks["chunk_id"].to_list()
        chunk_vectors = encoder.encode(unique_chunks["chunk_text"].to_list(), role="document")
    query_vectors = encoder.encode(queries["text"].to_list(), role="query")
    chunk_row = {c: i for i, c in enumerate(chunk_ids)}
    query_row = {q: i for i, q in enumerate(queries["query_id"].to_list())}
    qi = np.array([query_row[q] for q in table["query_id"].to_list()])
    ci = np.array([chunk_row[c] for c in table["chunk_id"].to_list()])
    scores = pair_scores(query_vectors, chunk_vectors, qi, ci)
    scored = table.select("query_id", "chunk_id").with_columns(pl.Series("score", scores))
    return scored, time.perf_counter() - start


def reusable_embeddings(emb_dir: Path, protocol: Mapping[str, Any], manifest: Mapping[str, Any], chunks: pl.DataFrame):
    """The encode stage's vectors for these chunks, if they were made by the same weights and
    ``protocol`` (:meth:`ModelConfig.chunk_protocol`, the titles term included)."""
    stats_path = emb_dir / "encode.json"
    if not stats_path.exists():
        return None
    stats = json.loads(stats_path.read_text(encoding="utf-8"))
    if (
        stats["weights_sha256"] != manifest["weights_sha256"]
        or stats["protocol"] != protocol
        or stats["chunks"] != chunks.height
    ):
        return None
    return read_vectors(emb_dir)


def crossencoder_scores(
    cfg: Mapping[str, Any],
    pairs: pl.DataFrame,
    queries: pl.DataFrame,
    chunks: pl.DataFrame,
    titles: str,
    desc: str | None = None,
) -> tuple[Rescored, dict[str, Any]]:
    """Each pair scored by the CrossEncoder in the folder ``cfg["model"]`` names (first logit).

    Progress is counted per batch by a hook on the model's forward pass, so the pairs are batched
    by ``predict`` alone (it sorts them all by length first): the same batches, the same scores."""
    from sentence_transformers import CrossEncoder

    folder = resolve_folder(cfg["model"])
    model = CrossEncoder(
        str(folder),
        max_length=int(cfg.get("max_length", 512)),
        device="cpu",
        trust_remote_code=bool(cfg.get("trust_remote_code", False)),
        local_files_only=True,
    )
    start = time.perf_counter()
    table = _texts(pairs, queries, chunks)
    with tracker(desc, len(table), "pairs") as bar:
        hook = model.register_forward_hook(lambda _model, _inputs, output: bar.update(len(output["scores"])))
        try:
            scores = model.predict(
                list(zip(table["query_text"].to_list(), table["chunk_text"].to_list())),
                batch_size=int(cfg["batch_size"]),
                show_progress_bar=False,
                convert_to_numpy=True,
            )
        finally:
            hook.remove()
    scores = np.asarray(scores, dtype=np.float64).reshape(len(table), -1)[:, 0]
    models = {
        cfg["model"]: {
            "revision": "cross-encoder from a user folder",
            "weights_sha256": weights_sha256(folder),
            "protocol": {"max_length": int(cfg.get("max_length", 512)), "titles": titles},
        }
    }
    scored = table.select("query_id", "chunk_id").with_columns(pl.Series("score", scores))
    return Rescored(scored, time.perf_counter() - start), models
