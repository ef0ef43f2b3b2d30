"""Scale benchmark: every pipeline stage at 10k, 100k and 1M chunks, wall time and peak memory.

Corpora. Each is the 109 pages of data/pydocs/v3 verbatim (so the v3 queries and judgments
stay valid and `score` runs as it does in the pipeline) plus synthetic documents drawn from one
seeded stream: a document takes the length (characters) and title of a random v3 page and is
filled with random v3 paragraphs (blank-line separated); in each paragraph one word of four or
more letters is renamed everywhere to ``word_N`` with N Zipf-distributed, so texts are distinct
and the vocabulary keeps growing with the corpus as real vocabularies do. The corpora are nested
(a larger one starts with the smaller one's documents), and their size in characters is set from
the characters per c256 chunk measured on the stream's first documents, so they hold about the
requested number of chunks; the chunk counts reported are those the `chunk` stage made.

Stages. The real stage scripts (stages/*.py), one subprocess each, in a temporary project folder
whose params.yaml is composed by `releval params` from conf/ with the grid reduced to one static
model (wordllama: no transformer pass, so encoding does not hide the rest), BM25 and one fusion
(rrf) over c256. Each stage's wall time and peak resident memory (its own ``ru_maxrss``, from
``wait4``) are recorded; a stage running past ``--stage-timeout`` is killed and reported.

MiniLM. MiniLM's encode time for the same chunks is extrapolated linearly from its chunks/s on a
seeded sample of ``--minilm-sample`` chunks of the first corpus (the encode stage itself, the
encoding loop's rate as it records it, torch threads pinned to ``--minilm-threads``).

Goal, at the largest size run: all non-encoding stages together take at most 10% of MiniLM's
extrapolated encode time for the same chunks, and no stage's peak RSS exceeds 8 GB (8,000 MB).
Each stage's growth exponent is the least-squares slope of log(seconds) on log(chunks).

Writes benchmarks/results/scale.json and scale.md (with the machine: cores, CPU model, RAM).

    python benchmarks/bench_scale.py [--sizes 10000,100000,1000000] [--keep DIR] [--seed 0]
        [--stage-timeout 1200] [--minilm-sample 2000] [--minilm-threads N]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterator

import numpy as np
import polars as pl
import yaml

from releval import io, paths
from releval.inputs.corpus import read_corpus
from releval.measurement.operations import describe_machine
from releval.retrieval.chunking import chunk_documents, load_tokenizer
from releval.retrieval.models import resolve_folder

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
SIZES = (10_000, 100_000, 1_000_000)
CHUNKING, MODEL, FUSION = "c256", "wordllama", "rrf"
MINILM, MINILM_SAMPLE = "minilm", "minilm_sample"
ENCODING_STAGES = ("encode",)  # what the goal compares against MiniLM's encoding
GOAL_SHARE, GOAL_RSS_MB = 0.10, 8_000
SUPERLINEAR = 1.15  # a growth exponent above this is reported as superlinear
CALIBRATION_DOCS = 500
RENAME_ZIPF = 1.3  # exponent of the renamed words' suffix distribution
MIN_RENAMED_LETTERS = 4
OVERRIDES = (
    f"grid.models=[{MODEL}]",
    f"grid.chunkings=[{CHUNKING}]",
    f"grid.fusions=[{FUSION}]",
    "grid.reranked={}",
    "~grid.fused.splade_minilm",
    f"grid.baseline={MODEL}/{CHUNKING}",
    "dataset.corpus.path=corpus.jsonl",
)


@dataclass(frozen=True)
class Stage:
    name: str
    argv: tuple[str, ...]
    needs: tuple[str, ...] = ()


PIPELINE = (
    Stage("ingest", ("ingest.py",)),
    Stage("queries", ("queries.py",)),
    Stage("judgments", ("judgments.py",), ("ingest", "queries")),
    Stage("model", ("model.py", "--name", MODEL)),
    Stage("chunk", ("chunk.py", "--chunking", CHUNKING), ("ingest",)),
    Stage("encode", ("encode.py", "--model", MODEL, "--chunking", CHUNKING), ("chunk", "model")),
    Stage("index", ("index.py", "--model", MODEL, "--chunking", CHUNKING), ("encode",)),
    Stage("bm25", ("bm25.py", "--chunking", CHUNKING), ("chunk", "queries")),
    Stage("retrieve", ("retrieve.py", "--model", MODEL, "--chunking", CHUNKING), ("index", "queries")),
    Stage("fuse", ("fuse.py", "--fusion", FUSION, "--model", MODEL, "--chunking", CHUNKING), ("retrieve", "bm25")),
    Stage("score", ("score.py",), ("fuse", "judgments")),
)


@dataclass
class StageRun:
    stage: str
    status: str  # ok | failed | timeout (killed by the benchmark) | killed (from outside) | skipped
    seconds: float | None = None
    peak_rss_mb: float | None = None
    load_1min: float | None = None  # the machine's 1-minute load average when the stage ended
    note: str = ""
    measured: str = ""  # when and at which revision the figures were taken ("" for a stage not run)
    reused: bool = False  # figures of an earlier run of this project (--resume), not measured now


@dataclass
class SizeRun:
    requested_chunks: int
    date: str = ""
    revision: str = ""
    documents: int = 0
    characters: int = 0
    chunks: int | None = None
    stages: list[StageRun] = field(default_factory=list)
    figures: dict = field(default_factory=dict)


# --------------------------------------------------------------------------- corpora


@dataclass(frozen=True)
class Source:
    """What synthetic documents are drawn from: the v3 pages' paragraphs, titles and lengths."""

    paragraphs: list[str]
    renamable: list[list[tuple[str, list[int]]]]  # per paragraph: its words of MIN_RENAMED_LETTERS+ letters, where
    titles: list[str]
    lengths: np.ndarray


