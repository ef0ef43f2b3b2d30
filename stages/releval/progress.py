"""Progress you can watch: a bar with rate and ETA on a terminal, one summary line elsewhere.

Long loops (encoding, index builds, BM25, retrieval, reranking, pooling, ``audit --all``) go
through :func:`progress` (one unit per item), :func:`tracker` (steps of any size, or a library's
own callback) or :func:`blocks` (slices of a batch). On a terminal (stderr is a TTY) they draw
a tqdm bar with the rate and the time left; under CI, in DVC's logs or in a pipe they print a
line every :data:`LINE_EVERY_SECONDS` while running (a long encode never looks hung) and one
line when done, so logs stay readable::

    encode minilm/c256: 1,650 of 8,113 chunks (20%) in 30.0 s (55.0 chunks/s), about 117 s left
    encode minilm/c256: 8,113 chunks in 61.2 s (132.6 chunks/s)

``RELEVAL_PROGRESS=bar|line|off`` overrides the choice (``off``: nothing at all). Everything goes
to stderr: stdout stays the stages' own report lines. A ``desc`` of None shows nothing: library
functions take an optional ``desc`` and show progress only when their caller names it.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterable, Iterator
from typing import TypeVar

ENVIRONMENT = "RELEVAL_PROGRESS"
MODES = ("bar", "line", "off")
LINE_EVERY_SECONDS = 30.0  # line mode: how often a running loop says where it is

T = TypeVar("T")


def mode() -> str:
    """``bar`` on a terminal, ``line`` otherwise, unless ``RELEVAL_PROGRESS`` says which."""
    chosen = os.environ.get(ENVIRONMENT, "").strip().lower()
    if chosen in MODES:
        return chosen
    return "bar" if sys.stderr.isatty() else "line"


class Progress:
    """Counts units done; :meth:`update` after each step. Use through :func:`tracker`.

    ``desc`` None shows nothing: a library function shows progress only when its caller names it.
    """

    def __init__(self, desc: str | None, total: int | None, unit: str):
        self.desc, self.total, self.unit = desc, total, unit
        self.done = 0
        self.start = time.perf_counter()
        self._next_line = self.start + LINE_EVERY_SECONDS
        self.mode = "off" if desc is None else mode()
        self._bar = None
        if self.mode == "bar":
            from tqdm.auto import tqdm

            self._bar = tqdm(total=total, desc=desc, unit=f" {unit}", file=sys.stderr, dynamic_ncols=True, leave=True)

    def update(self, n: int = 1) -> None:
        self.done += n
        if self._bar is not None:
            self._bar.update(n)
        elif self.mode == "line" and (now := time.perf_counter()) >= self._next_line:
            self._next_line = now + LINE_EVERY_SECONDS
            print(
                running_line(self.desc, self.done, self.total, self.unit, now - self.start), file=sys.stderr, flush=True
            )

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        elif self.mode == "line":
            print(summary_line(self.desc, self.done, self.unit, time.perf_counter() - self.start), file=sys.stderr)


def running_line(desc: str, done: int, total: int | None, unit: str, seconds: float) -> str:
    """``desc: 1,650 of 8,113 chunks (20%) in 30.0 s (55.0 chunks/s), about 117 s left``."""
    rate = done / seconds if seconds > 0 else 0.0
    of = f" of {total:,}" if total else ""
    share = f" ({done / total:.0%})" if total else ""
    left = f", about {(total - done) / rate:,.0f} s left" if total and rate > 0 and done < total else ""
    return f"{desc}: {done:,}{of} {unit}{share} in {seconds:.1f} s ({rate:,.1f} {unit}/s){left}"


def summary_line(desc: str, done: int, unit: str, seconds: float) -> str:
    """``desc: 8,113 chunks in 61.2 s (132.6 chunks/s)``."""
    rate = f" ({done / seconds:,.1f} {unit}/s)" if seconds > 0 and done else ""
    return f"{desc}: {done:,} {unit} in {seconds:.1f} s{rate}"


@contextlib.contextmanager
def tracker(desc: str | None, total: int | None = None, unit: str = "items") -> Iterator[Progress]:
    """A :class:`Progress` for loops that advance by more than one unit per step."""
    bar = Progress(desc, total, unit)
    try:
        yield bar
    finally:
        bar.close()


def blocks(total: int, size: int, desc: str | None, unit: str = "items") -> Iterator[slice]:
    """Slices of ``range(total)``, ``size`` at a time, each counted by its length once its block is done."""
    if size < 1:
        raise ValueError(f"block size must be >= 1, got {size}")
    with tracker(desc, total, unit) as bar:
        for start in range(0, total, size):
            rows = slice(start, min(start + size, total))
            yield rows
            bar.update(rows.stop - rows.start)


def progress(items: Iterable[T], desc: str | None, total: int | None = None, unit: str = "items") -> Iterator[T]:
    """Yield ``items``, one unit each, with a bar or a closing summary line (see the module)."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    with tracker(desc, total, unit) as bar:
        for item in items:
            yield item
            bar.update()
