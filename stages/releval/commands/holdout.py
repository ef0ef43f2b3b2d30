"""`releval holdout`: open the sealed holdout, on record, apart from everything DVC writes.

No default stage reads the holdout: the judgments stage writes only the dev queries' grades and
the retrieval stages retrieve only for dev queries. Opening it is this command, and it appends
the opening to the committed access log *before* it reads a holdout judgment or retrieves a
holdout query. It then runs the project's own stage scripts on the holdout queries into a scratch
folder (removed afterwards) and scores them into their own reports folder.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from releval.measurement import holdout
from releval.retrieval import runs
from releval.config import load_params, section

SCRATCH = Path("data/work/holdout-opening")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--split",
        choices=("holdout", "all"),
        default="holdout",
        help="holdout (default) or all (dev and holdout together)",
    )
    parser.add_argument("--reports", default="reports/holdout", help="where its scores go")
    parser.add_argument("--log", default=str(holdout.DEFAULT_LOG))
    parser.add_argument("--who", help="who opens it (default: git config user.name)")


def stage_commands(grid: dict, split: str, scratch: Path, reports: Path) -> list[list[str]]:
    """The stage scripts, in pipeline order, writing into ``scratch`` instead of data/work."""
    split_arg = ["--split", split]
    commands = [
        [
            "stages/judgments.py",
            *split_arg,
            "--out",
            str(scratch / "qrels.parquet"),
            "--meta",
            str(scratch / "judgments.json"),
        ]
    ]
    run_root = scratch / "runs"
    for chunking in grid["chunkings"]:
        commands.append(["stages/bm25.py", "--chunking", chunking, *split_arg, "--out-root", str(run_root / "bm25")])
        for model in grid["models"]:
            commands.append(
                [
                    "stages/retrieve.py",
                    "--model",
                    model,
                    "--chunking",
                    chunking,
                    *split_arg,
                    "--out-root",
                    str(run_root / "dense"),
                ]
            )
    for fusion in grid.get("fusions") or []:
        for model in grid["models"]:
            for chunking in grid["chunkings"]:
                commands.append(
                    [
                        "stages/fuse.py",
                        "--fusion",
                        fusion,
                        "--model",
                        model,
                        "--chunking",
                        chunking,
                        "--runs-root",
                        str(run_root),
                    ]
                )
    for name in grid.get("reranked") or {}:
        commands.append(["stages/rerank.py", "--name", name, "--runs-root", str(run_root)])
    commands.append(
        [
            "stages/score.py",
            *split_arg,
            "--runs-root",
            str(run_root),
            "--qrels",
            str(scratch / "qrels.parquet"),
            "--judgments-meta",
            str(scratch / "judgments.json"),
            "--reports",
            str(reports),
            "--trec-dir",
            str(scratch / "trec"),
        ]
    )
    return commands


def run(args: argparse.Namespace) -> int:
    grid = section(load_params(), "grid")
    configs = runs.grid_config_ids(grid)
    command = ["releval", "holdout", *sys.argv[2:]] if sys.argv[1:2] == ["holdout"] else ["releval", "holdout"]
    opening = holdout.opening(configs, command, split=args.split, who=args.who)
    holdout.append_opening(args.log, opening)  # on record before anything of the holdout is read
    print(
        f"holdout opened ({args.split}) by {opening['who']} at {opening['when']}: "
        f"{len(configs)} configurations; logged to {args.log}"
    )
    shutil.rmtree(SCRATCH, ignore_errors=True)
    env = {**os.environ, holdout.OPENING_ENV: json.dumps(opening, sort_keys=True)}
    try:
        for step in stage_commands(grid, args.split, SCRATCH, Path(args.reports)):
            result = subprocess.run([sys.executable, *step], env=env)
            if result.returncode != 0:
                print(
                    f"error: {' '.join(step)} failed (exit {result.returncode}); the opening stays logged",
                    file=sys.stderr,
                )
                return 1
    finally:
        shutil.rmtree(SCRATCH, ignore_errors=True)
    print(f"holdout scores: {args.reports}/metrics.json, grid.md, per_query.parquet")
    return 0
