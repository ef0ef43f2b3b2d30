"""Bad input that ended in a traceback is one line naming the file, the line and the field (issue 27, seam 14).

Each case goes through a real entry point: `releval validate`, `releval pool --import`, or a DVC stage script
(stages/queries.py, stages/ingest.py) run as `python stages/<script>` would run it. The JSON cases are refused by the
one reader every JSONL record passes through (:func:`releval.inputs.schemas.parse_json_line`); grades out of the
table's range by the same first pass that refuses a float grade; a disk that refuses the write by the atomic writer
(:func:`releval.io.atomic_path`), which leaves the target as it was.

Before (main at 5b0cdf8):
    grade 10**30           polars TypeError: unexpected value while building Series of type Int64
    "\\ud800" in notes      UnicodeEncodeError: 'utf-8' codec can't encode character '\\ud800'
    [[[...]]] 100,000 deep RecursionError: maximum recursion depth exceeded while decoding a JSON array
    disk full in --import  OSError: [Errno 28] No space left on device (a traceback; the set was left as it was)
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import resource
import runpy
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
import yaml

from releval.cli import main as releval_main
from releval.errors import InputError
from releval.judging.judgments import Manifest
from support import BIN, ROOT

SCALE = {0: "not relevant", 1: "partial", 2: "relevant"}
DEEP = "[" * 100_000 + "]" * 100_000


def write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    return path


def judgment(**values) -> str:
    """A judgments.jsonl line; a value given as a string is written verbatim (raw JSON)."""
    fields = {"query_id": '"q1"', "doc_id": '"d1"', "grade": "1", "annotator": '"alice"'}
    fields.update(values)
    return "{" + ", ".join(f'"{key}": {value}' for key, value in fields.items()) + "}"


def make_set(directory: Path, lines: list[str]) -> Path:
    write(directory / "judgments.jsonl", "".join(line + "\n" for line in lines))
    write(directory / "RUBRIC.md", "# Rubric\n")
    digest = hashlib.sha256((directory / "judgments.jsonl").read_bytes()).hexdigest()
    manifest = Manifest(directory.name, None, "2026-11-30", SCALE, "RUBRIC.md", ("alice",), digest)
    write(directory / "manifest.yaml", manifest.to_yaml())
    return directory


def references(root: Path, docs: int = 2) -> list[str]:
    """--queries and --corpus files naming q1..q3 and d1..d<docs>: the ids of every case are checked against them."""
    queries = write(
        root / "refs" / "queries.jsonl",
        "".join(json.dumps({"query_id": f"q{i}", "text": "t", "split": "dev"}) + "\n" for i in range(1, 4)),
    )
    corpus = write(
        root / "refs" / "corpus.jsonl",
        "".join(json.dumps({"_id": f"d{i}", "text": "t"}) + "\n" for i in range(1, docs + 1)),
    )
    return ["--queries", str(queries), "--corpus", str(corpus)]


def snapshot(directory: Path) -> dict[str, bytes]:
    return {p.relative_to(directory).as_posix(): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def releval(argv: list[str], capsys) -> tuple[int, list[str], str]:
    """`releval ARGV` in this process: (exit code, stdout lines, stderr)."""
    capsys.readouterr()
    code = releval_main(argv)
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err


def run_stage(script: str, monkeypatch, capsys) -> tuple[int, str]:
    """A DVC stage script as `python stages/<script>` runs it, in the current directory: (exit code, stderr)."""
    for name in (
        "HF_HUB_OFFLINE",
        "TRANSFORMERS_OFFLINE",
        "HF_HUB_DISABLE_PROGRESS_BARS",
        "TRANSFORMERS_NO_ADVISORY_WARNINGS",
    ):
        monkeypatch.setenv(name, "1")  # entry() sets these; monkeypatch restores them
    monkeypatch.setattr(sys, "argv", [script])
    capsys.readouterr()
    try:
        runpy.run_path(str(ROOT / "stages" / script), run_name="__main__")
    except SystemExit as exc:
        return int(exc.code or 0), capsys.readouterr().err
    return 0, capsys.readouterr().err


def one_error_line(err: str) -> str:
    """The stage's stderr is one line, `error: FILE:LINE: field 'F': ...`; returns it without `error: `."""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0].removeprefix("error: ")


# =========================================================================== grades out of range, checked consistently

