"""DVC stage `fuse@<fusion>-<model>-<chunking>`: fuse a dense run with the BM25 run of the same chunking."""

import argparse
import dataclasses

from releval import paths
from releval.retrieval import runs
from releval.config import build, load_params, section
from releval.errors import InputError
from releval.retrieval.fusion import FusionConfig, fuse
from releval.stage import entry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--fusion", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--chunking", required=True)
    parser.add_argument("--runs-root", default=paths.RUNS)
    args = parser.parse_args()
    where = f"fusions.{args.fusion}"
    config = build(FusionConfig, section(load_params(), where), where=where)
    dense, dense_meta = runs.read_run(
        paths.rebase(paths.DENSE_RUNS, paths.RUNS, args.runs_root) / args.model / args.chunking
    )
    bm25, bm25_meta = runs.read_run(paths.rebase(paths.BM25_RUNS, paths.RUNS, args.runs_root) / args.chunking)
    try:
        fused = fuse({"dense": dense, "bm25": bm25}, config)
    except InputError as exc:  # e.g. a weight missing for one input: name the fusion's own key
        raise InputError(exc.detail, file="params.yaml", field=f"{where}.{exc.field}") from None
    ops = {
        key: dense_meta["ops"][key]
        for key in ("dimension", "chunks_per_s", "tokens_per_s", "truncation_rate", "truncated_token_share")
    }
    ops["index_bytes"] = dense_meta["ops"]["index_bytes"] + bm25_meta["ops"]["index_bytes"]
    # Serving both retrievers holds both in memory: the sum of their peaks bounds it.
    ops["peak_rss_bytes"] = dense_meta["ops"]["peak_rss_bytes"] + bm25_meta["ops"]["peak_rss_bytes"]
    # Both retrievers run for every query; the sum of their medians approximates the fused median.
    for key in ("latency_ms_p50", "latency_ms_p95"):
        ops[key] = dense_meta["ops"][key] + bm25_meta["ops"][key]
    meta = {
        "config_id": runs.fused_id(args.fusion, args.model, args.chunking),
        "kind": "fused",
        "model": args.model,
        "chunking": args.chunking,
        "fusion": {"name": args.fusion, **dataclasses.asdict(config)},
        "inputs": [dense_meta["config_id"], bm25_meta["config_id"]],
        "ops": ops,
        "models": dense_meta["models"],
        "queries": dense_meta["queries"],
    }
    out = paths.rebase(paths.FUSED_RUNS, paths.RUNS, args.runs_root) / args.fusion / args.model / args.chunking
    runs.write_run(out, fused, meta)
    print(f"fuse {meta['config_id']}: {fused.height} rows")


if __name__ == "__main__":
    entry(main)
