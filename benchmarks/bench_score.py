"""`releval score` end to end against pytrec_eval, both reading the same TREC files.

5,000 queries x 1,000 retrieved documents (bench_metrics' seeded collection) written as a TREC
run and TREC qrels. releval: the `releval score` command in-process (read both files, validate
every line, evaluate 6 metrics under trec_eval's conventions, print). pytrec_eval: its own
TREC parsers (`pytrec_eval.parse_run`/`parse_qrel`) and evaluator on the same files. Both warm
(the files are in the page cache after a first read); the minimum of three runs each. Speed is
reported here and never asserted in tests.

Run: ``python benchmarks/bench_score.py``.
"""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from bench_metrics import PYTREC_EVAL_MEASURES, PYTREC_EVAL_NAMES, RELEVAL_METRICS, build_collection

REPEATS = 3


def write_files(directory: Path) -> tuple[Path, Path]:
    from releval.inputs.trec import write_trec_run

    qrels, run = build_collection()
    run_path, qrels_path = directory / "run.trec", directory / "qrels.trec"
    write_trec_run(run_path, run, tag="bench")
    qrels_path.write_text("".join(f"{q} 0 {d} {g}\n" for q, d, g in qrels.iter_rows()))
    return run_path, qrels_path


def releval_score(run_path: Path, qrels_path: Path) -> str:
    from releval.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(
            [
                "score",
                "--qrels",
                str(qrels_path),
                "--run",
                str(run_path),
                "--trec-eval-compat",
                "--metrics",
                ",".join(RELEVAL_METRICS),
            ]
        )
    assert code == 0
    return out.getvalue()


def pytrec_eval_score(run_path: Path, qrels_path: Path) -> dict[str, float]:
    import pytrec_eval

    with open(qrels_path) as fh:
        qrels = pytrec_eval.parse_qrel(fh)
    with open(run_path) as fh:
        run = pytrec_eval.parse_run(fh)
    per_query = pytrec_eval.RelevanceEvaluator(qrels, PYTREC_EVAL_MEASURES).evaluate(run)
    return {name: float(np.mean([values[name] for values in per_query.values()])) for name in PYTREC_EVAL_NAMES}


def best_of(function, *args) -> tuple[float, object]:
    times, result = [], None
    for _ in range(REPEATS):
        start = time.perf_counter()
        result = function(*args)
        times.append(time.perf_counter() - start)
    return min(times), result


def main() -> None:
    from releval.inputs.trec import _read_trec_tokens, RUN_COLUMNS

    with tempfile.TemporaryDirectory(prefix="releval-bench-score-") as tmp:
        run_path, qrels_path = write_files(Path(tmp))
        size_mb = run_path.stat().st_size / 2**20
        pytrec_s, pytrec_means = best_of(pytrec_eval_score, run_path, qrels_path)
        releval_s, printed = best_of(releval_score, run_path, qrels_path)
        tokens_s, _ = best_of(_read_trec_tokens, run_path, RUN_COLUMNS, "score")
        print(f"run file {size_mb:.0f} MB; 5,000 queries x 1,000 documents; metrics {', '.join(RELEVAL_METRICS)}")
        print(f"releval score (read, validate, evaluate, print): {releval_s:.2f} s")
        print(f"pytrec_eval (parse_run, parse_qrel, evaluate):  {pytrec_s:.2f} s")
        print(f"ratio: {pytrec_s / releval_s:.1f}x")
        print(f"(the general token reader alone, used for files that are not plain: {tokens_s:.2f} s)")
        means = json.loads(printed)["mean"]
        gap = max(abs(means[name] - pytrec_means[other]) for name, other in zip(RELEVAL_METRICS, PYTREC_EVAL_NAMES))
        print(
            f"means: releval {', '.join(f'{means[n]:.4f}' for n in RELEVAL_METRICS)}; largest difference "
            f"from pytrec_eval {gap:.1e}"
        )


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