# (raw JSON of the grade, what the line says about it). The table's grade is a 64-bit integer; every other number
# is refused by type as 2.0 always was; an integer in range but off the scale by the scale check.
GRADES = [
    (
        "1000000000000000000000000000000",
        "expected an integer grade, found an integer out of range (100000000000…, 31 digits)",
    ),
    ("-1000000000000000000000000000000", "found an integer out of range (-100000000000…, 31 digits)"),
    ("9223372036854775808", "found an integer out of range (922337203685…, 19 digits)"),  # 2**63
    ("9223372036854775807", "grade 9223372036854775807 is not on the scale"),  # 2**63 - 1: in range, off the scale
    ("1e30", "expected an integer grade, found a float (1e+30)"),
    ("1e400", "expected an integer grade, found a float (inf)"),
    ("-0.0", "expected an integer grade, found a float (-0.0)"),
    ("2.5", "expected an integer grade, found a float (2.5)"),
    ("true", "expected an integer grade, found a boolean (true)"),
]


@pytest.mark.parametrize(("grade", "says"), GRADES, ids=[g for g, _ in GRADES])
def test_an_out_of_range_grade_is_one_line_in_releval_validate(tmp_path, capsys, grade, says):
    """Grade 10**30 was a polars TypeError traceback; now one line, at the grade, like every other refused grade."""
    directory = make_set(tmp_path / "v1", [judgment(), judgment(doc_id='"d2"', grade=grade)])
    code, out, err = releval(["validate", str(directory), *references(tmp_path)], capsys)
    assert code == 1, (out, err)
    assert out == [f"{directory / 'judgments.jsonl'}:2: field 'grade': {out[0].split(': ', 2)[2]}"], out
    assert says in out[0]


def test_a_span_out_of_range_is_one_line(tmp_path, capsys):
    directory = make_set(tmp_path / "v1", [judgment(span_start="0", span_end=str(10**30))])
    code, out, _ = releval(["validate", str(directory), *references(tmp_path)], capsys)
    assert code == 1
    assert out == [
        f"{directory / 'judgments.jsonl'}:1: field 'span_end': expected an integer character offset, "
        "found an integer out of range (100000000000…, 31 digits)"
    ]


def test_minus_zero_as_an_integer_is_grade_zero(tmp_path, capsys):
    """`-0` is the JSON integer 0 (only the float -0.0 is refused, as every float is)."""
    directory = make_set(tmp_path / "v1", [judgment(grade="-0")])
    code, out, _ = releval(["validate", str(directory), *references(tmp_path)], capsys)
    assert code == 0 and out[0].startswith("ok: "), out


# =========================================================================== JSON no reader could take

# (what, raw JSON of one judgment line, the field named)
BAD_JUDGMENT_LINES = [
    ("surrogate in notes", judgment(notes='"fine \\ud800 text"'), "notes", "lone surrogate escape (\\ud800)"),
    ("surrogate in query_id", judgment(query_id='"q\\udfff"'), "query_id", "lone surrogate escape (\\udfff)"),
    ("surrogate in doc_id", judgment(doc_id='"\\ud800d1"'), "doc_id", "lone surrogate escape (\\ud800)"),
    ("surrogate in a key", '{"query_id": "q1", "x\\ud800": 1}', "x\\ud800", "lone surrogate escape (\\ud800)"),
    ("100,000-deep notes", judgment(notes=DEEP), "json", "nested more than 100 deep"),
    ("100,000-deep line", DEEP, "json", "nested more than 100 deep"),
    ("5,000-digit grade", judgment(grade="9" * 5000), "json", "a number too long to read"),
]


@pytest.mark.parametrize(
    ("line", "field", "says"), [c[1:] for c in BAD_JUDGMENT_LINES], ids=[c[0] for c in BAD_JUDGMENT_LINES]
)
def test_json_no_reader_could_take_is_one_line_in_releval_validate(tmp_path, capsys, line, field, says):
    directory = make_set(tmp_path / "v1", [judgment(), line])
    code, out, err = releval(["validate", str(directory), *references(tmp_path)], capsys)
    assert code == 1, (out, err)
    assert len(out) == 1 and out[0].startswith(f"{directory / 'judgments.jsonl'}:2: field '{field}': "), out
    assert says in out[0]
    out[0].encode("utf-8")  # printable: the surrogate is shown as its escape


