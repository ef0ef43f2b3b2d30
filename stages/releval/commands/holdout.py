"""`releval holdout`: open the sealed holdout, on record, apart from everything DVC writes.

No default stage reads the holdout: the judgments stage writes only the dev queries' grades and
the retrieval stages retrieve only for dev queries. Opening it is this command, and it appends
the opening to the committed access log *before* it reads a holdout judgment or retrieves a
holdout query. It then runs the project's own stage scripts on the holdout queries into a scratch
folder (removed afterwards) and scores them into their own reports folder. A query set without
holdout queries has nothing sealed: the command says so and logs nothing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from releval.config import load_params, reports_folder, section
from releval.measurement import holdout
from releval.measurement.holdout_stages import run_stages
from releval.retrieval import runs
from releval import paths


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--split",
        choices=("holdout", "all"),
        default="holdout",
        help="holdout (default) or all (dev and holdout together)",
    )
    parser.add_argument(
        "--reports",
        default=None,
        help=f"where its scores go (default: {paths.HOLDOUT_REPORTS}, under the active dataset's reports folder)",
    )
    parser.add_argument("--queries", default=paths.QUERIES, help="the queries stage's table (default: %(default)s)")
    parser.add_argument("--log", default=str(holdout.DEFAULT_LOG))
    parser.add_argument("--who", help="who opens it (default: git config user.name)")


def run(args: argparse.Namespace) -> int:
    if args.reports is None:
        args.reports = str(paths.rebase(paths.HOLDOUT_REPORTS, paths.REPORTS, reports_folder()))
    grid = section(load_params(), "grid")
    sealed = holdout.split_counts(holdout.read_queries_table(args.queries), source=args.queries)["holdout"]
    if not sealed:
        print(f"nothing to open: {args.queries} has no holdout queries; nothing was logged to {args.log}")
        return 0
    configs = runs.grid_config_ids(grid)
    command = ["releval", "holdout", *sys.argv[2:]] if sys.argv[1:2] == ["holdout"] else ["releval", "holdout"]
    opening = holdout.opening(configs, command, split=args.split, who=args.who)
    holdout.append_opening(args.log, opening)  # on record before anything of the holdout is read
    print(
        f"holdout opened ({args.split}) by {opening['who']} at {opening['when']}: "
        f"{sealed} holdout queries, {len(configs)} configurations; logged to {args.log}"
    )
    failure = run_stages(grid, args.split, Path(args.reports), opening)
    if failure is not None:
        print(
            f"error: {' '.join(failure.step)} failed (exit {failure.returncode}); the opening stays logged",
            file=sys.stderr,
        )
        return 1
    print(f"holdout scores: {args.reports}/metrics.json, grid.md, per_query.parquet")
    print(
        f"the opening is logged in {args.log}; the card counts openings, so `dvc repro` brings "
        "card.json and report.md up to date before you commit"
    )
    return 0
