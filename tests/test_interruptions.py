"""Concurrent runs never leave a result that looks complete but is not.

Two `dvc repro` at once on a copy of the default project (``default_project``, the small pydocs
cut): the second must fail cleanly on DVC's locks while the first completes, its outputs whole.
The first is held, deterministically, inside one of its stages while the second tries: a
``python`` placed first on PATH (DVC runs each stage's ``python stages/...`` through the shell)
waits at the chosen stage until the test lets it go.

Killed runs are covered by the fault-injection tests of test_default_pipeline.py (a stage
SIGKILLed at a chosen point inside the writer, then redone byte for byte).
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
import yaml

from support import BIN
from support.commands import ran_stages, run
from support.projects import copy_project
from support.pydocs_mini import DEFAULT_MODELS, MINI_CHUNKINGS, MINI_CONFIGS

pytestmark = pytest.mark.slow


GATE_PYTHON = """#!/bin/sh
# Stands in for python in the stages' commands: at stage script {script}, say so, then wait
# until the test removes the hold file.
if [ "$1" = "{script}" ]; then
    : > "{gate}/entered"
    while [ -e "{gate}/hold" ]; do sleep 0.05; done
fi
exec "{python}" "$@"
"""


def gated_env(gate: Path, script: str) -> dict[str, str]:
    """An environment whose `python` stops at ``script`` while ``gate/hold`` exists."""
    gate.mkdir(parents=True)
    shim = gate / "bin" / "python"
    shim.parent.mkdir()
    shim.write_text(GATE_PYTHON.format(script=script, gate=gate, python=sys.executable))
    shim.chmod(0o755)
    (gate / "hold").touch()
    return {**os.environ, "PATH": os.pathsep.join([str(shim.parent), str(BIN), os.environ.get("PATH", "")])}


def assert_outputs_whole(project: Path) -> None:
    metrics = json.loads((project / "reports" / "metrics.json").read_text())
    assert set(metrics["configs"]) == MINI_CONFIGS
    runs = list((project / "data" / "work" / "runs").rglob("run.json"))
    assert len(runs) == len(MINI_CONFIGS)
    for run_json in runs:
        assert pl.read_parquet(run_json.parent / "run.parquet").height > 0, run_json
    assert run(["dvc", "status"], project).stdout.strip() == "Data and pipelines are up to date."
    # No writer's temporary file is left anywhere among the outputs.
    assert [p for d in ("data/work", "reports") for p in (project / d).rglob(".releval-tmp-*")] == []


@pytest.mark.heavy  # repeats part of the pipeline (30-85 s); make test-heavy
def test_second_concurrent_repro_fails_cleanly(default_project, tmp_path):
    project = copy_project(default_project, tmp_path / "concurrent")
    run(["releval", "params", MINI_CHUNKINGS, "fusions.rrf.k=10"], project)  # the fusions, then scoring, rerun
    gate = tmp_path / "gate"
    log = tmp_path / "first.log"
    with open(log, "w") as out:
        first = subprocess.Popen(
            ["dvc", "repro"],
            cwd=project,
            env=gated_env(gate, "stages/score.py"),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 600
        while not (gate / "entered").exists():  # the first repro is inside `score`, holding DVC's lock
            assert first.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        second = run(["dvc", "repro"], project, check=False)
        assert second.returncode != 0
        # DVC lets go of its repository lock while a stage's command runs and keeps locks on that stage's
        # paths instead (.dvc/tmp/rwlock): the second run stops at the first stage that touches one of
        # them (`queries`, whose output `score` reads), naming the first run as the blocker, having run nothing.
        assert "is busy, it is being blocked by" in second.stderr and f"(PID {first.pid})" in second.stderr
        assert "rwlock" in second.stderr
        assert ran_stages(second.stdout) == set()
    except BaseException:
        os.killpg(first.pid, signal.SIGKILL)  # a failed check must not leave the first run behind
        first.wait()
        raise
    finally:
        (gate / "hold").unlink(missing_ok=True)
    assert first.wait(timeout=900) == 0, log.read_text()
    fusions = {f"fuse@rrf-{m}-{c}" for m in DEFAULT_MODELS for c in ("c256", "c512")} | {"fuse-runs@splade_minilm"}
    assert ran_stages(log.read_text()) == fusions | {"params", "archive", "rescore", "score", "report"}
    assert_outputs_whole(project)
    # What the first run recorded is the new configuration's.
    lock = yaml.safe_load((project / "dvc.lock").read_text())["stages"]
    assert lock["fuse@rrf-minilm-c256"]["params"]["params.yaml"]["fusions.rrf"]["k"] == 10
