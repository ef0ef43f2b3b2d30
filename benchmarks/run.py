"""Every benchmark in one run: `make bench` (or python benchmarks/run.py).

Each prints its own figures and ratios against a reference measured in the same run.
Speed is measured here, never asserted in tests.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import time
from pathlib import Path

BENCHMARKS = ["bench_bm25", "bench_metrics", "bench_score", "bench_stats", "bench_encode"]


def main() -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    for name in BENCHMARKS:
        print(f"\n=== {name} ===", flush=True)
        start = time.perf_counter()
        bench = importlib.import_module(name).main
        bench([]) if inspect.signature(bench).parameters else bench()
        print(f"({name}: {time.perf_counter() - start:.1f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
