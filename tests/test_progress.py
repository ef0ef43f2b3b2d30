"""Progress you can watch: a tqdm bar on a terminal, one summary line per loop elsewhere, nothing when off.

The stages' progress goes to stderr only; stdout keeps their report lines. Showing it never changes
a result: the index stage saves the graph built without progress, byte for byte, and the BM25
stage's blocks of queries give the run of one call over all of them.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import yaml

from releval import io, progress
from releval.retrieval import runs
from releval.retrieval.bm25 import BM25Index, TokenizerConfig, tokenize
from releval.retrieval.dense import IndexConfig, build_index, search
from releval.retrieval.vectors import DENSE_FILE
from support import ROOT

SUMMARY = r"{desc}: {done} {unit} in \d+\.\d s( \([\d,]+\.\d {unit}/s\))?"


def summary_pattern(desc: str, done: str, unit: str) -> re.Pattern:
    return re.compile(SUMMARY.format(desc=re.escape(desc), done=re.escape(done), unit=re.escape(unit)))


def test_the_summary_line_names_the_loop_count_time_and_rate():
    assert progress.summary_line("encode minilm/c256", 8113, "chunks", 61.2) == (
        "encode minilm/c256: 8,113 chunks in 61.2 s (132.6 chunks/s)"
    )
    assert progress.summary_line("pool", 0, "runs", 2.0) == "pool: 0 runs in 2.0 s"  # no rate of nothing
    assert progress.summary_line("bm25 c256", 12, "chunks", 0.0) == "bm25 c256: 12 chunks in 0.0 s"


def test_off_the_terminal_each_loop_prints_one_line_to_stderr(monkeypatch, capsys):
    monkeypatch.delenv(progress.ENVIRONMENT, raising=False)
    assert progress.mode() == "line"  # captured stderr is no terminal
    assert list(progress.progress(range(5), "retrieve m/c", unit="queries")) == [0, 1, 2, 3, 4]
    with progress.tracker("index m/c", 300, "vectors") as bar:
        bar.update(100)
        bar.update(200)
    assert list(progress.blocks(10, 4, "bm25 c search", "queries")) == [slice(0, 4), slice(4, 8), slice(8, 10)]
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 3 and err.endswith("\n")
    assert summary_pattern("retrieve m/c", "5", "queries").fullmatch(lines[0]), lines[0]
    assert summary_pattern("index m/c", "300", "vectors").fullmatch(lines[1]), lines[1]
    assert summary_pattern("bm25 c search", "10", "queries").fullmatch(lines[2]), lines[2]


def test_a_long_loop_off_the_terminal_says_where_it_is_while_running(monkeypatch, capsys):
    """Issue 27, seam 15: a 22-minute encode wrote nothing to a log that is not a terminal until it ended."""
    monkeypatch.delenv(progress.ENVIRONMENT, raising=False)
    monkeypatch.setattr(progress, "LINE_EVERY_SECONDS", 0.0)
    with progress.tracker("encode m/c", 300, "chunks") as bar:
        bar.update(100)
        bar.update(200)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 3
    assert re.fullmatch(
        r"encode m/c: 100 of 300 chunks \(33%\) in \d+\.\d s \([\d,]+\.\d chunks/s\), about [\d,]+ s left", lines[0]
    )
    assert re.fullmatch(r"encode m/c: 300 of 300 chunks \(100%\) in \d+\.\d s \([\d,]+\.\d chunks/s\)", lines[1])
    assert summary_pattern("encode m/c", "300", "chunks").fullmatch(lines[2])
    assert progress.running_line("pool", 5, None, "runs", 2.0) == "pool: 5 runs in 2.0 s (2.5 runs/s)"


def test_a_loop_left_early_still_prints_its_one_line_with_what_was_done(monkeypatch, capsys):
    monkeypatch.setenv(progress.ENVIRONMENT, "line")
    for item in progress.progress(range(10), "pool", unit="runs"):
        if item == 2:
            break
    with pytest.raises(RuntimeError), progress.tracker("rerank r", 5, "pairs") as bar:
        bar.update(4)
        raise RuntimeError("interrupted")
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2
    assert summary_pattern("pool", "2", "runs").fullmatch(lines[0]), lines
    assert summary_pattern("rerank r", "4", "pairs").fullmatch(lines[1]), lines


@pytest.mark.parametrize("how", ["off", "no desc"])
def test_off_or_without_a_name_nothing_is_printed(how, monkeypatch, capsys):
    monkeypatch.setenv(progress.ENVIRONMENT, "off" if how == "off" else "line")
    desc = "bm25 c256" if how == "off" else None
    assert sum(progress.progress(range(4), desc, unit="chunks")) == 6
    with progress.tracker(desc, 3, "vectors") as bar:
        bar.update(3)
    assert bar.done == 3  # still counted
    assert [r.stop for r in progress.blocks(5, 2, desc)] == [2, 4, 5]
    assert capsys.readouterr() == ("", "")


def test_bar_mode_draws_a_tqdm_bar_with_the_rate_on_stderr(monkeypatch, capsys):
    monkeypatch.setenv(progress.ENVIRONMENT, "bar")
    assert progress.mode() == "bar"
    assert list(progress.progress(range(7), "retrieve m/c", unit="queries")) == list(range(7))
    out, err = capsys.readouterr()
    assert out == ""
    assert "retrieve m/c" in err and "7/7" in err and "queries/s" in err and "100%" in err
    assert not summary_pattern("retrieve m/c", "7", "queries").search(err)  # the bar, not the summary line


def test_an_unknown_setting_falls_back_to_the_terminal_rule(monkeypatch):
    monkeypatch.setenv(progress.ENVIRONMENT, "loud")
    assert progress.mode() == "line"
    monkeypatch.setenv(progress.ENVIRONMENT, " OFF ")
    assert progress.mode() == "off"


def test_blocks_refuse_an_empty_block_size():
    with pytest.raises(ValueError, match="block size"):
        list(progress.blocks(3, 0, "x"))


# --------------------------------------------------------------------------- the library's loops


def test_the_index_build_counts_every_vector_and_builds_the_same_graph(monkeypatch, capsys):
    monkeypatch.setenv(progress.ENVIRONMENT, "line")
    vectors = np.random.default_rng(3).normal(size=(1500, 16)).astype(np.float32)
    config = IndexConfig(exact=False)
    watched = bytes(build_index(vectors, config, desc="index m/c").save())
    unwatched = bytes(build_index(vectors, config).save())
    assert watched == unwatched
    (line,) = capsys.readouterr().err.splitlines()
    assert summary_pattern("index m/c", "1,500", "vectors").fullmatch(line), line


def test_hnsw_search_gives_k_columns_for_one_query_so_blocks_stack():
    """usearch answers one query with its hits only: fewer than k where the graph reaches fewer."""
    vectors = np.random.default_rng(4).normal(size=(200, 8)).astype(np.float32)
    queries = np.random.default_rng(5).normal(size=(3, 8)).astype(np.float32)
    config = IndexConfig(exact=False, connectivity=2, expansion_search=4)  # a sparse graph: not every vector found
    index = build_index(vectors, config)
    k = len(vectors)
    assert len(index.search(queries[2], k).keys) < k
    whole = search(index, vectors, queries, k, config)
    parts = [search(index, vectors, queries[rows], k, config) for rows in (slice(0, 2), slice(2, 3))]
    assert parts[1][0].shape == (1, k)
    np.testing.assert_array_equal(np.concatenate([p for p, _ in parts]), whole[0])
    np.testing.assert_array_equal(np.concatenate([s for _, s in parts]), whole[1])


# --------------------------------------------------------------------------- real stage runs


def run_stage(script: str, args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, progress.ENVIRONMENT: "line", "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(
        [sys.executable, str(ROOT / "stages" / script), *args], cwd=cwd, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    return result


WORDS = "wing flutter boundary layer heat transfer shock wave lift drag slipstream vortex".split()


def test_the_bm25_stage_prints_its_summary_lines_and_the_run_of_one_call(tmp_path):
    rng = np.random.default_rng(6)
    texts = [" ".join(rng.choice(WORDS, size=12)) for _ in range(40)]
    chunks = pl.DataFrame(
        {"chunk_id": [f"d{i}#0-12" for i in range(40)], "doc_id": [f"d{i}" for i in range(40)], "text": texts}
    )
    n_queries = 130  # three blocks of queries
    query_texts = [" ".join(rng.choice(WORDS, size=3)) for _ in range(n_queries)]
    queries = pl.DataFrame({"query_id": [f"q{i}" for i in range(n_queries)], "text": query_texts})
    io.write_parquet(tmp_path / "chunks" / "c.parquet", chunks)
    io.write_parquet(tmp_path / "queries.parquet", queries)
    tokenizer = {"lowercase": True, "pattern": r"\w+", "stopwords": "none", "min_token_length": 1}
    bm25 = {"k1": 1.5, "b": 0.75, "epsilon": 0.25, "top_k": 5, "tokenizer": tokenizer}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"retriever": {"bm25": bm25}}))
    result = run_stage(
        "bm25.py",
        ["--chunking", "c", "--queries", "queries.parquet", "--chunks-dir", "chunks", "--out-root", "out"],
        tmp_path,
    )
    assert result.stdout == f"bm25 bm25/c: 40 chunks, {n_queries} queries\n"
    lines = result.stderr.splitlines()
    assert len(lines) == 2, result.stderr
    assert summary_pattern("bm25 c", "40", "chunks").fullmatch(lines[0]), lines
    assert summary_pattern("bm25 c search", str(n_queries), "queries").fullmatch(lines[1]), lines

    index = BM25Index.build([tokenize(t, TokenizerConfig()) for t in texts])
    positions, scores = index.top_k([tokenize(t, TokenizerConfig()) for t in queries["text"]], 5)
    expected = runs.from_arrays(queries["query_id"].to_list(), np.where(scores > 0, positions, -1), scores, chunks)
    got, _ = runs.read_run(tmp_path / "out" / "c")
    assert got.equals(expected)


def test_the_index_stage_prints_its_summary_line_and_saves_the_unwatched_graph(tmp_path):
    vectors = np.random.default_rng(7).normal(size=(600, 12)).astype(np.float32)
    emb = tmp_path / "emb" / "m" / "c"
    io.write_npy(emb / DENSE_FILE, vectors)
    io.write_json(emb / "encode.json", {"family": "dense"})
    index_params = {"exact": False, "build_threads": 1}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"retriever": {"index": index_params}}))
    result = run_stage(
        "index.py", ["--model", "m", "--chunking", "c", "--emb-root", "emb", "--out-root", "index"], tmp_path
    )
    assert result.stdout.startswith("index m/c: 600 vectors, ")
    (line,) = result.stderr.splitlines()
    assert summary_pattern("index m/c", "600", "vectors").fullmatch(line), line
    saved = (tmp_path / "index" / "m" / "c" / "index.usearch").read_bytes()
    assert saved == bytes(build_index(vectors, IndexConfig(**index_params)).save())
