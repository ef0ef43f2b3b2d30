"""`releval archive`: bring back runs of earlier commits or experiments into the run archive.

    releval archive --from-rev REV        # the runs REV's dvc.lock records, from DVC's cache
    releval archive --from-exp NAME       # the same for a DVC experiment (name or refs/exps/... ref)
    releval archive --list                # what the archive holds

Runs are read through DVC (the local cache; `dvc fetch --rev REV` first if they are only on a
remote), kept at document level to the depth the revision's metrics need, and recorded with the
revision's commit hash. A run already archived is left as it was. The archive (data/archive) is
committed to git: commit what this adds and every clone has it. The `archive` pipeline stage adds
the workspace's current runs; run `dvc repro` afterwards to re-score what this brought back (the
`rescore` stage).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from releval.provenance import archive, revisions
from releval import paths


def configure(parser: argparse.ArgumentParser) -> None:
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--from-rev", metavar="REV", help="a git revision (commit, branch, tag, HEAD~1)")
    what.add_argument("--from-exp", metavar="NAME", help="a DVC experiment: its name or full refs/exps/ ref")
    what.add_argument("--list", action="store_true", help="list the archived runs")
    parser.add_argument("--archive", default=paths.ARCHIVE, help=f"the archive directory (default: {paths.ARCHIVE})")
    parser.add_argument(
        "--runs-root",
        default=archive.DEFAULT_RUNS_ROOT,
        help=f"where runs live in the pipeline (default: {archive.DEFAULT_RUNS_ROOT})",
    )
    parser.add_argument("--repo", default=".", help="the project's root (default: .)")


def run(args: argparse.Namespace) -> int:
    store = archive.Archive(Path(args.repo) / args.archive)
    if args.list:
        sys.stdout.write(archive.list_markdown(store.index()))
        return 0
    if args.from_exp:
        rev, source = revisions.resolve_experiment(args.repo, args.from_exp), f"exp:{args.from_exp}"
    else:
        rev, source = args.from_rev, f"rev:{args.from_rev}"
    commit, found, report = archive.archive_revision(store, args.repo, rev, source=source, runs_root=args.runs_root)
    print(f"archive: {source} = {commit[:12]}: {found} runs, {report.summary()}")
    for run_sha, config_id in report.added:
        print(f"  added {run_sha[:12]}  {config_id}")
    return 0
