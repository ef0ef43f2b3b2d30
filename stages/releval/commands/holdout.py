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

from releval import holdout, runs
from releval.config import load_params, section
from releval.errors import InputError

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


def grid_config_ids(grid: dict) -> list[str]:
    """Every configuration the grid declares, by id (what the opening will score)."""
    ids = []
    for chunking in grid["chunkings"]:
        ids.append(runs.bm25_id(chunking))
        for model in grid["models"]:
            ids.append(runs.dense_id(model, chunking))
            ids.extend(runs.fused_id(fusion, model, chunking) for fusion in grid.get("fusions") or [])
    for entry in (grid.get("reranked") or {}).values():
        ids.append(runs.reranked_id(run_path_id(entry["run"]), entry["reranker"]))
    return sorted(ids)


def run_path_id(path: str) -> str:
    """The configuration id of a run folder under data/work/runs (``dense/minilm/c256`` → ``minilm/c256``)."""
    parts = path.strip("/").split("/")
    if parts[0] == "dense" and len(parts) == 3:
        return runs.dense_id(parts[1], parts[2])
    if parts[0] == "bm25" and len(parts) == 2:
        return runs.bm25_id(parts[1])
    if parts[0] == "fused" and len(parts) == 4:
        return runs.fused_id(*parts[1:])
    raise InputError(f"not a first-stage run path: {path!r}", file="params.yaml", field="grid.reranked")


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
    configs = grid_config_ids(grid)
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