def read_source(docs: pl.DataFrame) -> Source:
    texts = docs["text"].to_list()
    paragraphs = [p for text in texts for p in re.split(r"\n\s*\n", text) if p.strip()]
    renamable = [word_positions(p) for p in paragraphs]
    lengths = np.array([len(t) for t in texts], dtype=np.int64)
    return Source(paragraphs, renamable, docs["title"].to_list(), lengths)


def word_positions(paragraph: str) -> list[tuple[str, list[int]]]:
    """Each distinct word of MIN_RENAMED_LETTERS+ letters and its start offsets, in sorted word order."""
    found: dict[str, list[int]] = {}
    for match in re.finditer(rf"\b[A-Za-z]{{{MIN_RENAMED_LETTERS},}}\b", paragraph):
        found.setdefault(match.group(0), []).append(match.start())
    return sorted(found.items())


def synthetic_documents(source: Source, seed: int) -> Iterator[dict]:
    """An endless, seeded stream of documents (see the module docstring)."""
    rng = np.random.default_rng(seed)
    mean_paragraph = np.mean([len(p) for p in source.paragraphs])
    for number in range(10**9):
        page = int(rng.integers(len(source.lengths)))
        target = int(source.lengths[page])
        draws = int(target / mean_paragraph * 2) + 4
        picks = rng.integers(len(source.paragraphs), size=draws)
        word_picks = rng.random(draws)
        suffixes = rng.zipf(RENAME_ZIPF, size=draws) % 1_000_000
        parts, length = [], 0
        for pick, word_pick, suffix in zip(picks, word_picks, suffixes):
            parts.append(renamed(source.paragraphs[pick], source.renamable[pick], word_pick, int(suffix)))
            length += len(parts[-1]) + 2
            if length >= target:
                break
        yield {"_id": f"synthetic:{number:07d}", "title": source.titles[page], "text": "\n\n".join(parts)}


def renamed(paragraph: str, words: list[tuple[str, list[int]]], pick: float, suffix: int) -> str:
    """``paragraph`` with every occurrence of one of its ``words`` (chosen by ``pick`` in [0, 1)) as word_suffix."""
    if not words:
        return paragraph
    word, starts = words[int(pick * len(words))]
    pieces, previous = [], 0
    for start in starts:
        pieces += [paragraph[previous:start], f"{word}_{suffix}"]
        previous = start + len(word)
    return "".join(pieces) + paragraph[previous:]


