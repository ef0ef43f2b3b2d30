"""The code each stage script runs, fingerprinted: what a stage in dvc.yaml depends on instead of its files.

A stage depends on ``data/work/code/<script>.json``, which the ``code`` stage writes from the
files the script imports, transitively (read with ``ast``: nothing is executed). Editing a module
rewrites only the fingerprints of the scripts that import it, so ``dvc repro`` reruns exactly those
stages; and dvc.lock records one entry per stage for its code instead of one per file (it is read
and rewritten after every stage, so its size is time on every iteration).
"""

from __future__ import annotations

import ast
import hashlib
import json
from collections.abc import Iterable
from pathlib import Path

PACKAGE = "releval"

# Packages whose __init__ imports each of its modules by name (importlib), which ``ast`` cannot
# see: importing the package counts as importing them all (the retriever families: family_class).
PLUGIN_PACKAGES = ("releval.retrieval.families",)


def module_file(module: str, source_root: Path) -> Path | None:
    """The file defining ``module`` under ``source_root`` (a module or a package), or None."""
    base = source_root.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def module_name(path: Path, source_root: Path) -> str | None:
    """The dotted name of a file under ``source_root``; None for a file outside it (a stage script)."""
    if not path.is_relative_to(source_root):
        return None
    parts = path.relative_to(source_root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(path: Path, name: str | None) -> set[str]:
    """Every module ``path`` may import, at any depth of the file (imports inside functions too).

    ``from a import x`` yields both ``a`` and ``a.x``, since x may be a submodule; names that
    resolve to no file are dropped later.
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


def project_files(script: Path, source_root: Path, package: str = PACKAGE) -> set[Path]:
    """The files of ``package`` that ``script`` imports, directly or transitively.

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


def fingerprint(script: Path, source_root: Path, root: Path) -> dict[str, object]:
    """The script and every project file it imports, each with its sha256, paths relative to ``root``."""
    files = sorted({script, *project_files(script, source_root)}, key=lambda p: p.relative_to(root).as_posix())
    return {
        "script": script.relative_to(root).as_posix(),
        "files": {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in files},
    }


def fingerprint_text(record: dict[str, object]) -> str:
    """A fingerprint as the code stage writes it: the same record, the same bytes."""
    return json.dumps(record, indent=2, sort_keys=True) + "\n"


def stage_scripts(scripts_dir: Path, exclude: Iterable[str] = ()) -> list[Path]:
    """The stage scripts: the .py files directly in ``scripts_dir``, by name, less ``exclude`` (file names)."""
    skipped = set(exclude)
    return sorted(p for p in scripts_dir.glob("*.py") if p.name not in skipped)
