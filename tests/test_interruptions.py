"""Killed runs and concurrent runs never leave a result that looks complete but is not.

A real `dvc repro` on a slice of Cranfield is SIGKILLed while it encodes, while it indexes
and while it scores; the next `dvc repro` must finish and every output must be whole. Two
`dvc repro` at once: the second must fail cleanly on DVC's lock while the first completes.
"""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import polars as pl
import pytest

from conftest import BIN, make_project, require_cranfield, run

pytestmark = pytest.mark.slow


def compose(project: Path, cranfield: Path) -> None:
    run(["releval", "params", "dataset=cranfield-mini", "judgments=cranfield",
         f"dataset.corpus.path={cranfield / 'cran.all.1400'}", f"dataset.queries.path={cranfield / 'cran.qry'}",
         f"judgments.path={cranfield / 'cranqrel'}", "~model@models.e5small", "grid.models=[minilm]",
         "grid.chunkings=[c256]", "~grid.reranked.minilm-c256-e5"], project)


def start_repro(project: Path, log: Path) -> subprocess.Popen:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.Popen(["dvc", "repro"], cwd=project, env=env, stdout=open(log, "w"),
                            stderr=subprocess.STDOUT, start_new_session=True)


def kill_when_running(process: subprocess.Popen, log: Path, stage_prefix: str, timeout: float = 300) -> bool:
    """SIGKILL the whole repro (DVC and the stage it runs) once `stage_prefix` has started."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if f"Running stage '{stage_prefix}" in log.read_text():
            time.sleep(0.5)  # let the stage's process get going
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            return True
        if process.poll() is not None:
            return False
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)
    raise AssertionError(f"stage {stage_prefix} never started:\n{log.read_text()}")


def assert_outputs_whole(project: Path) -> None:
    metrics = json.loads((project / "reports" / "metrics.json").read_text())
    assert set(metrics["configs"]) == {"minilm/c256", "bm25/c256", "rrf(minilm,bm25)/c256"}
    for run_dir in (project / "data" / "work" / "runs").rglob("run.json"):
        assert pl.read_parquet(run_dir.parent / "run.parquet").height > 0
    assert run(["dvc", "status"], project).stdout.strip() == "Data and pipelines are up to date."
    # A killed writer may leave its temporary file behind, but never inside a tracked output.
    tracked = ["data/work/emb", "data/work/index", "data/work/runs"]  # directory outputs DVC hashes whole
    assert [p for d in tracked for p in (project / d).rglob(".releval-tmp-*")] == []


def test_sigkill_mid_stage_then_repro_finishes_correctly(tmp_path):
    cranfield = require_cranfield()
    project = make_project(tmp_path / "killed")
    compose(project, cranfield)
    for stage in ("encode@", "index@", "score"):
        log = tmp_path / f"kill-{stage.strip('@')}.log"
        killed = kill_when_running(start_repro(project, log), log, stage)
        assert killed, f"repro finished before {stage} could be killed"
        run(["rm", "-f", ".dvc/tmp/rwlock", ".dvc/tmp/lock"], project, check=False)
    run(["dvc", "repro"], project)
    assert_outputs_whole(project)


def test_second_concurrent_repro_fails_cleanly(tmp_path):
    cranfield = require_cranfield()
    project = make_project(tmp_path / "concurrent")
    compose(project, cranfield)
    log = tmp_path / "first.log"
    first = start_repro(project, log)
    deadline = time.monotonic() + 120
    while "Running stage" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    second = run(["dvc", "repro"], project, check=False)
    assert second.returncode != 0
    assert "lock" in (second.stderr + second.stdout).lower()
    assert first.wait(timeout=900) == 0
    assert_outputs_whole(project)