def chars_per_chunk(docs: list[dict], tokenizer, size: int, overlap: int) -> float:
    frame = pl.DataFrame({"doc_id": [d["_id"] for d in docs], "title": [d["title"] for d in docs]})
    frame = frame.with_columns(pl.Series("text", [d["text"] for d in docs]))
    chunks = chunk_documents(frame, tokenizer, size, overlap)
    return sum(len(d["text"]) for d in docs) / chunks.height


def corpus_inputs(seed: int) -> tuple[list[dict], Source, float]:
    """The v3 pages, what synthetic pages are drawn from, and the stream's characters per c256 chunk
    (measured on its first CALIBRATION_DOCS documents)."""
    docs = read_corpus(ROOT / paths.PYDOCS_V3_CORPUS, "jsonl")
    originals = [{"_id": d, "title": t, "text": x} for d, t, x in docs.select("doc_id", "title", "text").iter_rows()]
    source = read_source(docs)
    chunking = yaml.safe_load((ROOT / paths.CONF / "chunking" / f"{CHUNKING}.yaml").read_text())
    tokenizer = load_tokenizer(resolve_folder(chunking["tokenizer"]))
    stream = synthetic_documents(source, seed)
    calibration = [next(stream) for _ in range(CALIBRATION_DOCS)]
    return originals, source, chars_per_chunk(calibration, tokenizer, chunking["tokens"], chunking["overlap"])


def write_corpus(path: Path, originals: list[dict], stream: Iterator[dict], chars: int) -> tuple[int, int]:
    """The originals, then documents of ``stream`` until ``chars`` characters in all: (documents, characters)."""
    written, total = 0, 0
    with open(path, "w", encoding="utf-8") as out:
        for doc in originals:
            out.write(json.dumps(doc, ensure_ascii=False) + "\n")
            written, total = written + 1, total + len(doc["text"])
        while total < chars:
            doc = next(stream)
            out.write(json.dumps(doc, ensure_ascii=False) + "\n")
            written, total = written + 1, total + len(doc["text"])
    return written, total


# --------------------------------------------------------------------------- running stages


def prepare_project(folder: Path, originals: list[dict], source: Source, seed: int, chars: float) -> tuple[int, int]:
    """The corpus and the project around it, unless an earlier (interrupted) run left them: (documents, characters)."""
    written = folder / "corpus.json"
    if written.exists():
        corpus = json.loads(written.read_text())
        return corpus["documents"], corpus["characters"]
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    stream = synthetic_documents(source, seed)  # restarted at every size: the corpora are nested
    documents, characters = write_corpus(folder / "corpus.jsonl", originals, stream, chars)
    make_project(folder)
    io.write_json(written, {"documents": documents, "characters": characters})
    return documents, characters


def make_project(folder: Path) -> None:
    """conf/, the v3 queries and the judgments (with their rubric), and a composed params.yaml."""
    shutil.copytree(ROOT / paths.CONF, folder / paths.CONF, ignore=shutil.ignore_patterns("recorded.yaml"))
    (folder / paths.PYDOCS_V3).mkdir(parents=True)
    shutil.copy(ROOT / paths.PYDOCS_V3_QUERIES, folder / paths.PYDOCS_V3_QUERIES)
    judgments = Path(paths.DATA) / "judgments"
    shutil.copytree(ROOT / judgments / "v3", folder / judgments / "v3")
    shutil.copy(ROOT / judgments / "RUBRIC.md", folder / judgments / "RUBRIC.md")
    subprocess.run(
        [sys.executable, "-m", "releval.cli", "params", *OVERRIDES],
        cwd=folder,
        check=True,
        stdout=subprocess.DEVNULL,
    )


# A small launcher between this process and each stage: a child's ru_maxrss starts from the
# memory of the process it was forked from (Linux keeps the high-water mark across exec), so a
# stage forked from here would report at least this process's size. Forked from the launcher (a
# bare interpreter, ~10 MB), the stage's own peak is what RUSAGE_CHILDREN reports.
LAUNCHER = """
import ctypes, json, os, resource, signal, subprocess, sys, time
out, timeout, command = sys.argv[1], float(sys.argv[2]), sys.argv[3:]

def die_with_parent():  # Linux PR_SET_PDEATHSIG: the stage ends with the benchmark that started it
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)

die_with_parent()
start = time.perf_counter()
process = subprocess.Popen(command, preexec_fn=die_with_parent)
try:
    code, timed_out = process.wait(timeout), False
except subprocess.TimeoutExpired:
    process.kill()
    code, timed_out = process.wait(), True
seconds = time.perf_counter() - start
maxrss_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
with open(out, "w") as fh:
    json.dump({"code": code, "timed_out": timed_out, "seconds": seconds, "maxrss_kib": maxrss_kib,
               "load_1min": os.getloadavg()[0]}, fh)
"""


