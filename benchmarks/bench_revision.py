"""What `dvc repro` costs after a judgment revision, on this checkout's grid, stage by stage.

The revision is made the documented way, as processes: one new pair of the first query graded 2
(a document its judgments do not hold) goes into a filled pool file, `releval pool --import F --into
data/judgments/<NEW> --parent <ACTIVE SET>` makes it a new version, and `releval params
judgments.version=<NEW> judgments.path=data/judgments/<NEW>` makes it active. Then one timed
`dvc repro` (the revision), and, to leave the checkout as it was, `releval params --reset` (the
override forgotten), the new version's folder removed, and a second timed `dvc repro` (back to the
active set: a revision too). The checkout's `git status` must be what it was
before, machine figures aside (reports/ops.json, ops.md and their hashes in dvc.lock), else the
benchmark says which files moved.

Needs the pipeline's outputs in place and up to date (`make repro` first; `dvc status` clean).
The revision's judgments stage always runs (the pair's note holds the time, so DVC's run cache
has never seen the set); going back, DVC restores it from its run cache, as it does for a user who
returns to a set. Each stage's seconds are the time between DVC's "Running stage" lines (the last
runs to the end, so it holds DVC's closing bookkeeping; a stage DVC skips or restores counts in the
one before it); DVC's own start and the checks before the first stage are "before the first stage".

Writes benchmarks/results/revision.md and revision.json (the machine, its load, the revision).
Run: ``python benchmarks/bench_revision.py [--no-write]``.
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_score  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
NEW_VERSION = "bench-revision"
ANNOTATOR = "bench-revision"
MACHINE_FIGURES = {"reports/ops.json", "reports/ops.md", "dvc.lock"}  # dvc.lock: the hashes of those two


def tool(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if found is None:
        sys.exit(f"bench_revision: no `{name}` beside this Python or on PATH (make setup installs it)")
    return found


def call(*command: str) -> str:
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"bench_revision: {' '.join(command)} exited {done.returncode}: {done.stderr.strip()[-800:]}")
    return done.stdout


def timed_repro() -> dict:
    """One `dvc repro`, its wall seconds and the seconds of each stage it ran."""
    start = time.perf_counter()
    process = subprocess.Popen(
        [tool("dvc"), "repro"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    marks: list[tuple[str, float]] = []
    lines = []
    for line in process.stdout:
        lines.append(line)
        if line.startswith("Running stage '"):
            marks.append((line.split("'")[1], time.perf_counter() - start))
    process.wait()
    wall = time.perf_counter() - start
    if process.returncode:
        sys.exit(f"bench_revision: dvc repro exited {process.returncode}:\n{''.join(lines[-30:])}")
    stages = {
        name: round((marks[i + 1][1] if i + 1 < len(marks) else wall) - at, 2) for i, (name, at) in enumerate(marks)
    }
    return {
        "wall_s": round(wall, 2),
        "before_first_stage_s": round(marks[0][1] if marks else wall, 2),
        "stages": stages,
    }


def git_status() -> list[str]:
    return call("git", "status", "--porcelain").splitlines()


def new_pair(params: dict) -> dict:
    """The first query of the active set and the first document (corpus order) it has no judgment of."""
    import polars as pl

    from releval.judging.judgments import active_set_path, load_version

    judgments = load_version(active_set_path(params)).judgments
    query_id = judgments["query_id"].min()
    judged = set(judgments.filter(pl.col("query_id") == query_id)["doc_id"])
    docs = pl.read_parquet(ROOT / "data" / "work" / "docs.parquet", columns=["doc_id"])["doc_id"]
    doc_id = next(doc for doc in docs if doc not in judged)
    return {"query_id": query_id, "doc_id": doc_id, "grade": 2}


def measure(scratch: Path) -> dict:
    from releval.config import load_params

    if call(tool("dvc"), "status", "--quiet").strip():
        sys.exit("bench_revision: the pipeline is not up to date; run `make repro` first")
    before = git_status()
    params = load_params(str(ROOT / "params.yaml"))
    active = params["judgments"]["path"]
    pair = new_pair(params)
    filled = scratch / "filled.csv"
    with open(filled, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["query_id", "doc_id", "grade", "annotator", "notes"])
        # A note of this moment makes the set new to DVC: its run cache would otherwise restore the judgments
        # stage of an earlier benchmark instead of running it, as it must for a user's revision.
        writer.writerow(
            [pair["query_id"], pair["doc_id"], pair["grade"], ANNOTATOR, f"bench {datetime.now().isoformat()}"]
        )
    into = Path("data") / "judgments" / NEW_VERSION
    if (ROOT / into).exists():
        sys.exit(f"bench_revision: {into} exists; remove it first")
    releval = tool("releval")
    try:
        call(releval, "pool", "--import", str(filled), "--into", str(into), "--parent", active)
        call(releval, "params", f"judgments.version={NEW_VERSION}", f"judgments.path={into.as_posix()}")
        revision = timed_repro()
    finally:
        call(releval, "params", "--reset")
        shutil.rmtree(ROOT / into, ignore_errors=True)  # else the card of the run back calls the checkout dirty
    back = timed_repro()
    moved = sorted({line for line in set(git_status()) ^ set(before) if line[3:] not in MACHINE_FIGURES})
    if moved:
        sys.exit(f"bench_revision: the checkout did not come back as it was: {moved[:10]}")
    return {
        "date": datetime.now().strftime("%Y-%m-%d %H:%M"),
        "revision": bench_score.revision(),
        "machine": bench_score.machine(),
        "load_1min": round(os.getloadavg()[0], 2),
        "grid": {key: params["grid"].get(key) for key in ("models", "chunkings", "fusions")}
        | {
            "fused": sorted(params["grid"].get("fused") or {}),
            "reranked": sorted(params["grid"].get("reranked") or {}),
        },
        "pair": pair,
        "active_set": active,
        "runs": {"revision": revision, "back": back},
    }


def markdown(result: dict) -> str:
    runs, grid, pair = result["runs"], result["grid"], result["pair"]
    revision, back = runs["revision"], runs["back"]
    names = list(dict.fromkeys([*revision["stages"], *back["stages"]]))
    listed = {
        key: ", ".join(grid[key] or []) or "none" for key in ("models", "chunkings", "fusions", "fused", "reranked")
    }
    return "\n".join(
        [
            "# A judgment revision, then `dvc repro`",
            "",
            f"Written {result['date']} at {result['revision']} by `python benchmarks/bench_revision.py`, on "
            f"{result['machine']['cpu']} ({result['machine']['usable_cores']} usable cores, a shared machine: "
            f"1-minute load {result['load_1min']} at the end).",
            "",
            f"Grid: this checkout's ({listed['models']} on {listed['chunkings']}, with BM25, fusions "
            f"{listed['fusions']}, fused {listed['fused']}, reranked {listed['reranked']}). Revision: "
            f"{result['active_set']} plus one pair ({pair['query_id']}, {pair['doc_id']}) graded {pair['grade']}, "
            "imported with `releval pool --import --parent`, made active with `releval params`; back: `releval "
            "params --reset` and `dvc repro` again.",
            "",
            "| stage | revision s | back s |",
            "|---|---:|---:|",
            f"| before the first stage | {revision['before_first_stage_s']:.2f} | {back['before_first_stage_s']:.2f} |",
            *(
                f"| {name} | {revision['stages'].get(name, 0):.2f} | {back['stages'].get(name, 0):.2f} |"
                for name in names
            ),
            f"| **`dvc repro` in all** | **{revision['wall_s']:.2f}** | **{back['wall_s']:.2f}** |",
            "",
        ]
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-write", action="store_true", help="print only; leave benchmarks/results/ alone")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="releval-bench-revision-") as tmp:
        result = measure(Path(tmp))
    bench_score.report(result, markdown(result), "revision", write=not args.no_write)


if __name__ == "__main__":
    main()
