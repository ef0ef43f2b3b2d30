"""A newcomer's shell in a fresh clone, running the docs' command blocks as the docs write them.

:class:`Shell` runs a step (:mod:`support.doc_blocks`) with bash, in the clone, with nothing of
the test's own environment that a user would not have: no virtual environment on PATH until a
step the docs say activates it has run, no PYTHONPATH. Each step's output goes to a log file named
after the step, and a failed expectation shows its tail.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from support import ROOT
from support.doc_blocks import step

ACTIVATE = "source .venv/bin/activate"
TAIL = 4000  # characters of a failed step's output shown


def newcomer_environment() -> dict[str, str]:
    """The test's environment less what a newcomer's shell would not hold: any virtual environment's
    bin/ on PATH, VIRTUAL_ENV, PYTHONPATH; with git's identity for commits, no browser to open
    (`releval judge` prints its address), and progress as lines (the logs are no terminal)."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    parts = [p for p in env.get("PATH", "").split(os.pathsep) if p and not p.rstrip("/").endswith("/.venv/bin")]
    env["PATH"] = os.pathsep.join(parts)
    env.update(
        GIT_AUTHOR_NAME="Newcomer",
        GIT_AUTHOR_EMAIL="newcomer@example.org",
        GIT_COMMITTER_NAME="Newcomer",
        GIT_COMMITTER_EMAIL="newcomer@example.org",
        BROWSER="true",
        RELEVAL_PROGRESS="line",
        HF_HUB_OFFLINE="1",
    )
    return env


@dataclass
class Ran:
    step: str
    code: int
    output: str  # stdout and stderr, interleaved as a terminal shows them
    seconds: float

    def tail(self) -> str:
        return self.output[-TAIL:]


class Shell:
    """One user's shell in ``cwd``; ``activated`` once a step ran the docs' activation line."""

    def __init__(self, cwd: Path, logs: Path, env: dict[str, str]):
        self.cwd, self.logs, self.env = cwd, logs, env
        self.activated = False
        self.timings: dict[str, float] = {}
        logs.mkdir(parents=True, exist_ok=True)

    def script(self, text: str) -> str:
        prefix = f"{ACTIVATE}\n" if self.activated else ""
        return f"set -eo pipefail\n{prefix}{text}"

    def _log(self, step_id: str) -> Path:
        return self.logs / (re.sub(r"[^A-Za-z0-9._-]", "_", step_id) + ".log")

    def run(self, step_id: str, expect: int | None = 0, timeout: float = 3600) -> Ran:
        """Run the step's block; ``expect`` its exit status (None: any)."""
        block = step(step_id)
        assert block.is_command, f"{block.where}: step {step_id} is a {block.language} block, not commands"
        return self.run_text(step_id, block.text, expect, timeout)

    def run_text(self, name: str, text: str, expect: int | None = 0, timeout: float = 3600) -> Ran:
        start = time.monotonic()
        done = subprocess.run(
            ["bash", "-c", self.script(text)],
            cwd=self.cwd,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=timeout,
        )
        ran = Ran(name, done.returncode, done.stdout, time.monotonic() - start)
        self.timings[name] = ran.seconds
        self._log(name).write_text(f"$ {text}\n{done.stdout}\n[exit {done.returncode}, {ran.seconds:.1f} s]\n")
        if ACTIVATE in text and done.returncode == 0:
            self.activated = True
        if expect is not None:
            assert ran.code == expect, f"{name}: exit {ran.code}, expected {expect}\n{ran.tail()}"
        return ran

    def start(self, step_id: str) -> Background:
        """Start a step that runs until it is stopped (a server): its output goes to its log file."""
        block = step(step_id)
        log = self._log(step_id)
        handle = open(log, "w")
        process = subprocess.Popen(
            ["bash", "-c", self.script(block.text)],
            cwd=self.cwd,
            env=self.env,
            stdout=handle,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        return Background(step_id, process, log, handle)


@dataclass
class Background:
    step: str
    process: subprocess.Popen
    log: Path
    handle: object

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, pattern: str, timeout: float = 600) -> re.Match:
        """The first match of ``pattern`` in the output, waiting for it (the process must stay up)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = re.search(pattern, self.output())
            if found:
                return found
            if self.process.poll() is not None:
                raise AssertionError(f"{self.step} exited {self.process.returncode}:\n{self.output()[-TAIL:]}")
            time.sleep(0.2)
        raise AssertionError(f"{self.step}: no {pattern!r} in {timeout} s:\n{self.output()[-TAIL:]}")

    def wait(self, timeout: float = 600) -> int:
        try:
            return self.process.wait(timeout)
        finally:
            self.handle.close()

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
        self.handle.close()


def fresh_clone(dest: Path) -> Path:
    """``git clone`` of this repository's HEAD (what a newcomer clones: committed files only)."""
    subprocess.run(["git", "clone", "-q", str(ROOT), str(dest)], check=True)
    return dest