def run_stage(
    name: str, argv: list[str], cwd: Path, timeout: float, env: dict | None = None, resume: bool = False
) -> StageRun:
    """One stage script in its own process (through LAUNCHER): wall seconds and its own peak RSS.

    ``resume``: a stage that already ran to completion in ``cwd`` (an interrupted benchmark) is not
    run again; its recorded figures are used.
    """
    logs = cwd / "logs"
    logs.mkdir(exist_ok=True)
    usage_file = logs / f"{name}.usage.json"
    if resume and usage_file.exists() and json.loads(usage_file.read_text())["code"] == 0:
        return stage_run(name, json.loads(usage_file.read_text()), logs, timeout, reused=True)
    usage_file.unlink(missing_ok=True)
    measured = f"{time.strftime('%Y-%m-%d %H:%M')} at {git_revision()}"
    command = [sys.executable, "-I", "-S", "-c", LAUNCHER, str(usage_file), str(timeout), sys.executable, *argv]
    with open(logs / f"{name}.log", "w") as out:
        subprocess.run(command, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=env, check=False)
    if not usage_file.exists():  # the launcher itself was killed, from outside
        return StageRun(name, "killed", None, None, round(os.getloadavg()[0], 2), "killed from outside the benchmark")
    usage = {**json.loads(usage_file.read_text()), "measured": measured}
    usage_file.write_text(json.dumps(usage))
    return stage_run(name, usage, logs, timeout)


def stage_run(name: str, usage: dict, logs: Path, timeout: float, reused: bool = False) -> StageRun:
    seconds, peak_mb = round(usage["seconds"], 2), round(usage["maxrss_kib"] * 1024 / 1e6, 1)
    load = round(usage["load_1min"], 2)
    measured = usage.get("measured", "an earlier run (date not recorded)")
    if usage["timed_out"]:
        return StageRun(name, "timeout", seconds, peak_mb, load, f"killed after {timeout:.0f} s", measured, reused)
    status = "ok" if usage["code"] == 0 else "failed"
    return StageRun(name, status, seconds, peak_mb, load, last_line(logs / f"{name}.log"), measured, reused)


def forget_stages(project: Path, names: list[str]) -> None:
    """``--rerun``: the named stages' recorded figures are dropped so that a resumed run measures
    them again; an encode measured again starts from an empty embedding store, as in a fresh run."""
    for name in names:
        (project / "logs" / f"{name}.usage.json").unlink(missing_ok=True)
    if "encode" in names:
        shutil.rmtree(project / paths.EMBEDDING_STORE, ignore_errors=True)


def last_line(log: Path) -> str:
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def stage_script(project: Path, script: str) -> str:
    """A byte-identical copy of stages/<script>, numbered (``steps/03.py``): command lines that name
    no stage, so that a ``pkill -f`` aimed at the pipeline's own processes (``stages/encode.py``)
    by anyone else on a shared machine cannot hit the benchmark's."""
    scripts = sorted({stage.argv[0] for stage in PIPELINE})
    copy = project / "steps" / f"{scripts.index(script):02d}.py"
    copy.parent.mkdir(exist_ok=True)
    shutil.copyfile(ROOT / "stages" / script, copy)
    return str(copy)


def run_pipeline(project: Path, timeout: float, resume: bool) -> list[StageRun]:
    done: dict[str, str] = {}
    results = []
    for stage in PIPELINE:
        missing = [need for need in stage.needs if done.get(need) != "ok"]
        if missing:
            result = StageRun(stage.name, "skipped", note=f"needs {', '.join(missing)}")
        else:
            script = stage_script(project, stage.argv[0])
            result = run_stage(stage.name, [script, *stage.argv[1:]], project, timeout, resume=resume)
        done[stage.name] = result.status
        results.append(result)
        print(f"  {stage.name:<10} {describe(result)}", flush=True)
    return results


