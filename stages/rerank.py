"""DVC stage `rerank@<name>`: rescore the top-N of a first-stage run.

Two kinds. `biencoder`: a second, stronger embedding model (one of `models`, used under its own
protocol) scores each query against each candidate chunk; the default grid uses this. The
`crossencoder` kind loads a sentence-transformers CrossEncoder from a user-supplied folder; no
trained cross-encoder ships in any package installable here, so that path is tested for its
mechanics only (with a randomly initialised model), never for quality.
"""

import argparse
import json
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np
import polars as pl

from releval import io
from releval.retrieval import runs
from releval.config import load_params, section
from releval.errors import InputError
from releval.retrieval.models import ModelConfig, encode, load_sentence_transformer, read_manifest, resolve_folder
from releval.retrieval.rerank import rerank_top_n, top_n_pairs
from releval.stage import entry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--name", required=True, help="an entry of grid.reranked")
    parser.add_argument("--queries", default="data/work/queries.parquet")
    parser.add_argument("--chunks-dir", default="data/work/chunks")
    parser.add_argument("--models-dir", default="data/models")
    parser.add_argument("--runs-root", default="data/work/runs")
    parser.add_argument("--emb-root", default="data/work/emb")
    args = parser.parse_args()
    params = load_params()
    entry_cfg = section(params, f"grid.reranked.{args.name}")
    reranker_name = entry_cfg["reranker"]
    cfg = section(params, f"rerankers.{reranker_name}")
    base, base_meta = runs.read_run(Path(args.runs_root) / entry_cfg["run"])
    top_n = int(cfg["top_n"])
    pairs = top_n_pairs(base, top_n)
    chunks = pl.read_parquet(Path(args.chunks_dir) / f"{base_meta['chunking']}.parquet", columns=["chunk_id", "text"])
    queries = pl.read_parquet(args.queries, columns=["query_id", "text"])
    if cfg["kind"] == "biencoder":
        emb_dir = Path(args.emb_root) / cfg["model"] / base_meta["chunking"]
        new_scores, models = _biencoder_scores(params, cfg, pairs, queries, chunks, Path(args.models_dir), emb_dir)
    elif cfg["kind"] == "crossencoder":
        new_scores, models = _crossencoder_scores(cfg, pairs, queries, chunks)
    else:
        raise InputError(
            f"unknown reranker kind {cfg['kind']!r}; expected biencoder or crossencoder",
            file="params.yaml",
            field=f"rerankers.{reranker_name}.kind",
        )
    seconds = new_scores.seconds
    reranked = rerank_top_n(base, new_scores.table, top_n)
    ops = dict(base_meta["ops"])
    per_query_ms = 1000.0 * seconds / max(queries.height, 1)
    for key in ("latency_ms_p50", "latency_ms_p95"):
        ops[key] = ops[key] + per_query_ms  # mean rescoring cost per query (model loading excluded)
    meta = {
        "config_id": runs.reranked_id(base_meta["config_id"], reranker_name),
        "kind": "reranked",
        "model": base_meta.get("model"),
        "chunking": base_meta["chunking"],
        "reranker": {"name": reranker_name, **dict(cfg)},
        "inputs": [base_meta["config_id"]],
        "ops": {
            **ops,
            "rerank_pairs": pairs.height,
            "rerank_s": round(seconds, 3),
            # first stage and reranker are served together: their peaks add up
            "peak_rss_bytes": ops.get("peak_rss_bytes", 0) + runs.peak_rss_bytes(),
        },
        "models": {**base_meta["models"], **models},
        "queries": base_meta["queries"],
    }
    runs.write_run(Path(args.runs_root) / "rerank" / args.name, reranked, meta)
    print(f"rerank {meta['config_id']}: {pairs.height} pairs in {seconds:.1f} s")


class Rescored(NamedTuple):
    table: pl.DataFrame  # query_id, chunk_id, score
    seconds: float  # scoring time, model loading excluded


def _texts(pairs: pl.DataFrame, queries: pl.DataFrame, chunks: pl.DataFrame) -> pl.DataFrame:
    return pairs.join(queries.rename({"text": "query_text"}), on="query_id", how="left").join(
        chunks.rename({"text": "chunk_text"}), on="chunk_id", how="left"
    )


def _biencoder_scores(params, cfg, pairs, queries, chunks, models_dir, emb_dir):
    name = cfg["model"]
    config = ModelConfig.from_params(name, section(params, f"models.{name}"))
    manifest = read_manifest(models_dir / name)
    model = load_sentence_transformer(manifest, config)
    start = time.perf_counter()
    table = _texts(pairs, queries, chunks)
    reusable = _reusable_embeddings(emb_dir, config, manifest, chunks)
    if reusable is not None:  # the grid already encoded this chunking with this model and protocol
        chunk_ids, chunk_vectors = chunks["chunk_id"].to_list(), reusable
    else:
        unique_chunks = table.select("chunk_id", "chunk_text").unique(subset="chunk_id", maintain_order=True)
        chunk_ids = unique_chunks["chunk_id"].to_list()
        chunk_vectors = encode(model, unique_chunks["chunk_text"].to_list(), config, role="document")
    query_vectors = encode(model, queries["text"].to_list(), config, role="query")
    chunk_row = {c: i for i, c in enumerate(chunk_ids)}
    query_row = {q: i for i, q in enumerate(queries["query_id"].to_list())}
    qi = np.array([query_row[q] for q in table["query_id"].to_list()])
    ci = np.array([chunk_row[c] for c in table["chunk_id"].to_list()])
    scores = np.einsum("ij,ij->i", query_vectors[qi], chunk_vectors[ci]).astype(np.float64)
    models = {
        name: {
            "revision": manifest["revision"],
            "weights_sha256": manifest["weights_sha256"],
            "protocol": config.protocol(),
        }
    }
    scored = table.select("query_id", "chunk_id").with_columns(pl.Series("score", scores))
    return Rescored(scored, time.perf_counter() - start), models


def _reusable_embeddings(emb_dir: Path, config: ModelConfig, manifest: dict, chunks: pl.DataFrame):
    """The encode stage's vectors for these chunks, if they were made by the same weights and protocol."""
    stats_path = emb_dir / "encode.json"
    if not stats_path.exists():
        return None
    stats = json.loads(stats_path.read_text(encoding="utf-8"))
    if (
        stats["weights_sha256"] != manifest["weights_sha256"]
        or stats["protocol"] != config.protocol()
        or stats["chunks"] != chunks.height
    ):
        return None
    return io.read_npy(emb_dir / "embeddings.npy")


def _crossencoder_scores(cfg, pairs, queries, chunks):
    from sentence_transformers import CrossEncoder

    from releval.retrieval.models import weights_sha256

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
    scores = model.predict(
        list(zip(table["query_text"].to_list(), table["chunk_text"].to_list())),
        batch_size=int(cfg["batch_size"]),
        show_progress_bar=False,
        convert_to_numpy=True,
    )
    scores = np.asarray(scores, dtype=np.float64).reshape(len(table), -1)[:, 0]
    models = {
        cfg["model"]: {
            "revision": "cross-encoder from a user folder",
            "weights_sha256": weights_sha256(folder),
            "protocol": {"max_length": int(cfg.get("max_length", 512))},
        }
    }
    scored = table.select("query_id", "chunk_id").with_columns(pl.Series("score", scores))
    return Rescored(scored, time.perf_counter() - start), models


if __name__ == "__main__":
    entry(main)
