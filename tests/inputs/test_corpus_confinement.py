"""A folder corpus reads its own files, never a file elsewhere a symlink points at (issue 27, seam 13).

A folder corpus followed symlinks: a link to a system file outside the project was ingested as a document (and from
there shown on the judging page and sent to a model judge). Now a symlink that resolves outside the corpus folder,
to a file or a folder, is skipped and named in one WARNING line; links inside the folder are read as before. A corpus
*file* the configuration names stays readable wherever it is (the shipped Cranfield dataset reads
``../shared/data/cranfield/...``): the user named it. Each case runs the real stage script, `python stages/ingest.py`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
import yaml

from support import BIN, ROOT

SECRET = "a system file outside the project, never a document"


def ingest(root: Path, corpus: str, fmt: str) -> subprocess.CompletedProcess:
    params = {"dataset": {"corpus": {"path": corpus, "format": fmt}, "subset": {"docs": None, "queries": None}}}
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(
        [sys.executable, str(ROOT / "stages" / "ingest.py"), "--out", "docs.parquet"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )


def folder_project(tmp_path: Path) -> tuple[Path, Path]:
    """project/corpus/ with two documents, a link inside it, and links out of it; the files they reach."""
    root, outside = tmp_path / "project", tmp_path / "system"
    (outside / "etc").mkdir(parents=True)
    (outside / "etc" / "secret.txt").write_text(SECRET, encoding="utf-8")
    (outside / "etc" / "more.md").write_text(f"# {SECRET}\n", encoding="utf-8")
    corpus = root / "corpus"
    (corpus / "guides").mkdir(parents=True)
    (corpus / "a.txt").write_text("first document", encoding="utf-8")
    (corpus / "guides" / "b.md").write_text("# B\nsecond document", encoding="utf-8")
    (corpus / "guides" / "same-as-a.txt").symlink_to("../a.txt")  # inside the folder: read
    (corpus / "passwd.txt").symlink_to(outside / "etc" / "secret.txt")  # absolute link out
    (corpus / "guides" / "relative.txt").symlink_to("../../../system/etc/secret.txt")  # relative link out
    (corpus / "linked").symlink_to(outside / "etc", target_is_directory=True)  # a folder out
    (root / "notes.txt").write_text("in the project, not in the corpus folder", encoding="utf-8")
    (corpus / "project-notes.txt").symlink_to("../notes.txt")  # out of the folder, though inside the project
    return root, outside


@pytest.mark.slow
def test_symlinks_out_of_a_folder_corpus_are_skipped_and_named_in_one_warning(tmp_path):
    root, outside = folder_project(tmp_path)
    result = ingest(root, "corpus", "folder")
    assert result.returncode == 0, result.stderr
    docs = pl.read_parquet(root / "docs.parquet")
    assert docs["doc_id"].to_list() == ["a", "guides/b", "guides/same-as-a"]
    assert not any(SECRET in text for text in docs["text"].to_list())
    warnings = [line for line in result.stderr.splitlines() if line.startswith("WARNING:")]
    assert warnings == [
        "WARNING: corpus: 4 symlink(s) lead out of the corpus folder, skipped (not read): "
        f"guides/relative.txt -> {outside.resolve() / 'etc' / 'secret.txt'}, "
        f"linked -> {outside.resolve() / 'etc'}, "
        f"passwd.txt -> {outside.resolve() / 'etc' / 'secret.txt'}, "
        f"project-notes.txt -> {root.resolve() / 'notes.txt'}"
    ], result.stderr


@pytest.mark.slow
def test_a_corpus_file_named_by_the_configuration_is_read_wherever_it_is(tmp_path):
    """Not confined: the configuration names the file, as conf/dataset/cranfield.yaml names ../shared/data/...;
    the same for a folder the configuration names outside the project, and for a link the configuration names."""
    root = tmp_path / "project"
    root.mkdir()
    shared = tmp_path / "shared"
    (shared / "folder").mkdir(parents=True)
    (shared / "corpus.jsonl").write_text(json.dumps({"_id": "d1", "text": "shared"}) + "\n", encoding="utf-8")
    (shared / "folder" / "x.txt").write_text("in a shared folder", encoding="utf-8")
    (root / "linked.jsonl").symlink_to(shared / "corpus.jsonl")
    for corpus, fmt, ids in (
        ("../shared/corpus.jsonl", "jsonl", ["d1"]),
        ("linked.jsonl", "jsonl", ["d1"]),
        (str(shared / "folder"), "folder", ["x"]),
    ):
        result = ingest(root, corpus, fmt)
        assert result.returncode == 0, result.stderr
        assert "WARNING" not in result.stderr
        assert pl.read_parquet(root / "docs.parquet")["doc_id"].to_list() == ids


@pytest.mark.slow
def test_a_dangling_link_inside_the_folder_is_one_line(tmp_path):
    """A link to a file missing inside the folder was a FileNotFoundError traceback."""
    root, _ = folder_project(tmp_path)
    (root / "corpus" / "gone.txt").symlink_to("missing.txt")
    result = ingest(root, "corpus", "folder")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        "error: corpus/gone.txt: field 'path': cannot read: No such file or directory"
    )
    assert not (root / "docs.parquet").exists()