def describe(result: StageRun) -> str:
    if result.seconds is None:
        return f"{result.status} ({result.note})"
    return (
        f"{result.status:<7} {result.seconds:9.1f} s {result.peak_rss_mb:9.0f} MB  load {result.load_1min:4.1f}  "
        f"{result.note}"
    )


def stage_figures(project: Path) -> dict:
    """What the stages recorded about themselves: chunks, index and run figures."""
    work = project / paths.WORK
    figures: dict = {}
    readers = {
        "chunks": (work / "chunks" / f"{CHUNKING}.json", lambda d: {"chunks": d["chunks"], "tokens": d["tokens"]}),
        "encode": (
            work / "emb" / MODEL / CHUNKING / "encode.json",
            lambda d: {k: d[k] for k in ("wall_s", "chunks_per_s")},
        ),
        "index": (
            work / "index" / MODEL / CHUNKING / "index.json",
            lambda d: {k: d.get(k) for k in ("searched_exactly", "build_s", "index_bytes")},
        ),
        "bm25": (work / "runs" / "bm25" / CHUNKING / "run.json", lambda d: d["ops"]),
        "dense": (work / "runs" / "model" / MODEL / CHUNKING / "run.json", lambda d: d["ops"]),
    }
    for name, (path, pick) in readers.items():
        if path.exists():
            figures[name] = pick(json.loads(path.read_text()))
    return figures


def measure_minilm(project: Path, sample: int, threads: int, seed: int, timeout: float, resume: bool) -> dict:
    """MiniLM's chunks/s: the encode stage on a seeded sample of the project's c256 chunks."""
    chunks_dir = project / paths.CHUNKS
    chunks = pl.read_parquet(chunks_dir / f"{CHUNKING}.parquet")
    rows = np.sort(np.random.default_rng(seed).choice(chunks.height, min(sample, chunks.height), replace=False))
    io.write_parquet(chunks_dir / f"{MINILM_SAMPLE}.parquet", chunks[rows])
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    model_argv = [stage_script(project, "model.py"), "--name", MINILM]
    model = run_stage("minilm-model", model_argv, project, timeout, resume=resume)
    encode_argv = [stage_script(project, "encode.py"), "--model", MINILM, "--chunking", MINILM_SAMPLE]
    encode = run_stage("minilm-encode", encode_argv, project, timeout, env, resume=resume)
    if model.status != "ok" or encode.status != "ok":
        raise SystemExit(f"MiniLM sample failed: {model.note or encode.note}")
    stats = json.loads((project / paths.EMBEDDINGS / MINILM / MINILM_SAMPLE / "encode.json").read_text())
    return {
        "sample_chunks": stats["chunks"],
        "threads": threads,
        "load_1min": encode.load_1min,
        "chunks_per_s": stats["chunks_per_s"],
        "stage_seconds": encode.seconds,
        "stage_peak_rss_mb": encode.peak_rss_mb,
        "token_length_p95": stats["token_length_p95"],
    }


# --------------------------------------------------------------------------- analysis


def growth_exponents(runs: list[dict]) -> dict[str, float | None]:
    """Per stage, the least-squares slope of log(seconds) on log(chunks) over the sizes it ran at."""
    exponents = {}
    for stage in [s.name for s in PIPELINE]:
        points = [
            (math.log(r["chunks"]), math.log(s["seconds"]))
            for r in runs
            for s in r["stages"]
            if s["stage"] == stage and s["status"] == "ok" and r["chunks"] and s["seconds"]
        ]
        if len({x for x, _ in points}) < 2:
            exponents[stage] = None
            continue
        x, y = np.array(points).T
        exponents[stage] = round(float(np.polyfit(x, y, 1)[0]), 3)
    return exponents


