"""The package's import structure: no module of releval imports itself back through others (at any
depth of a file: imports inside functions and under TYPE_CHECKING count), and argparse objects stay
in the command line's modules.

Read with `ast` (test_dvc_wiring's import walker), so nothing is executed.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

from support import ROOT
from test_dvc_wiring import PACKAGE, SOURCE_DIR, imported_names, module_file, module_name, with_parents

SOURCE_ROOT = ROOT / SOURCE_DIR


def import_graph(source_root: Path, package: str = PACKAGE) -> dict[str, set[str]]:
    """module -> the modules of ``package`` it imports (package __init__ files run on the way included)."""
    graph: dict[str, set[str]] = {}
    for path in sorted((source_root / package).rglob("*.py")):
        name = module_name(path, source_root)
        found = set()
        for imported in imported_names(path, name):
            if imported != package and not imported.startswith(package + "."):
                continue
            found.update(m for m in with_parents(imported) if m != name and module_file(m, source_root))
        graph[name] = found
    return graph


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Every group of modules that import one another, directly or through others (Tarjan's strongly
    connected components of more than one module, and a module importing itself)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(start: str) -> None:
        # iterative: (module, its remaining successors)
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        while work:
            module, successors = work[-1]
            step = next(successors, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    work.append((step, iter(sorted(graph.get(step, ())))))
                elif step in stack:
                    low[module] = min(low[module], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[module])
            if low[module] == index[module]:
                group = []
                while True:
                    member = stack.pop()
                    group.append(member)
                    if member == module:
                        break
                if len(group) > 1 or module in graph.get(module, ()):
                    found.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(found)


def test_no_module_imports_itself_back():
    found = cycles(import_graph(SOURCE_ROOT))
    assert not found, "import circles: " + "; ".join(" <-> ".join(group) for group in found)


def test_the_cycle_finder_finds_a_circle_through_a_function_import(tmp_path):
    files = {
        "releval/__init__.py": "",
        "releval/a.py": "from releval import b\n",
        "releval/b.py": "def f():\n    from releval.sub import c\n    return c\n",
        "releval/sub/__init__.py": "",
        "releval/sub/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from releval.a import x\n",
        "releval/d.py": "from releval.sub.c import y\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    graph = import_graph(tmp_path)
    assert graph["releval.d"] == {"releval", "releval.sub", "releval.sub.c"}
    assert cycles(graph) == [["releval.a", "releval.b", "releval.sub.c"]]
    (tmp_path / "releval/sub/c.py").write_text("")
    assert cycles(import_graph(tmp_path)) == []


# --------------------------------------------------------------------------- argparse

# Where argparse objects may live: the CLI's modules. A module run with `python -m` may parse its own
# arguments in main() or under `if __name__ == "__main__":`, handing plain values on.
COMMAND_LINE = ("releval.cli", "releval.commands")


def _is_main_guard(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.If)
        and isinstance(node.test, ast.Compare)
        and isinstance(node.test.left, ast.Name)
        and node.test.left.id == "__name__"
    )


def argparse_uses(path: Path) -> list[int]:
    """Lines of ``path`` naming argparse outside its `python -m` entry point (``main()`` or the main guard)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    allowed: set[int] = set()
    for node in ast.walk(tree):
        inside_entry = _is_main_guard(node) or (isinstance(node, ast.FunctionDef) and node.name == "main")
        if inside_entry:
            allowed.update(range(node.lineno, node.end_lineno + 1))
    uses = []
    for node in ast.walk(tree):
        named = (isinstance(node, ast.Name) and node.id == "argparse") or (
            isinstance(node, ast.Attribute) and node.attr == "Namespace"
        )
        if named and node.lineno not in allowed:
            uses.append(node.lineno)
    return sorted(set(uses))


def test_argparse_objects_stay_in_the_command_line():
    found = {}
    for path in sorted((SOURCE_ROOT / PACKAGE).rglob("*.py")):
        name = module_name(path, SOURCE_ROOT)
        if name.startswith(COMMAND_LINE):
            continue
        lines = argparse_uses(path)
        if lines:
            found[path.relative_to(ROOT).as_posix()] = lines
    assert not found, f"argparse outside commands/ and the modules' `python -m` entry points: {found}"


def test_the_argparse_check_allows_only_a_python_m_entry_point(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(
        "import argparse\n\n\n"
        "def run(args: argparse.Namespace) -> int:\n    return 0\n\n\n"
        "def main() -> None:\n    argparse.ArgumentParser().parse_args()\n\n\n"
        "if __name__ == '__main__':\n    parser = argparse.ArgumentParser()\n"
    )
    assert argparse_uses(module) == [4]
