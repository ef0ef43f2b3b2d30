"""The command blocks of the docs, as the journey suite runs them: the docs are the test's script.

A block a journey runs is marked in the Markdown by an HTML comment on the line before its fence::

    <!-- journey: own-corpus/init -->
    ```bash
    releval init-dataset mydocs --corpus ../mydocs --format folder
    ```

The comment renders as nothing on GitHub and in the docs site. A journey test runs a step by its
id (``own-corpus/init``), exactly the text between the fences, so a doc and its test cannot drift:
editing the command edits what the test runs. Ids are unique across README.md and docs/.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from support import ROOT

MARKER = re.compile(r"^<!--\s*journey:\s*(?P<step>[A-Za-z0-9][A-Za-z0-9._/-]*)\s*-->\s*$")
FENCE = re.compile(r"^(?P<fence>```+|~~~+)\s*(?P<info>[^`]*)$")
COMMAND_LANGUAGES = ("bash", "sh", "shell", "console")
DOC_GLOBS = ("README.md", "docs/**/*.md")


@dataclass(frozen=True)
class Block:
    """One fenced block of a doc."""

    file: str  # relative to the repository root
    line: int  # 1-based line of the opening fence
    language: str  # the fence's first word: bash, python, yaml, text, ...
    text: str  # what is between the fences, with its final newline
    step: str | None  # the journey step that runs it; None: no marker

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    @property
    def is_command(self) -> bool:
        return self.language in COMMAND_LANGUAGES


def doc_files(root: Path = ROOT) -> list[Path]:
    found: list[Path] = []
    for pattern in DOC_GLOBS:
        found += sorted(p for p in root.glob(pattern) if p.is_file())
    return found


def read_blocks(path: Path, root: Path = ROOT) -> list[Block]:
    """Every fenced block of ``path``, each with the journey step its preceding marker names."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    pending: str | None = None
    while i < len(lines):
        line = lines[i]
        marker = MARKER.match(line.strip())
        if marker:
            pending = marker["step"]
            i += 1
            continue
        opening = FENCE.match(line.strip())
        if opening:
            fence = opening["fence"]
            start = i
            body: list[str] = []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith(fence):
                body.append(lines[i])
                i += 1
            indent = len(line) - len(line.lstrip())
            text = "\n".join(b[indent:] if b[:indent].isspace() else b for b in body)
            language = (opening["info"].split() or [""])[0].lower()
            blocks.append(Block(path.relative_to(root).as_posix(), start + 1, language, text + "\n", pending))
            pending = None
        elif line.strip():
            pending = None  # a marker belongs to the block right after it
        i += 1
    return blocks


@cache
def all_blocks(root: Path = ROOT) -> tuple[Block, ...]:
    return tuple(block for path in doc_files(root) for block in read_blocks(path, root))


def steps(root: Path = ROOT) -> dict[str, Block]:
    """Step id -> its block; an id used twice is an error naming both places."""
    found: dict[str, Block] = {}
    for block in all_blocks(root):
        if block.step is None:
            continue
        if block.step in found:
            raise ValueError(f"journey step {block.step!r} marks {found[block.step].where} and {block.where}")
        found[block.step] = block
    return found


def step(step_id: str, root: Path = ROOT) -> Block:
    found = steps(root)
    if step_id not in found:
        raise KeyError(f"no block of the docs is marked <!-- journey: {step_id} --> (marked: {', '.join(found)})")
    return found[step_id]
