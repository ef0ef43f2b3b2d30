"""The judgment-revision loop with the pipeline in two dvc.yaml files, against this checkout's one.

DVC rewrites the whole dvc.lock of a stage's dvc.yaml after every stage it runs (a round-trip YAML
parse and dump). This checkout's lock records every code file of each of its 60-odd stages, so
each of the five stages a judgment revision reruns (params, judgments, rescore, score, report)
pays that rewrite. The trial asks what a second dvc.yaml would save: the evaluation stages
(``EVALUATION``) stay in dvc.yaml, every other stage moves to grid/dvc.yaml (``wdir: ..``,
``vars: [../params.yaml]``, the same commands, deps and outs) with its dvc.lock entries in
grid/dvc.lock, so the evaluation's lock is a sixth of the size.

Two scratch copies of the checkout (outputs and DVC cache included; the checkout itself is not
touched): one as it is, one split. In each, `dvc status` must be clean, then the report stage is
made again once (`dvc repro -s -f report`: its card names the commit a revision would name), then
`benchmarks/bench_revision.py` runs in the two copies alternately, ``--rounds`` times each, the
order swapped every round. Writes benchmarks/results/revision_split.md and .json.

Needs the pipeline's outputs in place and up to date (`make repro` first) and about twice the size
of data/ and .dvc/cache free under the temporary folder.
Run: ``python benchmarks/bench_revision_split.py [--rounds 2] [--no-write]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from datetime import datetime
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_revision  # noqa: E402
import bench_score  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EVALUATION = ("params", "judgments", "archive", "rescore", "score", "report")
GRID = "grid"
LAYOUTS = ("one dvc.yaml", "two dvc.yaml")


def call(command: list[str], cwd: Path) -> str:
    """``command`` in ``cwd`` with this Python's folder first on PATH (the stages' `python`)."""
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, env={**os.environ, "PATH": path})
    if done.returncode:
        sys.exit(f"bench_revision_split: {' '.join(command)} exited {done.returncode}: {done.stderr.strip()[-800:]}")
    return done.stdout


def copy_checkout(into: Path) -> None:
    """The checkout with its git folder, outputs and DVC cache; its virtual environment linked, not copied."""
    into.mkdir(parents=True)
    pack = subprocess.Popen(
        ["tar", "cf", "-", "--exclude=./.venv", "--exclude=./site", "."], cwd=ROOT, stdout=subprocess.PIPE
    )
    subprocess.run(["tar", "xf", "-"], cwd=into, stdin=pack.stdout, check=True)
    if pack.wait():
        sys.exit(f"bench_revision_split: copying {ROOT} failed")
    if (ROOT / ".venv").exists():
        (into / ".venv").symlink_to(ROOT / ".venv")


def split_pipeline(copy: Path) -> None:
    """Every stage but EVALUATION, and its lock entries, into grid/dvc.yaml and grid/dvc.lock."""
    pipeline = yaml.safe_load((copy / "dvc.yaml").read_text(encoding="utf-8"))
    lock = yaml.safe_load((copy / "dvc.lock").read_text(encoding="utf-8"))
    top = {**pipeline, "stages": {}}
    grid: dict = {"vars": ["../params.yaml"], "stages": {}}
    for name, stage in pipeline["stages"].items():
        if name in EVALUATION:
            top["stages"][name] = stage
        elif "do" in stage:  # foreach / matrix: the working folder goes in the template
            grid["stages"][name] = {**stage, "do": {"wdir": "..", **stage["do"]}}
        else:
            grid["stages"][name] = {"wdir": "..", **stage}
    top_lock, grid_lock = {"schema": lock["schema"], "stages": {}}, {"schema": lock["schema"], "stages": {}}
    for name, entry in lock["stages"].items():
        (top_lock if name.split("@")[0] in EVALUATION else grid_lock)["stages"][name] = entry
    (copy / GRID).mkdir()
    for path, data in (
        ("dvc.yaml", top),
        (f"{GRID}/dvc.yaml", grid),
        ("dvc.lock", top_lock),
        (f"{GRID}/dvc.lock", grid_lock),
    ):
        (copy / path).write_text(yaml.safe_dump(data, sort_keys=False, width=4096), encoding="utf-8")


def prepare(copy: Path) -> None:
    dvc = bench_revision.tool("dvc")
    if call([dvc, "status", "--quiet"], copy).strip():
        sys.exit(f"bench_revision_split: the pipeline in {copy} is not up to date; run `make repro` first")
    call([dvc, "repro", "--single-item", "--force", "report"], copy)


def bench(copy: Path) -> dict:
    call([sys.executable, str(copy / "benchmarks" / "bench_revision.py")], copy)
    return json.loads((copy / "benchmarks" / "results" / "revision.json").read_text(encoding="utf-8"))


def lock_bytes(copy: Path) -> dict[str, int]:
    locks = ("dvc.lock", f"{GRID}/dvc.lock")
    return {path: (copy / path).stat().st_size for path in locks if (copy / path).is_file()}


def measure(scratch: Path, rounds: int) -> dict:
    copies = dict(zip(LAYOUTS, (scratch / "one", scratch / "two")))
    for layout, copy in copies.items():
        copy_checkout(copy)
        if layout == LAYOUTS[1]:
            split_pipeline(copy)
        prepare(copy)
    runs = []
    for number in range(rounds):
        for layout in LAYOUTS if number % 2 == 0 else LAYOUTS[::-1]:
            load = round(os.getloadavg()[0], 2)
            found = bench(copies[layout])
            runs.append({"round": number + 1, "layout": layout, "load_1min_before": load, **found["runs"]})
    return {
        "date": datetime.now().strftime("%Y-%m-%d %H:%M"),
        "revision": bench_score.revision(),
        "machine": bench_score.machine(),
        "evaluation_stages": list(EVALUATION),
        "lock_bytes": {layout: lock_bytes(copy) for layout, copy in copies.items()},
        "runs": runs,
    }


def markdown(result: dict) -> str:
    ran = {name for run in result["runs"] for name in run["revision"]["stages"]}
    stages = [name for name in result["evaluation_stages"] if name in ran] + sorted(ran - set(EVALUATION))
    locks = "; ".join(
        f"{layout}: " + ", ".join(f"{path} {size:,} bytes" for path, size in sizes.items())
        for layout, sizes in result["lock_bytes"].items()
    )
    return "\n".join(
        [
            "# A judgment revision with the pipeline in one dvc.yaml or two",
            "",
            f"Written {result['date']} at {result['revision']} by `python benchmarks/bench_revision_split.py`, on "
            f"{result['machine']['cpu']} ({result['machine']['usable_cores']} usable cores, a shared machine).",
            "",
            f"Two copies of the checkout; in the second, every stage but {', '.join(result['evaluation_stages'])} "
            f"moved to {GRID}/dvc.yaml with its lock entries. Lock files: {locks}. Each row is one run of "
            "`benchmarks/bench_revision.py` (a one-pair revision, then back); the layouts alternate.",
            "",
            "Seconds of the revision's `dvc repro`: DVC's start, each stage it ran (the stage's time includes DVC's "
            "bookkeeping after it: the lock rewrite), in all; then the run back to the active set, in all.",
            "",
            "| round | layout | load before | start | " + " | ".join(stages) + " | revision s | back s |",
            "|---:|---|---:|---:|" + "---:|" * len(stages) + "---:|---:|",
            *(
                f"| {run['round']} | {run['layout']} | {run['load_1min_before']} | "
                f"{run['revision']['before_first_stage_s']:.2f} | "
                + " | ".join(f"{run['revision']['stages'].get(name, 0):.2f}" for name in stages)
                + f" | {run['revision']['wall_s']:.2f} | {run['back']['wall_s']:.2f} |"
                for run in result["runs"]
            ),
            "",
        ]
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="runs of each layout (default 2)")
    parser.add_argument("--no-write", action="store_true", help="print only; leave benchmarks/results/ alone")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="releval-bench-split-") as tmp:
        result = measure(Path(tmp), args.rounds)
    bench_score.report(result, markdown(result), "revision_split", write=not args.no_write)


if __name__ == "__main__":
    main()
