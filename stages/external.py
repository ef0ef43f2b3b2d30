"""DVC stages `external@<name>` (a run file produced elsewhere, declared under ``externals.<name>``,
checked against the corpus and query tables and stored as the run folder of configuration
``external/<name>``; an entry with ``endpoint:`` is a live search endpoint, whose answers for the
split's queries the stage keeps as the run folder's snapshot file) and `externals`
(``--declared``: the record of every declared external file, which keeps data/work/runs/external
in place for the stages that read it, none declared included).

Holdout queries stay sealed: rows of queries outside ``--split`` (dev unless `releval holdout`
opens the holdout) are dropped, and the stage says how many; an endpoint is sent only the
``--split`` queries.
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
    entry_, out_dir = declared[args.name], out_root / args.name
    queries = holdout.read_queries_table(args.queries)
    doc_ids = pl.read_parquet(args.docs, columns=["doc_id"])["doc_id"]
    if entry_.endpoint is not None:  # a live endpoint: its answers for the split's queries, kept as the run file
        converted = external.snapshot(entry_, queries, doc_ids, out_dir, split=args.split)
    else:
        converted = external.convert(entry_, queries, doc_ids, split=args.split)
    runs.write_run(out_dir, converted.run, converted.meta)
    print("\n".join(external.summary(converted.meta["external"])))


def _declared_record(entry: external.ExternalRun) -> dict:
    """An entry as declared.json records it; ``allow_outside`` only when true (the file of an
    entry without it keeps its bytes, and the stages after it their cache)."""
    record = {k: v for k, v in vars(entry).items() if k != "name" and (k not in ("allow_outside", "endpoint") or v)}
    return {**record, "endpoint": entry.endpoint.record()} if entry.endpoint else record


if __name__ == "__main__":
    entry(main)
