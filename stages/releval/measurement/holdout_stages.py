"""The project's own stage scripts, run on the holdout queries into a scratch folder.

`releval holdout` logs the opening first (:mod:`releval.measurement.holdout`), then
:func:`run_stages` runs every stage script, in pipeline order, with the opening in
:data:`~releval.measurement.holdout.OPENING_ENV`; the scratch folder is removed afterwards and
the scores go to their own reports folder.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from releval.measurement import holdout
from releval import paths

SCRATCH = Path(paths.HOLDOUT_SCRATCH)


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
            "--evidence",  # the holdout's spans stay in the scratch folder too, never data/work
            str(scratch / "evidence.parquet"),
        ]
    ]
    run_root = scratch / "runs"
    for chunking in grid["chunkings"]:
        commands.append(
            [
                "stages/bm25.py",
                "--chunking",
                chunking,
                *split_arg,
                "--out-root",
                str(paths.rebase(paths.BM25_RUNS, paths.RUNS, run_root)),
            ]
        )
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
                    str(paths.rebase(paths.MODEL_RUNS, paths.RUNS, run_root)),
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
    for name in grid.get("external") or []:
        commands.append(["stages/external.py", "--name", name, *split_arg, "--runs-root", str(run_root)])
    for key in grid.get("fused") or {}:
        commands.append(["stages/fuse.py", "--fused", key, "--runs-root", str(run_root)])
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
            "--evidence",
            str(scratch / "evidence.parquet"),
            "--reports",
            str(reports),
            "--trec-dir",
            str(scratch / "trec"),
        ]
    )
    return commands


@dataclass(frozen=True)
class StageFailure:
    """A stage script that failed, and its exit status."""

    step: list[str]
    returncode: int


def run_stages(
    grid: dict, split: str, reports: Path, opening: Mapping[str, Any], scratch: Path = SCRATCH
) -> StageFailure | None:
    """Run :func:`stage_commands` in order, stopping at the first failure (returned); None when all pass."""
    shutil.rmtree(scratch, ignore_errors=True)
    env = {**os.environ, holdout.OPENING_ENV: json.dumps(opening, sort_keys=True)}
    try:
        for step in stage_commands(grid, split, scratch, reports):
            result = subprocess.run([sys.executable, *step], env=env)
            if result.returncode != 0:
                return StageFailure(step, result.returncode)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return None