def test_the_nesting_bound_is_100_levels_wherever_the_reader_is_called():
    """100 levels are read and 101 refused, whatever the depth of the caller's stack; 100,000 too (json.loads's own
    RecursionError is caught), also when little stack is left."""
    from releval.inputs.schemas import parse_json_line

    def nested(levels: int) -> str:
        return '{"a": ' + "[" * (levels - 1) + "]" * (levels - 1) + "}"

    assert parse_json_line(nested(100), "f", 1)["a"]
    for levels in (101, 100_000):
        with pytest.raises(InputError, match="nested more than 100 deep"):
            parse_json_line(nested(levels), "f", 1)

    def deep_stack(frames: int) -> None:
        if frames:
            return deep_stack(frames - 1)
        with pytest.raises(InputError, match="nested more than 100 deep"):
            parse_json_line(nested(100_000), "f", 1)

    deep_stack(sys.getrecursionlimit() - len(inspect.stack(0)) - 50)  # 50 frames left to read the line


def test_a_surrogate_pair_is_one_character_and_accepted(tmp_path, capsys):
    directory = make_set(tmp_path / "v1", [judgment(notes='"\\ud83d\\ude00"')])
    code, out, _ = releval(["validate", str(directory), *references(tmp_path)], capsys)
    assert code == 0, out


@pytest.mark.parametrize(
    ("line", "field", "says"),
    [
        (judgment(grade="1000000000000000000000000000000"), "grade", "an integer out of range"),
        (judgment(notes='"\\ud800"'), "notes", "lone surrogate"),
        (judgment(notes=DEEP), "json", "nested more than 100 deep"),
    ],
    ids=["grade 10**30", "surrogate in notes", "deep notes"],
)
def test_a_bad_filled_pool_row_is_one_line_in_pool_import_and_nothing_is_written(tmp_path, capsys, line, field, says):
    directory = make_set(tmp_path / "v1", [judgment()])
    before = snapshot(directory)
    filled = write(tmp_path / "filled.jsonl", line.replace('"doc_id": "d1"', '"doc_id": "d2"') + "\n")
    argv = ["pool", "--import", str(filled), "--into", str(tmp_path / "v2"), "--parent", str(directory)]
    code, out, err = releval([*argv, *references(tmp_path)], capsys)
    assert code == 1, (out, err)
    assert len(out) == 1 and out[0].startswith(f"{filled}:1: field '{field}': "), out
    assert says in out[0]
    assert "nothing was written" in err
    assert not (tmp_path / "v2").exists()
    assert snapshot(directory) == before


# --------------------------------------------------------------------------- the same JSON in the stage scripts


def stage_project(
    root: Path, monkeypatch, *, queries: tuple[str, str] | None = None, corpus: tuple[str, str] | None = None
):
    """A directory with params.yaml naming ``queries`` / ``corpus`` (text, format); the stage runs there."""
    dataset = {"subset": {"docs": None, "queries": None}}
    if queries is not None:
        write(root / "queries.jsonl", queries[0])
        dataset["queries"] = {"path": "queries.jsonl", "format": queries[1]}
    if corpus is not None:
        write(root / "corpus.jsonl", corpus[0])
        dataset["corpus"] = {"path": "corpus.jsonl", "format": corpus[1]}
    write(root / "params.yaml", yaml.safe_dump({"dataset": dataset}, sort_keys=False))
    monkeypatch.chdir(root)


GOOD_QUERY = '{"query_id": "q1", "text": "sort a dict", "split": "dev"}\n'
QUERY_CASES = [
    ("releval: surrogate in text", '{"query_id": "q2", "text": "a\\ud800", "split": "dev"}', "releval", "text"),
    ("releval: surrogate in query_id", '{"query_id": "q\\ud800", "text": "a", "split": "dev"}', "releval", "query_id"),
    (
        "releval: surrogate in slices",
        '{"query_id": "q2", "text": "a", "split": "dev", "slices": ["\\udc00"]}',
        "releval",
        "slices",
    ),
    (
        "releval: 100,000-deep slices",
        '{"query_id": "q2", "text": "a", "split": "dev", "slices": ' + DEEP + "}",
        "releval",
        "json",
    ),
    ("jsonl: surrogate in text", '{"_id": "q2", "text": "a\\ud800"}', "jsonl", "text"),
    ("jsonl: surrogate in _id", '{"_id": "q\\ud800", "text": "a"}', "jsonl", "_id"),
    ("jsonl: 100,000-deep line", DEEP, "jsonl", "json"),
]


@pytest.mark.parametrize(("line", "fmt", "field"), [c[1:] for c in QUERY_CASES], ids=[c[0] for c in QUERY_CASES])
def test_the_queries_stage_says_one_line_and_writes_nothing(tmp_path, monkeypatch, capsys, line, fmt, field):
    first = GOOD_QUERY if fmt == "releval" else '{"_id": "q1", "text": "sort a dict"}\n'
    stage_project(tmp_path, monkeypatch, queries=(first + line + "\n", fmt))
    code, err = run_stage("queries.py", monkeypatch, capsys)
    assert code == 2
    assert one_error_line(err).startswith(f"queries.jsonl:2: field '{field}': ")
    assert not (tmp_path / "data").exists()


