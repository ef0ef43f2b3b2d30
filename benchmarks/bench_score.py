"""`releval score` end to end against pytrec_eval, each as the process a user runs, on the same TREC files.

5,000 queries x 1,000 retrieved documents (bench_metrics' seeded collection) written as a TREC run and
TREC qrels. releval: the `releval` console command (`releval score --qrels Q --run R --trec-eval-compat
--metrics ...`): start, read and validate both files, evaluate 6 metrics under trec_eval's conventions,
print the JSON. pytrec_eval: a Python process that imports it, parses both files with its own TREC parsers
(`parse_qrel`, `parse_run`), evaluates the same measures and prints their means. Both read the files from
the page cache (one warm-up run each first), then alternate for ROUNDS rounds; the figure is each
command's median, and the ratio is pytrec_eval's median over releval's (each round's own ratio is shown
too: on a shared machine the rounds spread). The means are checked to agree. Speed is reported here and
never asserted in tests.

Writes benchmarks/results/score.md and score.json (with the machine, its load and the revision).
Run: ``python benchmarks/bench_score.py [--rounds N] [--keep DIR] [--no-write]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
ROUNDS = 7

PYTREC_EVAL_SCRIPT = """
import json, sys
import numpy as np
import pytrec_eval
measures, names = json.loads(sys.argv[3]), json.loads(sys.argv[4])
with open(sys.argv[1]) as fh:
    qrels = pytrec_eval.parse_qrel(fh)
with open(sys.argv[2]) as fh:
    run = pytrec_eval.parse_run(fh)
