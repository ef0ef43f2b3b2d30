"""DVC stages `external@<name>` (a run file produced elsewhere, declared under ``externals.<name>``,
checked against the corpus and query tables and stored as the run folder of configuration
``external/<name>``) and `externals` (``--declared``: the record of every declared external file,
which keeps data/work/runs/external in place for the stages that read it, none declared included).

Holdout queries stay sealed: rows of queries outside ``--split`` (dev unless `releval holdout`
opens the holdout) are dropped, and the stage says how many.
"""

import argparse
from pathlib import Path

import polars as pl

from releval import io, paths
from releval.config import load_params
from releval.measurement import holdout
from releval.retrieval import external, runs
from releval.stage import entry

DECLARED_FILE = "declared.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--name", help="a key of externals")
    parser.add_argument("--declared", action="store_true", help="write the record of every declared external file")
    parser.add_argument("--queries", default=paths.QUERIES)
    parser.add_argument("--docs", default=paths.DOCS)
    parser.add_argument("--runs-root", default=paths.RUNS)
    holdout.add_split_argument(parser)
    args = parser.parse_args()
    params = load_params()
    declared = {name: external.declared(name, cfg) for name, cfg in (params.get("externals") or {}).items()}
    out_root = Path(args.runs_root) / runs.EXTERNAL
    if args.declared:
        record = {name: _declared_record(e) for name, e in sorted(declared.items())}
        io.write_json(
            out_root / DECLARED_FILE, {"externals": record, "grid": list(params["grid"].get("external") or [])}
        )
        print(f"externals: {len(record)} declared, {len(params['grid'].get('external') or [])} in the grid")
        return
    if args.name not in declared:
        parser.error(f"--name must be one of {sorted(declared)}")
    converted = external.convert(
        declared[args.name],
        holdout.read_queries_table(args.queries),
        pl.read_parquet(args.docs, columns=["doc_id"])["doc_id"],
        split=args.split,
    )
    runs.write_run(out_root / args.name, converted.run, converted.meta)
    print("\n".join(external.summary(converted.meta["external"])))


def _declared_record(entry: external.ExternalRun) -> dict:
    """An entry as declared.json records it; ``allow_outside`` only when true (the file of an
    entry without it keeps its bytes, and the stages after it their cache)."""
    return {k: v for k, v in vars(entry).items() if k != "name" and (k != "allow_outside" or v)}


if __name__ == "__main__":
    entry(main)