CORPUS_CASES = [
    ("surrogate in text", '{"_id": "d2", "text": "a\\ud800b"}', "text"),
    ("surrogate in title", '{"_id": "d2", "title": "\\udbff", "text": "a"}', "title"),
    ("surrogate in _id", '{"_id": "d\\ud800", "text": "a"}', "_id"),
    ("surrogate in doc_id", '{"doc_id": "\\ud800", "text": "a"}', "doc_id"),
    ("100,000-deep metadata", '{"_id": "d2", "text": "a", "metadata": ' + DEEP + "}", "json"),
    ("100,000-deep line", DEEP, "json"),
]


@pytest.mark.parametrize(("line", "field"), [c[1:] for c in CORPUS_CASES], ids=[c[0] for c in CORPUS_CASES])
def test_the_ingest_stage_says_one_line_and_writes_nothing(tmp_path, monkeypatch, capsys, line, field):
    stage_project(tmp_path, monkeypatch, corpus=('{"_id": "d1", "text": "x"}\n' + line + "\n", "jsonl"))
    code, err = run_stage("ingest.py", monkeypatch, capsys)
    assert code == 2
    assert one_error_line(err).startswith(f"corpus.jsonl:2: field '{field}': ")
    assert not (tmp_path / "data").exists()


def test_a_surrogate_in_a_corpus_key_nobody_reads_is_ignored_like_the_key(tmp_path, monkeypatch, capsys):
    """Policy: a corpus record's other keys (url, metadata) are ignored, a lone surrogate in them too."""
    line = '{"_id": "d2", "text": "b", "metadata": {"x": "\\ud800"}}'
    stage_project(tmp_path, monkeypatch, corpus=('{"_id": "d1", "text": "a"}\n' + line + "\n", "jsonl"))
    code, err = run_stage("ingest.py", monkeypatch, capsys)
    assert code == 0, err
    assert pl.read_parquet(tmp_path / "data" / "work" / "docs.parquet")["text"].to_list() == ["a", "b"]


# =========================================================================== a disk that refuses the write


def file_size_limit(limit: int):
    """preexec_fn: the kernel refuses writes past ``limit`` bytes in every file (EFBIG), as a full disk refuses
    them with ENOSPC; both reach the writer as the same OSError in the middle of a file."""

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


@pytest.mark.slow
@pytest.mark.parametrize("into", ["a new version (--parent v1)", "the set itself (append to v1)"])
def test_a_write_refused_in_pool_import_is_one_line_and_leaves_the_set_as_it_was(tmp_path, into):
    """`releval pool --import` in a process whose writes stop at 64 KB while the set it writes is ~180 KB: one
    line naming the set, the folder exactly as before (v2 absent, v1 byte for byte), no temporary file left.
    (A real ENOSPC, from a full 600 KB tmpfs mounted in a user namespace, gives the same line with "No space
    left on device"; that needs `unshare`, which not every CI machine allows.)"""
    lines = [
        judgment(query_id=f'"q{q}"', doc_id=f'"d{d}"', notes='"' + "n" * 60 + '"')
        for q in (1, 2, 3)
        for d in range(1, 1001)
    ]
    v1 = make_set(tmp_path / "sets" / "v1", lines)
    argv = references(tmp_path, docs=1001)
    filled = write(tmp_path / "filled.csv", "query_id,doc_id,grade\nq1,d1001,2\n")
    target = tmp_path / "sets" / ("v2" if into.startswith("a new") else "v1")
    parent = ["--parent", str(v1)] if into.startswith("a new") else []
    before = snapshot(tmp_path / "sets")
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    result = subprocess.run(
        ["releval", "pool", "--import", str(filled), "--into", str(target), "--annotator", "alice", *parent, *argv],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        preexec_fn=file_size_limit(64 * 1024),
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout.splitlines() == [f"{target}: field 'path': cannot write: File too large (left as it was)"], (
        result.stdout
    )
    assert "Traceback" not in result.stderr and "nothing was written" in result.stderr
    assert snapshot(tmp_path / "sets") == before
    assert sorted(p.name for p in (tmp_path / "sets").iterdir()) == ["v1"]  # no .releval-tmp-* left behind
