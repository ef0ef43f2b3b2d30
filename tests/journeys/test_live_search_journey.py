"""J9 (a live search endpoint beside the grid), in one fresh clone, each step the block of
docs/how-to/external-run.md its id names (`make test-journeys`): the conf block written as
conf/external/search.yaml, then the commands block run as written, against a BM25 search service
(tests/support/search_server.py) on the port the doc names, which wants the key the doc's header
takes from SEARCH_API_KEY.

The grid is shrunk to BM25 over c256 first (not a doc step), so the journey's cost is the setup.
"""

from __future__ import annotations

import gzip
import json

import polars as pl
import pytest
import yaml

from support.doc_blocks import step
from support.journey import Shell, fresh_clone, newcomer_environment
from support.search_server import SearchServer

KEY = "journey-key-not-for-files"


@pytest.fixture(scope="module")
def shell(tmp_path_factory) -> Shell:
    root = tmp_path_factory.mktemp("live")
    clone = fresh_clone(root / "releval")
    user = Shell(clone, root / "logs", {**newcomer_environment(), "SEARCH_API_KEY": KEY})
    user.run_text("setup", "make setup && source .venv/bin/activate", timeout=3600)  # the README's install
    user.run_text(
        "small-grid",
        "releval params 'grid.chunkings=[c256]' 'grid.models=[]' 'grid.fusions=[]' 'grid.fused={}' "
        "'grid.reranked={}' grid.baseline=bm25/c256",
        timeout=600,
    )
    return user


def corpus(shell: Shell) -> dict[str, str]:
    """The project's corpus as the default config ingests it (id -> title and text)."""
    params = yaml.safe_load((shell.cwd / "params.yaml").read_text())
    path = shell.cwd / params["dataset"]["corpus"]["path"]
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return {r["_id"]: f"{r.get('title', '')} {r['text']}" for r in map(json.loads, fh) if r}


def test_a_live_endpoint_is_snapshotted_for_the_dev_queries_and_scored_beside_the_grid(shell):
    conf = step("external/live-conf")
    url = yaml.safe_load(conf.text)["endpoint"]["url"]
    (shell.cwd / "conf" / "external" / "search.yaml").write_text(conf.text)
    port = int(url.split(":")[2].split("/")[0])
    with SearchServer(corpus(shell), token=KEY, port=port) as server:
        ran = shell.run("external/live-score", timeout=3600)
    assert "a snapshot of a live system" in ran.output
    assert "external/search" in ran.output
    queries = pl.read_parquet(shell.cwd / "data" / "work" / "queries.parquet")
    dev = set(queries.filter(pl.col("split") == "dev")["query_id"])
    assert set(server.received_ids()) == dev
    meta = json.loads((shell.cwd / "data" / "work" / "runs" / "external" / "search" / "run.json").read_text())
    assert meta["external"]["endpoint"]["url"] == url and meta["external"]["endpoint"]["queries_sent"] == len(dev)
    for path in [shell.cwd / "params.yaml", shell.cwd / "dvc.lock", *(shell.cwd / "data" / "work").rglob("*")]:
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
