"""Running commands (releval, dvc, git) in a test project."""

import os
import subprocess
from pathlib import Path

from support import BIN


def run(cmd, cwd: Path, check: bool = True, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", **(env_extra or {})}
    result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if check and result.returncode != 0:
        raise AssertionError(f"{cmd} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result


def ran_stages(output: str) -> set[str]:
    """Stage names that `dvc repro` actually executed."""
    return {line.split("'")[1] for line in output.splitlines() if line.startswith("Running stage '")}


def git(root: Path, *args: str) -> str:
    """`git ARGS` in ``root`` under a fixed author and committer; its stdout."""
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    return subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True, text=True).stdout
