"""A link of the audit's chain (:class:`Link`: ok, broken or a note) and the comparisons that make
one: where two JSON documents, texts or tables first differ, a slice mean within its tolerance, and
which of a stage's recorded code files differ from this checkout's (:func:`other_code`)."""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

import releval
from releval.provenance.lineage import _entry_hash

BROKEN = ("stale", "modified", "missing", "mismatch")


@dataclass(frozen=True)
class Link:
    check: str  # recompute | inputs | run file | archive | dvc.lock | sidecar
    subject: str  # what was checked
    status: str  # ok | stale | modified | missing | mismatch | note | unavailable (not broken)
    detail: str = ""

    @property
    def broken(self) -> bool:
        return self.status in BROKEN


@dataclass
class Verification:
    links: list[Link]
    hashes_checked: int = 0

    @property
    def broken(self) -> list[Link]:
        return [link for link in self.links if link.broken]

    @property
    def ok(self) -> bool:
        return not self.broken


NOT_HERE = (
    "neither this copy nor the local DVC cache holds it; `dvc repro` makes it again, `dvc pull` (from a remote) "
    "brings it back unless dvc.yaml declares it `cache: false` (the model folders: never pushed)"
)


# Slice means: the metric engine averages each slice with a polars group_by, whose summation
# order is not fixed, so two runs on identical inputs can differ in the last bit or two. Overall
# means are summed in a fixed order and must match exactly.
SLICE_REL_TOL = 1e-12


def _slice_link(subject: str, recorded: Any, value: Any) -> Link:
    if recorded == value:
        return Link("recompute", subject, "ok", f"{value!r}")
    if (
        isinstance(recorded, float)
        and isinstance(value, float)
        and math.isclose(recorded, value, rel_tol=SLICE_REL_TOL, abs_tol=1e-15)
    ):
        return Link(
            "recompute",
            subject,
            "ok",
            f"{value!r} (metrics.json {recorded!r}: equal to {SLICE_REL_TOL:g}; "
            "slice means are summed in no fixed order)",
        )
    return Link("recompute", subject, "mismatch", f"metrics.json {recorded!r}, recomputed {value!r}")


def _unique(links: Sequence[Link]) -> list[Link]:
    return list(dict.fromkeys(links))


def _common(recorded: Any, expected: Any) -> tuple[Any, Any]:
    """Both JSON values cut to what both hold: the keys of each mapping both have (recursively,
    into lists of equal length); what one version of the code writes and another does not is left out."""
    if isinstance(recorded, dict) and isinstance(expected, dict):
        pairs = {k: _common(recorded[k], expected[k]) for k in recorded if k in expected}
        return {k: a for k, (a, _) in pairs.items()}, {k: b for k, (_, b) in pairs.items()}
    if isinstance(recorded, list) and isinstance(expected, list) and len(recorded) == len(expected):
        pairs = [_common(a, b) for a, b in zip(recorded, expected)]
        return [a for a, _ in pairs], [b for _, b in pairs]
    return recorded, expected


def _json_difference(recorded: Any, expected: Any, where: str = "") -> str:
    """Where two JSON values first differ: ``key.path: recorded X, expected Y``."""
    if isinstance(recorded, dict) and isinstance(expected, dict):
        for key in dict.fromkeys([*recorded, *expected]):
            if key not in recorded:
                return f"{where}{key} is missing (expected {_short(expected[key], 60)})"
            if key not in expected:
                return f"{where}{key} should not be there (holds {_short(recorded[key], 60)})"
            if recorded[key] != expected[key]:
                return _json_difference(recorded[key], expected[key], f"{where}{key}.")
    if isinstance(recorded, list) and isinstance(expected, list) and len(recorded) == len(expected):
        for i, (a, b) in enumerate(zip(recorded, expected)):
            if a != b:
                return _json_difference(a, b, f"{where}[{i}].")
    return (
        f"{where.rstrip('.') or 'the document'}: the file has {_short(recorded, 60)}, expected {_short(expected, 60)}"
    )


def _text_difference(recorded: str, expected: str) -> str:
    """The first line where two texts differ."""
    a, b = recorded.split("\n"), expected.split("\n")
    for number, (x, y) in enumerate(zip(a, b), 1):
        if x != y:
            return f"line {number} reads {_short(x, 90)!s}, expected {_short(y, 90)!s}"
    return f"{len(a)} lines, expected {len(b)}"


NUMBER = re.compile(r"[-+]?\d+(?:[.,]\d+)*(?:e[-+]?\d+)?")


def _numbers(text: str) -> list[str]:
    return NUMBER.findall(text)


def _number_difference(recorded: str, expected: str) -> str:
    """The first line whose numbers differ (the lines' words may differ too)."""
    a = [(n, _numbers(line), line) for n, line in enumerate(recorded.split("\n"), 1) if _numbers(line)]
    b = [(n, _numbers(line), line) for n, line in enumerate(expected.split("\n"), 1) if _numbers(line)]
    for (number, mine, line), (_, theirs, other) in zip(a, b):
        if mine != theirs:
            return f"line {number} reads {_short(line, 90)}, expected {_short(other, 90)}"
    return f"{len(a)} lines with numbers, expected {len(b)}"


def _frame_difference(recorded: pl.DataFrame, expected: pl.DataFrame, keys: Sequence[str]) -> str:
    """Where two tables first differ: a column, a row count, or a cell named by its key columns."""
    if recorded.columns != expected.columns:
        return f"columns {recorded.columns}, expected {expected.columns}"
    if recorded.height != expected.height:
        return f"{recorded.height} rows, expected {expected.height}"
    for column in recorded.columns:
        a, b = recorded[column], expected[column]
        if a.dtype != b.dtype:
            return f"column {column} is {a.dtype}, expected {b.dtype}"
        differs = ~(a.eq_missing(b)) if a.dtype != pl.Object else None
        if differs is None or not differs.any():
            continue
        row = int(differs.arg_max())
        where = ", ".join(f"{k} {recorded[k][row]}" for k in keys if k in recorded.columns and k != column)
        return f"{column} of {where or f'row {row}'}: the file has {a[row]!r}, expected {b[row]!r}"
    return "the tables differ"


def other_code(lock: Mapping[str, Any], stage: str) -> list[str]:
    """The code files a stage recorded in dvc.lock (its deps under stages/) whose md5 differs from
    the file of the releval checkout doing the audit: empty when this code is the code that ran."""
    code_root = Path(releval.__file__).resolve().parents[2]  # stages/releval/__init__.py -> the checkout
    differ = []
    for dep in (lock.get(stage) or {}).get("deps") or []:
        path = str(dep.get("path", ""))
        if not (path.startswith("stages/") and path.endswith(".py")):
            continue
        mine = code_root / path
        if not mine.is_file() or hashlib.md5(mine.read_bytes()).hexdigest() != _entry_hash(dep):
            differ.append(path)
    return differ


def _short(value: Any, limit: int = 100) -> str:
    text = json.dumps(value, sort_keys=True, default=str) if not isinstance(value, str) else value
    return text if len(text) <= limit else text[: limit - 1] + "…"
