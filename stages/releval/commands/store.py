"""`releval store`: the embedding store's size, and its garbage collection.

    releval store [--store DIR]                    # size per model and role
    releval store --gc [--dry-run] [--store DIR]   # drop vectors nothing references

Every encode records a reference (the texts a cell used, at which commit) in the store. ``--gc``
keeps, for each cell of the current grid (params.yaml: chunk cells ``model/chunking`` and their
query cells), its latest reference, and every reference made at a commit the run archive holds
(data/archive), so that archived configurations re-encode nothing; all other vectors are
dropped. The store is a cache: dropping too much costs an encode, never a wrong number. See
:mod:`releval.retrieval.store`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from releval import paths
from releval.config import load_params, section
from releval.retrieval import store


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", default=paths.EMBEDDING_STORE, help=f"default: {paths.EMBEDDING_STORE}")
    parser.add_argument("--gc", action="store_true", help="drop vectors no current or archived cell references")
    parser.add_argument("--dry-run", action="store_true", help="with --gc: say what would go, change nothing")
    parser.add_argument("--params", default=paths.PARAMS)
    parser.add_argument("--archive", default=paths.ARCHIVE)


def run(args: argparse.Namespace) -> int:
    root = Path(args.store)
    if args.gc:
        grid = section(load_params(args.params), "grid")
        live = store.live_ref(latest_refs(root, current_cells(grid)), archived_commits(Path(args.archive)))
        done = store.collect_garbage(root, live, dry_run=args.dry_run)
        verb = "would drop" if args.dry_run else "dropped"
        print(
            f"releval store --gc: {verb} {done.dropped_vectors:,} vectors ({done.freed_bytes / 2**20:,.1f} MiB) "
            f"and {done.dropped_refs} references; kept {done.kept_vectors:,} vectors of {done.kept_refs} references"
        )
    sizes = store.size_report(root)
    if not sizes:
        print(f"{root}: empty (the next encode computes every vector)")
        return 0
    print(f"{'model':<14} {'role':<9} {'shards':>6} {'vectors':>10} {'MiB':>9}  namespace")
    for s in sizes:
        print(f"{s.model:<14} {s.role:<9} {s.shards:>6} {s.vectors:>10,} {s.bytes / 2**20:>9.1f}  {s.id}")
    total = sum(s.bytes for s in sizes)
    print(f"total: {sum(s.vectors for s in sizes):,} vectors, {total / 2**20:,.1f} MiB in {root}")
    return 0


def current_cells(grid: dict) -> set[str]:
    """The store cells the grid encodes: ``model/chunking`` (chunks) and ``model/chunking queries``."""
    cells = {f"{m}/{c}" for m in grid["models"] for c in grid["chunkings"]}
    return cells | {f"{cell} queries" for cell in cells}


def latest_refs(root: Path, cells: set[str]) -> set[str]:
    """The newest reference of each current cell (by write time, then id)."""
    newest: dict[str, tuple[str, str]] = {}
    for path in sorted((root / store.REFS).glob("*.json")) if (root / store.REFS).is_dir() else []:
        ref = json.loads(path.read_text(encoding="utf-8"))
        if ref["cell"] in cells:
            stamp = (ref.get("written") or "", ref["id"])
            if ref["cell"] not in newest or stamp > newest[ref["cell"]]:
                newest[ref["cell"]] = stamp
    return {ref_id for _, ref_id in newest.values()}


def archived_commits(archive: Path) -> set[str]:
    from releval.provenance.archive import Archive  # 0.2 s of imports that only --gc needs

    if not archive.is_dir():
        return set()
    index = Archive(archive).index()
    return set(index["commit"].drop_nulls().to_list()) if index.height else set()
