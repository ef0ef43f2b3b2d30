"""The incremental benchmark's pure parts: the grid edit it makes to conf/, and what it reads from DVC's log."""

from __future__ import annotations

import sys

import yaml

from support import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_incremental  # noqa: E402

# Lines as the encode stage and DVC print them (RELEVAL_PROGRESS=line).
LOG = """\
Running stage 'chunk@c256':
> python stages/chunk.py --chunking c256
Running stage 'encode@minilm-c256':
> python stages/encode.py --model minilm --chunking c256
encode minilm/c256: 1 chunks in 0.1 s (11.4 chunks/s)
encode minilm/c256 (dense): 20043 chunks, 1 encoded now, 20042 from the store; 16.14 chunks/s, truncated 0.0% of chunks
Running stage 'encode@wordllama-c256':
encode wordllama/c256: 2,020 chunks in 1.8 s (1,127.1 chunks/s)
encode wordllama/c256 (static): 22,064 chunks, 2,020 encoded now, 20,044 from the store; 1127.04 chunks/s
encode minilm/c256 queries: 85 queries in 3.5 s (24.3 queries/s)
"""


def test_the_benchmark_grid_is_composed_with_the_documented_overrides(tmp_path) -> None:
    """The grid edit is the documented one (the reranker and the named fusion dropped by overrides), and it
    composes on the real conf/: its models, one chunking, one fusion, nothing reranked or fused by name."""
    import shutil

    from releval.composition import compose

    shutil.copytree(ROOT / "conf", tmp_path / "conf", ignore=shutil.ignore_patterns("recorded.yaml"))
    compose(tmp_path / "conf", tmp_path / "params.yaml", bench_incremental.overrides(["minilm", "wordllama"])[:-1])
    grid = yaml.safe_load((tmp_path / "params.yaml").read_text(encoding="utf-8"))["grid"]
    assert (grid["models"], grid["chunkings"], grid["reranked"], grid["fused"]) == (
        ["minilm", "wordllama"],
        [bench_incremental.CHUNKING],
        {},
        {},
    )


def test_the_log_gives_each_encode_cell_and_the_stages_run() -> None:
    assert bench_incremental.ran_stages(LOG) == ["chunk@c256", "encode@minilm-c256", "encode@wordllama-c256"]
    assert bench_incremental.encode_cells(LOG) == {
        "minilm/c256": {"chunks": 20043, "encoded": 1, "reused": 20042, "loop_seconds": 0.1},
        "wordllama/c256": {"chunks": 22064, "encoded": 2020, "reused": 20044, "loop_seconds": 1.8},
    }
