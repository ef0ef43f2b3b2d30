"""releval.paths, the stage scripts and dvc.yaml name the same files, each path written once.

A stage script's path flags default to releval.paths; dvc.yaml lists those paths as the stage's
deps and outs, spelt the same (for a templated entry, its fixed part before `${`). dvc.yaml's
`${reports_dir}` (the active dataset's reports folder) reads as `reports`, the default dataset's
folder the scripts' flags default to. The scripts are read with `ast`, so nothing is executed.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest

from releval import paths
from support import ROOT
from support.dvc_pipeline import PIPELINE, stage_bodies, stage_script

DATA_PATH = re.compile(r"^(data|reports|dvc_plots)/")
# Defaults that dvc.yaml does not list, and why.
NOT_IN_DVC_YAML = {
    ("archive", "--lock"): "dvc.lock is DVC's own record of the stages, read for provenance",
    ("score", "--holdout-log"): "appended to only when `releval holdout` opens the holdout, never under DVC",
    ("encode", "--store"): "the embedding store is a cache beside DVC's: outputs never depend on what it holds",
    ("retrieve", "--store"): "the embedding store is a cache beside DVC's: outputs never depend on what it holds",
    ("externals", "--queries"): "stages/external.py --declared records the declarations only; it reads no table",
    ("externals", "--docs"): "stages/external.py --declared records the declarations only; it reads no table",
}
DECLARED = {value for name, value in vars(paths).items() if name.isupper() and isinstance(value, str)}


def default_paths(script: Path) -> dict[str, str]:
    """Flag → default of every ``add_argument(..., default=paths.NAME)`` in ``script``."""
    found = {}
    for node in ast.walk(ast.parse(script.read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument"):
            continue
        default = next((k.value for k in node.keywords if k.arg == "default"), None)
        if isinstance(default, ast.Attribute) and isinstance(default.value, ast.Name) and default.value.id == "paths":
            found[node.args[0].value] = getattr(paths, default.attr)
    return found


def path_literals(script: Path) -> list[str]:
    """String constants in ``script`` that spell a project path (docstrings left out)."""
    tree = ast.parse(script.read_text(encoding="utf-8"))
    docstrings = {
        id(body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef))
        and (body := node.body)
        and isinstance(body[0], ast.Expr)
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
        and (DATA_PATH.match(node.value) or node.value == paths.DVC_LOCK)
    ]


def as_default_dataset(entry: str) -> str:
    """``${reports_dir}/metrics.json`` as the default dataset has it: ``reports/metrics.json``."""
    return entry.replace(paths.REPORTS_DIR_VAR, paths.REPORTS)


def listed_paths(body: dict[str, Any]) -> list[str]:
    """The stage's data deps and outs (metrics included), each templated one cut to its fixed prefix."""
    entries = []
    for key in ("deps", "outs", "metrics"):
        for entry in body.get(key, []):
            entries.append(as_default_dataset(next(iter(entry)) if isinstance(entry, dict) else entry))
    fixed = [entry.split("${")[0] for entry in entries]
    return [entry for entry in fixed if entry and not entry.startswith("stages/")]


def covers(default: str, listed: str) -> bool:
    """``listed`` is ``default`` itself or lies under it (a folder flag: --reports, --work, --runs-root)."""
    return listed == default or listed.startswith(default + "/")


STAGES = sorted(stage_bodies(PIPELINE))


@pytest.mark.parametrize("stage", STAGES)
def test_a_scripts_default_paths_are_its_deps_or_outs(stage: str) -> None:
    body = stage_bodies(PIPELINE)[stage]
    defaults = default_paths(ROOT / stage_script(body))
    listed = listed_paths(body)
    unlisted = {
        flag: default
        for flag, default in defaults.items()
        if (stage, flag) not in NOT_IN_DVC_YAML and not any(covers(default, entry) for entry in listed)
    }
    assert not unlisted, f"stage {stage}: defaults dvc.yaml does not list: {unlisted}"
    unread = [entry for entry in listed if not any(covers(default, entry) for default in defaults.values())]
    assert not unread, f"stage {stage}: dvc.yaml lists paths no flag of its script defaults to: {unread}"


@pytest.mark.parametrize("stage", STAGES)
def test_dvc_yaml_spells_each_path_as_releval_paths_does(stage: str) -> None:
    undeclared = [
        entry
        for entry in listed_paths(stage_bodies(PIPELINE)[stage])
        if entry.rstrip("/") not in DECLARED and DATA_PATH.match(entry)
    ]
    assert not undeclared, f"stage {stage}: not declared in releval.paths: {undeclared}"


@pytest.mark.parametrize("script", sorted((ROOT / "stages").glob("*.py")), ids=lambda p: p.name)
def test_stage_scripts_write_no_path_of_their_own(script: Path) -> None:
    assert not path_literals(script), f"{script.name}: use releval.paths for {path_literals(script)}"


def reports_entries(body: dict[str, Any]) -> list[str]:
    """The stage's deps and outs under the reports folder, as dvc.yaml spells them."""
    entries = [
        next(iter(e)) if isinstance(e, dict) else e for key in ("deps", "outs", "metrics") for e in body.get(key, [])
    ]
    return [e for e in entries if e.startswith((paths.REPORTS_DIR_VAR, paths.REPORTS + "/"))]


@pytest.mark.parametrize("stage", STAGES)
def test_reports_are_the_active_datasets_folder(stage: str) -> None:
    """Every report path is under ${reports_dir}, and the stage's --reports flag is given it; only
    the holdout log, one record of openings for the whole project, stays at reports/ itself."""
    body = stage_bodies(PIPELINE)[stage]
    entries = [e for e in reports_entries(body) if e != paths.HOLDOUT_LOG]
    fixed = [e for e in entries if not e.startswith(paths.REPORTS_DIR_VAR + "/")]
    assert not fixed, f"stage {stage}: write {paths.REPORTS_DIR_VAR}/..., not {fixed}"
    if any(e.startswith(paths.REPORTS_DIR_VAR) for e in entries):
        assert f"--reports {paths.REPORTS_DIR_VAR}" in body["cmd"], f"stage {stage}: cmd lacks --reports"


def test_top_level_plots_read_the_active_datasets_folder() -> None:
    files = [path for entry in PIPELINE["plots"] for spec in entry.values() for path in spec["y"]]
    assert files and all(path.startswith(paths.REPORTS_DIR_VAR + "/plots/") for path in files), files


def test_not_in_dvc_yaml_names_real_flags() -> None:
    for stage, flag in NOT_IN_DVC_YAML:
        assert flag in default_paths(ROOT / stage_script(stage_bodies(PIPELINE)[stage])), (stage, flag)


def test_rebase_moves_a_default_path_under_another_folder() -> None:
    assert paths.rebase(paths.METRICS, paths.REPORTS, "out/r") == Path("out/r/metrics.json")
    assert paths.rebase(paths.PLOTS, paths.REPORTS, paths.REPORTS) == Path(paths.PLOTS)
    assert paths.rebase(paths.MODEL_RUNS, paths.RUNS, "elsewhere") / "m" == Path("elsewhere/model/m")