per_query = pytrec_eval.RelevanceEvaluator(qrels, set(measures)).evaluate(run)
print(json.dumps({name: float(np.mean([values[name] for values in per_query.values()])) for name in names}))
"""


def write_files(directory: Path) -> tuple[Path, Path]:
    from bench_metrics import build_collection
    from releval.inputs.trec import write_trec_run

    qrels, run = build_collection()
    run_path, qrels_path = directory / "run.trec", directory / "qrels.trec"
    write_trec_run(run_path, run, tag="bench")
    qrels_path.write_text("".join(f"{q} 0 {d} {g}\n" for q, d, g in qrels.iter_rows()))
    return run_path, qrels_path


def commands(run_path: Path, qrels_path: Path) -> dict[str, list[str]]:
    from bench_metrics import PYTREC_EVAL_MEASURES, PYTREC_EVAL_NAMES, RELEVAL_METRICS

    releval = shutil.which("releval", path=str(Path(sys.executable).parent)) or shutil.which("releval")
    if releval is None:
        sys.exit("bench_score: no `releval` command on PATH or beside this Python (make setup installs it)")
    return {
        "releval": [
            releval,
            "score",
            "--qrels",
            str(qrels_path),
            "--run",
            str(run_path),
            "--trec-eval-compat",
            "--metrics",
            ",".join(RELEVAL_METRICS),
        ],
        "pytrec_eval": [
            sys.executable,
            "-c",
            PYTREC_EVAL_SCRIPT,
            str(qrels_path),
            str(run_path),
            json.dumps(sorted(PYTREC_EVAL_MEASURES)),
            json.dumps(PYTREC_EVAL_NAMES),
        ],
    }


def timed(command: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode:
        sys.exit(f"bench_score: {command[0]} exited {done.returncode}: {done.stderr.strip()[-500:]}")
    return seconds, done.stdout


def revision() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True, text=True
        )
    except (OSError, subprocess.CalledProcessError):
        return "(no git)"
    return head.stdout.strip() + (" (uncommitted changes)" if dirty.stdout.strip() else "")


def machine() -> dict:
    from releval.measurement.operations import describe_machine

    facts = describe_machine()
    for key in ("torch_threads", "device", "load_1min"):
        facts.pop(key, None)
    return facts


def load() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def measure(rounds: int, directory: Path) -> dict:
    from bench_metrics import PYTREC_EVAL_NAMES, RELEVAL_METRICS

    run_path, qrels_path = write_files(directory)
    argv = commands(run_path, qrels_path)
    seconds: dict[str, list[float]] = {name: [] for name in argv}
    outputs = {name: timed(command)[1] for name, command in argv.items()}  # warm-up: files into the page cache
    loads = [load()]
    for round_ in range(rounds):
        for name in argv if round_ % 2 == 0 else reversed(argv):
            elapsed, outputs[name] = timed(argv[name])
            seconds[name].append(elapsed)
        loads.append(load())
    ours, theirs = json.loads(outputs["releval"])["mean"], json.loads(outputs["pytrec_eval"])
    gap = max(abs(ours[name] - theirs[other]) for name, other in zip(RELEVAL_METRICS, PYTREC_EVAL_NAMES))
    median = {name: statistics.median(values) for name, values in seconds.items()}
    ratios = [p / r for p, r in zip(seconds["pytrec_eval"], seconds["releval"])]
    return {
        "date": datetime.now().strftime("%Y-%m-%d %H:%M"),
        "revision": revision(),
        "machine": machine(),
        "load_1min": [value for value in loads if value is not None],
        "case": {
            "queries": len({line.split(" ", 1)[0] for line in qrels_path.read_text().splitlines()}),
            "run_lines": sum(1 for _ in open(run_path, "rb")),
            "run_mb": round(run_path.stat().st_size / 1e6, 1),
            "qrels_lines": sum(1 for _ in open(qrels_path, "rb")),
            "metrics": RELEVAL_METRICS,
        },
        "commands": {
            "releval": " ".join(["releval", *argv["releval"][1:]]).replace(str(directory) + "/", ""),
            "pytrec_eval": "python -c '<parse_qrel, parse_run, evaluate, means>' qrels.trec run.trec",
        },
        "rounds": rounds,
        "seconds": seconds,
        "median_s": median,
        "ratio": median["pytrec_eval"] / median["releval"],
        "round_ratios": ratios,
        "largest_mean_difference": gap,
    }


def markdown(result: dict) -> str:
    case, median, machine_ = result["case"], result["median_s"], result["machine"]
    ratios = result["round_ratios"]
    return "\n".join(
        [
            "# `releval score` against pytrec_eval, end to end",
            "",
            f"Written {result['date']} at {result['revision']} by `python benchmarks/bench_score.py`, on "
            f"{machine_['cpu']} ({machine_['usable_cores']} usable cores, a shared machine: 1-minute load "
            f"{min(result['load_1min']):.1f}-{max(result['load_1min']):.1f} during the rounds).",
            "",
            f"Case: {case['queries']:,} queries, a TREC run of {case['run_lines']:,} lines ({case['run_mb']} MB) "
            f"and TREC qrels of {case['qrels_lines']:,} lines (bench_metrics' seeded collection); metrics "
            f"{', '.join(case['metrics'])} under trec_eval's conventions. Each command is a process that reads "
            f"both files (page cache warm); {result['rounds']} alternating rounds after one warm-up run each.",
            "",
            "| command | median s | rounds (s) |",
            "|---|---:|---|",
            *(
                f"| {name}: `{result['commands'][name]}` | {median[name]:.2f} | "
                f"{', '.join(f'{s:.2f}' for s in result['seconds'][name])} |"
                for name in ("releval", "pytrec_eval")
            ),
            "",
            f"**Ratio: {result['ratio']:.2f}x** (pytrec_eval's median over releval's; per round "
            f"{min(ratios):.2f}x-{max(ratios):.2f}x). Largest difference between the two tools' means: "
            f"{result['largest_mean_difference']:.1e}.",
            "",
        ]
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--keep", type=Path, help="write the case's files here and keep them")
    parser.add_argument("--no-write", action="store_true", help="print only; leave benchmarks/results/ alone")
    args = parser.parse_args(argv)
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        result = measure(args.rounds, args.keep)
    else:
        with tempfile.TemporaryDirectory(prefix="releval-bench-score-") as tmp:
            result = measure(args.rounds, Path(tmp))
    report(result, markdown(result), "score", write=not args.no_write)


def report(result: dict, text: str, stem: str, write: bool) -> None:
    """Print a benchmark's Markdown and, with ``write``, keep it and its figures as benchmarks/results/STEM.md/.json."""
    print(text)
    if write:
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / f"{stem}.json").write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
        (RESULTS / f"{stem}.md").write_text(text)
        print(f"wrote {RESULTS / stem}.md and {stem}.json")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