def goal_check(run: dict, minilm: dict) -> dict:
    """At one size: non-encoding stages against MiniLM's extrapolated encode time, and peak RSS per stage."""
    chunks = run["chunks"] or run["requested_chunks"]
    minilm_s = chunks / minilm["chunks_per_s"]
    measured = [s for s in run["stages"] if s["seconds"] is not None]
    non_encoding = sum(s["seconds"] for s in measured if s["stage"] not in ENCODING_STAGES)
    over_rss = [s["stage"] for s in measured if s["peak_rss_mb"] > GOAL_RSS_MB]
    unfinished = [f"{s['stage']} ({s['status']})" for s in run["stages"] if s["status"] != "ok"]
    share = non_encoding / minilm_s
    return {
        "chunks": chunks,
        "minilm_encode_s_extrapolated": round(minilm_s, 1),
        "non_encoding_s": round(non_encoding, 1),
        "share_of_minilm": round(share, 4),
        "time_goal_met": share <= GOAL_SHARE and not unfinished,
        "stages_over_rss": over_rss,
        "rss_goal_met": not over_rss and not unfinished,
        "unfinished_stages": unfinished,
    }


def machine_facts() -> dict:
    facts = describe_machine()
    facts.pop("torch_threads", None)
    meminfo = Path("/proc/meminfo").read_text() if Path("/proc/meminfo").exists() else ""
    total_kib = re.search(r"MemTotal:\s+(\d+) kB", meminfo)
    facts["ram_gb"] = round(int(total_kib.group(1)) * 1024 / 1e9, 1) if total_kib else None
    return facts


def git_revision() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head.stdout.strip() + (" (uncommitted changes)" if dirty.stdout.strip() else "")


