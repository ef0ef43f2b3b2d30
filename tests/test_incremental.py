"""Corpus edits through a real `dvc repro`: only the changed chunks are encoded, and the cells'
vectors are byte for byte those of a cold encode (an empty embedding store)."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from releval import paths
from support.commands import run
from support.pydocs_mini import make_pydocs_project

CELLS = ("minilm/c256", "wordllama/c256", "splade/c256")
VECTOR_FILES = ("embeddings.npy", "data.npy", "indices.npy", "indptr.npy")


def corpus_path(project: Path) -> Path:
    return project / "data" / "pydocs" / "corpus.jsonl.gz"


def rewrite_corpus(project: Path, edit) -> None:
    with gzip.open(corpus_path(project), "rt", encoding="utf-8") as fh:
        docs = [json.loads(line) for line in fh]
    docs = edit(docs)
    with gzip.GzipFile(corpus_path(project), "wb", mtime=0) as fh:
        fh.write("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs).encode("utf-8"))


def encode_stats(project: Path, cell: str) -> dict:
    return json.loads((project / paths.EMBEDDINGS / cell / "encode.json").read_text())


def vector_bytes(project: Path, cell: str) -> dict[str, bytes]:
    folder = project / paths.EMBEDDINGS / cell
    return {name: (folder / name).read_bytes() for name in VECTOR_FILES if (folder / name).is_file()}


def chunk_texts(project: Path, chunking: str) -> set[str]:
    return set(pl.read_parquet(project / paths.CHUNKS / f"{chunking}.parquet")["text"])


def repro_encodes(project: Path, *flags: str) -> str:
    stages = [f"encode@{cell.replace('/', '-')}" for cell in CELLS]
    return run(["dvc", "repro", *flags, *stages], project).stdout


@pytest.mark.slow
@pytest.mark.heavy  # three encode cells, four times each (a few minutes on 2 cores); make test-heavy
def test_an_edit_encodes_only_the_changed_chunks_and_matches_a_cold_encode(tmp_path):
    project = make_pydocs_project(tmp_path / "edited", "grid.models=[minilm,wordllama,splade]", "grid.chunkings=[c256]")
    run(["git", "add", "-A"], project)
    run(["git", "commit", "-qm", "inputs"], project)
    repro_encodes(project)
    before = chunk_texts(project, "c256")

    def edit(docs):
        docs[0] = {**docs[0], "text": docs[0]["text"] + "\n\nA sentence added this week."}  # one edited document
        docs.append({"_id": "topic:added", "title": "Added", "text": "A new page.\n\n" + docs[1]["text"][:900]})
        return docs

    rewrite_corpus(project, edit)
    out = repro_encodes(project)
    changed = chunk_texts(project, "c256") - before
    assert 2 <= len(changed) < len(before) / 4
    for cell in CELLS:
        stats = encode_stats(project, cell)["store"]
        assert stats["encoded_chunks"] == len(changed), (cell, stats, len(changed))
        assert stats["reused_chunks"] == encode_stats(project, cell)["chunks"] - len(changed)
    assert f"{len(changed)} encoded now" in out
    incremental = {cell: vector_bytes(project, cell) for cell in CELLS}

    # Cold: no store at all, every stage forced; the vectors are the same bytes.
    shutil.rmtree(project / paths.EMBEDDING_STORE)
    repro_encodes(project, "-f", "-s")
    for cell in CELLS:
        assert encode_stats(project, cell)["store"]["reused_chunks"] == 0
        assert vector_bytes(project, cell) == incremental[cell], cell

    # The store reports its size; a gc keeps what the grid's cells use: forced again, nothing is encoded.
    report = run(["releval", "store"], project).stdout
    assert "minilm" in report and "document" in report and "total:" in report
    assert "dropped" in run(["releval", "store", "--gc"], project).stdout
    repro_encodes(project, "-f", "-s")
    for cell in CELLS:
        assert encode_stats(project, cell)["store"]["encoded_chunks"] == 0
        assert vector_bytes(project, cell) == incremental[cell], cell
