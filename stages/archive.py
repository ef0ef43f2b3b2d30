"""DVC stage `archive`: add every current run (run.parquet + run.json) to the run archive.

data/archive/ is committed to git (an output with `cache: false`, so a clone has every archived
run, and `persist: true`, so DVC does not delete it before this stage runs): runs from earlier
commits and experiments stay. Each run is kept at document level, to the depth the metrics need
(releval.provenance.archive). Adding a run that is already archived, keyed by (sha256 of
run.parquet, configuration id), is a no-op; nothing is deleted or rewritten. Each new entry
records the commit whose inputs made it (and whether the inputs differed from it), the DVC stage
that wrote the run and the digest of that stage's params in dvc.lock. An archive in the earlier
layout (chunk-level runs, a cached DVC output) is converted first.
"""

import argparse
from pathlib import Path

from releval import paths
from releval.provenance import archive, revisions
from releval.retrieval import runs
from releval.config import load_params, section
from releval.stage import entry, warn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs-root", default=paths.RUNS)
    parser.add_argument("--archive", default=paths.ARCHIVE)
    parser.add_argument("--lock", default=paths.DVC_LOCK)
    args = parser.parse_args()
    params = load_params()
    dataset = str(section(params, "dataset.name"))
    depth = archive.archive_depth(list(section(params, "metric.metrics")))
    lock_path = Path(args.lock)
    lock = revisions.parse_lock(
        lock_path.read_text(encoding="utf-8") if lock_path.exists() else None, source=str(lock_path)
    )
    repo = Path(".")
    found, skipped = archive.workspace_runs(repo, args.runs_root, lock)
    # Only the cells the grid declares: a folder left by an earlier grid is not this commit's run.
    in_grid = {f.as_posix() for f in runs.grid_run_folders(section(params, "grid"), args.runs_root).values()}
    found = [run for run in found if run.run_path in in_grid]
    for path in skipped:
        warn(f"archive: {path} is not an output of any stage in {lock_path}; not archived (unknown provenance)")
    provenance = archive.workspace_provenance(repo, lock)
    if provenance.dirty:
        print(
            f"archive: the inputs differ from commit {(provenance.commit or '(none)')[:12]} "
            f"({', '.join(provenance.dirty_paths[:5])}{', …' if len(provenance.dirty_paths) > 5 else ''}); "
            "new entries are marked dirty"
        )
    store = archive.Archive(args.archive)
    if converted := store.migrate_legacy(depth):
        print(f"archive: {converted} entries converted from the earlier layout (chunk-level runs) to document level")
    report = store.add(found, provenance, dataset=dataset, depth=depth)
    kept = "every document" if depth is None else f"the top {depth} documents"
    print(
        f"archive: {len(found)} runs, {report.summary()}; {store.index().height} entries in {args.archive} "
        f"({kept} per query)"
    )


if __name__ == "__main__":
    entry(main)