def markdown(document: dict) -> str:
    runs = document["runs"]
    header = ["stage", *[f"{r['chunks'] or r['requested_chunks']:,} chunks" for r in runs], "growth exponent"]
    lines = [
        "# Scale benchmark",
        "",
        f"{document['corpus']}",
        "",
        f"Written {document['date']} at {document['revision']} on {machine_line(document['machine'])}"
        + "; each size's date and revision are in scale.json.",
        "Cells: wall seconds / peak RSS MB of the stage's own process (MB = 10^6 bytes). The machine is "
        "shared: each stage's 1-minute load average is in scale.json.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for stage in [s.name for s in PIPELINE]:
        cells = [cell(next(s for s in r["stages"] if s["stage"] == stage)) for r in runs]
        exponent = document["growth_exponents"].get(stage)
        lines.append(f"| {stage} | " + " | ".join(cells) + f" | {'' if exponent is None else exponent} |")
    documents = " | ".join(f"{r['documents']:,} docs, {r['characters'] / 1e6:,.0f}M chars" for r in runs)
    lines += [f"| corpus | {documents} | |", ""]
    reused_groups: dict[str, list[str]] = {}
    for r in runs:
        for s in r["stages"]:
            if s.get("reused"):
                reused_groups.setdefault(f"at {r['requested_chunks']:,} chunks, measured {s['measured']}", []).append(
                    s["stage"]
                )
    reused = [f"{', '.join(names)} {when}" for when, names in reused_groups.items()]
    if reused:
        lines += [
            "\\* from an earlier run of the same size's project (`--resume`), not measured again: " + "; ".join(reused),
            "",
        ]
    lines += [
        "Growth exponent: least-squares slope of log(seconds) on log(chunks) over the sizes run; each stage's "
        "start-up (interpreter, imports: 1-3 s) is in its time, which flattens the exponents of stages that do "
        "little. " + index_note(runs),
        "",
    ]
    minilm = document["minilm"]
    lines += [
        f"MiniLM (all-MiniLM-L6-v2): {minilm['chunks_per_s']} chunks/s (the encode stage's loop) on a seeded sample "
        f"of {minilm['sample_chunks']:,} chunks of the {minilm['corpus_chunks']:,}-chunk corpus, torch on "
        f"{minilm['threads']} thread(s), the faster of {len(minilm['measurements'])} measurement(s) "
        f"({', '.join(str(m['chunks_per_s']) for m in minilm['measurements'])} chunks/s); its encode time at "
        "each size is extrapolated linearly from that rate.",
        "",
        "## Goal at the largest size",
        "",
    ]
    goal = document["goal"]
    lines += [
        f"- {goal['chunks']:,} chunks: non-encoding stages {goal['non_encoding_s']:,} s; MiniLM's encoding "
        f"(extrapolated) {goal['minilm_encode_s_extrapolated']:,} s; share {goal['share_of_minilm']:.1%} "
        f"(goal <= {GOAL_SHARE:.0%}): **{'met' if goal['time_goal_met'] else 'not met'}**",
        f"- peak RSS <= {GOAL_RSS_MB:,} MB per stage: **{'met' if goal['rss_goal_met'] else 'not met'}**"
        + (f" (over: {', '.join(goal['stages_over_rss'])})" if goal["stages_over_rss"] else ""),
    ]
    if goal["unfinished_stages"]:
        lines.append(f"- unfinished: {', '.join(goal['unfinished_stages'])}")
    superlinear = [f"{s} ({e})" for s, e in document["growth_exponents"].items() if e is not None and e > SUPERLINEAR]
    lines.append(f"- superlinear growth (exponent > {SUPERLINEAR}): {', '.join(superlinear) or 'none'}")
    return "\n".join(lines) + "\n"


def index_note(runs: list[dict]) -> str:
    """The index stage builds nothing where the vectors are searched exactly (retriever.index.exact_below)."""
    exact = [f"{r['chunks']:,}" for r in runs if r["figures"].get("index", {}).get("searched_exactly")]
    if not exact:
        return ""
    return (
        f"At {', '.join(exact)} chunks the index stage builds nothing (searched exactly below "
        "retriever.index.exact_below), so its exponent spans the switch to an HNSW build."
    )


def cell(stage: dict) -> str:
    if stage["seconds"] is None:
        return stage["status"]
    text = f"{stage['seconds']:,.1f} s / {stage['peak_rss_mb']:,.0f} MB" + ("\\*" if stage.get("reused") else "")
    return text if stage["status"] == "ok" else f"{stage['status']}: {text}"


def machine_line(machine: dict) -> str:
    return f"{machine['cpu']}, {machine['usable_cores']} usable cores, {machine['ram_gb']} GB RAM"


# --------------------------------------------------------------------------- main


def corpus_description(seed: int, per_chunk: float) -> str:
    return (
        f"Corpora: the 109 pages of {paths.PYDOCS_V3} verbatim plus synthetic documents (seed {seed}): each a "
        "random v3 page's length and title, filled with random v3 paragraphs, one word of "
        f"{MIN_RENAMED_LETTERS}+ letters per paragraph renamed to word_N (N ~ Zipf({RENAME_ZIPF})); "
        f"sized at {per_chunk:,.0f} characters per c256 chunk (measured on the stream's first "
        f"{CALIBRATION_DOCS} documents). Pipeline: the stage scripts, grid {MODEL} + bm25 + {FUSION} on "
        f"{CHUNKING}, the {paths.PYDOCS_V3} queries (dev split) and judgments v3."
    )


def parse_sizes(text: str) -> list[int]:
    sizes = sorted({int(part.replace("_", "")) for part in text.split(",") if part.strip()})
    if not sizes or sizes[0] < 1_000:
        raise SystemExit("--sizes: chunk counts of at least 1000, comma-separated")
    return sizes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="chunk counts, comma-separated")
    parser.add_argument("--keep", type=Path, help="keep each size's project folder under DIR/<size>")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stage-timeout", type=float, default=1200.0, help="seconds before a stage is killed")
    parser.add_argument("--minilm-sample", type=int, default=2000)
    parser.add_argument("--minilm-threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for scale.json and scale.md")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="with --keep: go on with an interrupted run in DIR/<size>, reusing the stages that completed",
    )
    parser.add_argument(
        "--rerun",
        default="",
        help="with --resume: stages (comma-separated, e.g. encode) to measure again; the others keep their figures",
    )
    parser.add_argument(
        "--merge",
        action="store_true",
        help="keep the sizes not run now (and their MiniLM measurements) from the --out folder's scale.json",
    )
    args = parser.parse_args(argv)
    if args.resume and args.keep is None:
        parser.error("--resume needs --keep")
    rerun = [name.strip() for name in args.rerun.split(",") if name.strip()]
    known = {stage.name for stage in PIPELINE} | {"minilm-model", "minilm-encode"}
    if rerun and not args.resume:
        parser.error("--rerun needs --resume")
    if set(rerun) - known:
        parser.error(f"--rerun: unknown stage(s) {sorted(set(rerun) - known)}; stages: {sorted(known)}")
    sizes = parse_sizes(args.sizes)

    originals, source, per_chunk = corpus_inputs(args.seed)
    description = corpus_description(args.seed, per_chunk)
    print(description, flush=True)

    runs, minilm_samples = [], []
    for size in sizes:
        run = SizeRun(size, time.strftime("%Y-%m-%d %H:%M"), git_revision())
        with project_folder(args.keep, size, args.resume) as project:
            run.documents, run.characters = prepare_project(project, originals, source, args.seed, per_chunk * size)
            forget_stages(project, rerun)
            print(f"\n{size:,} chunks requested: {run.documents:,} docs, {run.characters:,} characters", flush=True)
            run.stages = run_pipeline(project, args.stage_timeout, args.resume)
            run.figures = stage_figures(project)
            run.chunks = run.figures.get("chunks", {}).get("chunks")
            if run.chunks and (not minilm_samples or size == sizes[-1]):
                sample = measure_minilm(
                    project, args.minilm_sample, args.minilm_threads, args.seed, args.stage_timeout, args.resume
                )
                minilm_samples.append({"corpus_chunks": run.chunks, **sample})
                print(f"  MiniLM: {sample['chunks_per_s']} chunks/s on {sample['sample_chunks']} chunks", flush=True)
        runs.append(asdict(run))

    if args.merge:
        earlier_runs, earlier_samples = earlier_results(args.out / "scale.json", sizes, args.seed, per_chunk)
        runs = sorted(runs + earlier_runs, key=lambda r: r["requested_chunks"])
        # A resumed MiniLM sample is one already in the earlier file: counted once.
        minilm_samples = earlier_samples + [m for m in minilm_samples if m not in earlier_samples]
    if not minilm_samples:
        raise SystemExit("no corpus was chunked: nothing to compare with MiniLM")
    # The faster measurement: the machine is shared, and a slower MiniLM would flatter the goal.
    minilm = {**max(minilm_samples, key=lambda m: m["chunks_per_s"]), "measurements": minilm_samples}
    document = {
        "benchmark": "bench_scale",
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "revision": git_revision(),
        "machine": machine_facts(),
        "corpus": description,
        "seed": args.seed,
        "chars_per_chunk": round(per_chunk, 1),
        "stage_timeout_s": args.stage_timeout,
        "runs": runs,
        "growth_exponents": growth_exponents(runs),
        "minilm": minilm,
        "minilm_extrapolation": "linear: chunks / (MiniLM chunks/s on the sample)",
        "goal": goal_check(runs[-1], minilm),
        "goal_terms": {"max_share_of_minilm_encode": GOAL_SHARE, "max_peak_rss_mb": GOAL_RSS_MB},
    }
    io.write_json(args.out / "scale.json", document)
    io.write_text(args.out / "scale.md", markdown(document))
    print("\n" + markdown(document))
    print(f"wrote {args.out / 'scale.json'} and {args.out / 'scale.md'}")
    return 0


