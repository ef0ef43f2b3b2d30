"""A tiny project of stage scripts and a package, for the code fingerprints and the audit of code edits."""

from pathlib import Path

# stages/s.py -> releval.a -> (relative) releval.b -> (inside a function) releval.sub.c;
# stages/t.py imports nothing of the package; releval.unused is imported by no script.
FILES = {
    "stages/s.py": "import os\nfrom releval import a\n",
    "stages/t.py": "import os\n",
    "stages/releval/__init__.py": '"""Docstring only, yet run by every import of the package."""\n',
    "stages/releval/a.py": "from . import b\n",
    "stages/releval/b.py": "def f():\n    from releval.sub.c import g\n    return g\n",
    "stages/releval/sub/__init__.py": "X = 1\n",
    "stages/releval/sub/c.py": "def g():\n    return 1\n",
    "stages/releval/unused.py": "Y = 2\n",
}


def write_code_project(root: Path) -> Path:
    for name, text in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root
