"""Which project code each stage script runs, and one fingerprint file per script for DVC.

A stage's results depend on its script and on every module of the package it imports, directly
or transitively. Listing those files as each stage's deps in dvc.yaml made dvc.lock three fifths
code hashes, and DVC parses and rewrites the whole of dvc.lock after every stage it runs, so
every stage paid for every other stage's code list. Instead, the stage `code` (stages/code.py)
depends on the stages/ folder as a whole and writes, per script, a small JSON file naming each
file of that script's import closure with its sha256; each stage depends on its script's file
only. The file's bytes change exactly when a file the script imports changes (or the closure
itself does), so an edit still reruns exactly the stages whose code it touches.

`releval audit` recomputes the fingerprints when stages/ changed after the stage `code` ran, so
an edit is reported stale for exactly the numbers whose stages run the edited code.

The imports are read with :mod:`ast`, so nothing is executed: a module imported anywhere in a
file (inside a function too) counts, and `from a import x` counts a and a.x (x may be a module).
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from releval import io, paths

PACKAGE = "releval"
CODE_STAGE = "code"  # the DVC stage that writes the fingerprints (stages/code.py)


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
    resolve to no file are dropped by the caller.
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
    """The files of ``package`` (under ``source_root``) that ``script`` imports, at any depth.

    Package __init__.py files count even when they hold only a docstring: importing runs them, and
    code added to one later must rerun the stages that import through it.
    """
    seen: set[Path] = set()
    todo = [script]
    while todo:
        path = todo.pop()
        for name in imported_names(path, module_name(path, source_root)):
            if name != package and not name.startswith(package + "."):
                continue
            for module in with_parents(name):
                found = module_file(module, source_root)
                if found and found not in seen:
                    seen.add(found)
                    todo.append(found)
    return seen


def script_code(script: Path, root: Path, source_dir: str = paths.STAGES) -> list[str]:
    """The script and every project file it imports, relative to ``root``, sorted."""
    files = {script, *project_files(script, root / source_dir)}
    return sorted(path.relative_to(root).as_posix() for path in files)


def fingerprint(script: Path, root: Path, source_dir: str = paths.STAGES) -> dict[str, Any]:
    """The code a stage script runs: each file of its closure with the file's sha256."""
    return {
        "script": script.relative_to(root).as_posix(),
        "files": {name: io.sha256_file(root / name) for name in script_code(script, root, source_dir)},
    }


def fingerprint_text(script: Path, root: Path, source_dir: str = paths.STAGES) -> str:
    """The fingerprint file's text, exactly as :func:`write_fingerprints` writes it."""
    return io.json_text(fingerprint(script, root, source_dir))


def fingerprint_path(script: str | Path, folder: str | Path = paths.CODE_FINGERPRINTS) -> Path:
    """Where the fingerprint of ``script`` (stages/<name>.py) is written: <folder>/<name>.json."""
    return Path(folder) / f"{Path(script).stem}.json"


def write_fingerprints(root: Path, out: Path, source_dir: str = paths.STAGES) -> list[Path]:
    """One fingerprint file per stage script (each top-level .py of ``source_dir``) in ``out``,
    nothing else there; a file whose content is unchanged keeps its bytes."""
    out.mkdir(parents=True, exist_ok=True)
    scripts = sorted((root / source_dir).glob("*.py"))
    written = []
    for script in scripts:
        target = fingerprint_path(script, out)
        io.write_text(target, fingerprint_text(script, root, source_dir))
        written.append(target)
    for stale in set(out.glob("*.json")) - set(written):  # a script that was removed
        stale.unlink()
    return written


def changed_files(recorded: dict[str, Any] | None, now: dict[str, Any]) -> list[str]:
    """The files of a script's code that differ between a fingerprint and ``now``'s (added,
    removed or edited), sorted; every file of ``now`` when the recorded one is unknown."""
    before = (recorded or {}).get("files") or {}
    after = now["files"]
    return sorted(name for name in before.keys() | after.keys() if before.get(name) != after.get(name))