def earlier_results(path: Path, sizes: list[int], seed: int, per_chunk: float) -> tuple[list[dict], list[dict]]:
    """(runs of other sizes, MiniLM measurements) of an earlier scale.json over the same corpora."""
    if not path.exists():
        return [], []
    earlier = json.loads(path.read_text())
    if earlier.get("seed") != seed or earlier.get("chars_per_chunk") != round(per_chunk, 1):
        raise SystemExit(f"--merge: {path} was measured on other corpora (seed or characters per chunk differ)")
    runs = [r for r in earlier["runs"] if r["requested_chunks"] not in sizes]
    return runs, earlier["minilm"]["measurements"]


@contextlib.contextmanager
def project_folder(keep: Path | None, size: int, resume: bool) -> Iterator[Path]:
    """A fresh project folder: DIR/<size> under ``--keep`` (left in place; kept as it is with
    ``resume``), else a temporary one."""
    if keep is None:
        with tempfile.TemporaryDirectory(prefix=f"releval-scale-{size}-") as tmp:
            yield Path(tmp)
        return
    folder = keep.resolve() / str(size)
    if folder.exists() and not resume:
        shutil.rmtree(folder)
    folder.mkdir(parents=True, exist_ok=True)
    yield folder


if __name__ == "__main__":
    raise SystemExit(main())
