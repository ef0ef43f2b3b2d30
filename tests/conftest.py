import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
CRANFIELD = SHARED / "data" / "cranfield"
BIN = Path(sys.executable).parent

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def require_cranfield() -> Path:
    if not (CRANFIELD / "cran.all.1400").exists():
        pytest.skip(f"Cranfield collection not found at {CRANFIELD}")
    return CRANFIELD


@pytest.fixture(scope="session")
def cranfield() -> Path:
    return require_cranfield()


PROJECT_FILES = ["dvc.yaml", "conf", "stages", "dvc_plots", ".dvc/config", ".dvcignore", ".gitignore",
                 "reports/holdout_access.jsonl"]


def make_project(dest: Path) -> Path:
    """A fresh git + DVC repository holding this project's pipeline (code, configs), for real runs."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in PROJECT_FILES:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    run(["git", "init", "-q"], dest)
    run(["git", "config", "user.email", "test@releval.local"], dest)
    run(["git", "config", "user.name", "releval tests"], dest)
    return dest


def run(cmd, cwd: Path, check: bool = True, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", **(env_extra or {})}
    result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if check and result.returncode != 0:
        raise AssertionError(f"{cmd} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result


def ran_stages(output: str) -> set[str]:
    """Stage names that `dvc repro` actually executed."""
    return {line.split("'")[1] for line in output.splitlines() if line.startswith("Running stage '")}
