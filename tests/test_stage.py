"""What users see from a stage: releval's own warnings, each once as a WARNING: line; no
third-party warning, raw Python warning or library log chatter."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import warnings

import pytest

from releval.inputs.corpus import EmptyTextWarning
from releval.stage import RelevalWarning, routed_warnings, warn
from support import ROOT


def emit_twice(message: str, category: type[Warning]) -> None:
    for _ in range(2):
        warnings.warn(message, category, stacklevel=1)


def test_own_warnings_print_once_through_warn_and_others_are_dropped(monkeypatch, capsys):
    monkeypatch.setattr(sys, "warnoptions", [])
    with routed_warnings():
        emit_twice("corpus.jsonl: 1 documents with an empty text kept: d (line 1)", EmptyTextWarning)
        warnings.warn("a library's deprecation", DeprecationWarning)
        warnings.warn("a library's advice", UserWarning)
        emit_twice("invalid value encountered in cast", RuntimeWarning)
        logging.getLogger("transformers.tokenization_utils").warning("Token indices sequence length is longer")
        logging.getLogger("sentence_transformers").warning("No sentence-transformers model found")
        warn("said directly")
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "WARNING: corpus.jsonl: 1 documents with an empty text kept: d (line 1)",
        "WARNING: said directly",
    ]
    assert issubclass(EmptyTextWarning, RelevalWarning)
    # Outside, the caller's warning settings are back.
    with pytest.warns(UserWarning):
        warnings.warn("seen again", UserWarning)


def test_python_asked_for_warnings_shows_them():
    code = "\n".join(
        [
            "import warnings",
            "from releval.stage import routed_warnings",
            "with routed_warnings():",
            "    warnings.warn('advice')",
        ]
    )
    shown = subprocess.run([sys.executable, "-W", "default", "-c", code], capture_output=True, text=True, check=True)
    assert "UserWarning: advice" in shown.stderr
    quiet = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert quiet.stderr == ""


def test_the_ingest_stage_warns_about_empty_texts_in_one_line(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"_id": "a", "text": ""}) + "\n" + json.dumps({"_id": "b", "text": "lift"}) + "\n")
    params = {"dataset": {"corpus": {"path": str(corpus), "format": "jsonl"}, "subset": {"docs": None}}}
    (tmp_path / "params.yaml").write_text(json.dumps(params))
    result = subprocess.run(
        [sys.executable, str(ROOT / "stages" / "ingest.py"), "--out", str(tmp_path / "docs.parquet")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stderr.splitlines() == [f"WARNING: {corpus}: 1 documents with an empty text kept: a (line 1)"]
    assert result.stdout.startswith("ingest: 2 documents")


def test_a_stage_run_by_a_python_without_the_environment_says_activate_it():
    """Issue 27, seam 3: `.venv/bin/dvc repro` without activation ran `python` (the system's) and every stage
    failed with "No module named 'polars'". `-S` leaves site-packages out, as a Python without them would."""
    import subprocess
    import sys

    from support import ROOT

    done = subprocess.run([sys.executable, "-S", "stages/ingest.py"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert "lacks releval's dependencies (no module 'polars'): activate the project's environment" in done.stderr
