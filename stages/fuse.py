"""DVC stages `fuse@<fusion>-<model>-<chunking>` (a model's run with the BM25 run of the same
chunking) and `fuse-runs@<key>` (any two or more first-stage runs of one chunking, from any
families, as ``grid.fused.<key>`` declares: ``--fused <key>``)."""

import argparse
import dataclasses
from pathlib import Path

from releval import paths
from releval.config import build, load_params, section
from releval.errors import InputError
from releval.measurement import operations
from releval.retrieval import runs
from releval.retrieval.fusion import FusionConfig, fuse, member_weights
from releval.stage import entry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--fusion")
    parser.add_argument("--model")
    parser.add_argument("--chunking")
    parser.add_argument("--fused", help="a key of grid.fused")
    parser.add_argument("--runs-root", default=paths.RUNS)
    args = parser.parse_args()
    params = load_params()
    if args.fused:
        declared = section(params, f"grid.fused.{args.fused}")
        fusion, members = declared["fusion"], list(declared["runs"])
        out = paths.rebase(paths.FUSED_RUNS, paths.RUNS, args.runs_root) / args.fused
        config_id = runs.multi_fused_id(fusion, members)
    else:
        fusion = args.fusion
        members = [f"{runs.MODEL}/{args.model}/{args.chunking}", f"bm25/{args.chunking}"]
        out = paths.rebase(paths.FUSED_RUNS, paths.RUNS, args.runs_root) / fusion / args.model / args.chunking
        config_id = runs.fused_id(fusion, args.model, args.chunking)
    where = f"fusions.{fusion}"
    config = build(FusionConfig, section(params, where), where=where)
    loaded = [runs.read_run(Path(args.runs_root) / member) for member in members]
    metas = [meta for _, meta in loaded]
    try:
        if args.fused:
            names = [runs.member_name(m) for m in members]
            config = dataclasses.replace(config, weights=member_weights(config, names))
            fused = fuse(dict(zip(names, runs.fusion_inputs(loaded))), config)
        else:
            fused = fuse({"dense": loaded[0][0], "bm25": loaded[1][0]}, config)
    except InputError as exc:  # e.g. a weight missing for one input: name the fusion's own key
        raise InputError(exc.detail, file="params.yaml", field=f"{where}.{exc.field}") from None
    models = {name: record for meta in metas for name, record in (meta.get("models") or {}).items()}
    model = args.model if not args.fused else None
    meta = {
        "config_id": config_id,
        "kind": "fused",
        "model": model if model else metas[0].get("model"),
        "chunking": next((m["chunking"] for m in metas if m.get("chunking")), runs.DOCUMENTS_UNIT),
        "fusion": {"name": fusion, **dataclasses.asdict(config)},
        "inputs": [m["config_id"] for m in metas],
        "ops": operations.fused_figures(metas),
        "models": models,
        "queries": metas[0]["queries"],
    }
    runs.write_run(out, fused, meta)
    print(f"fuse {meta['config_id']}: {fused.height} rows")


if __name__ == "__main__":
    entry(main)
