"""Importers: fixtures for every format, the real Cranfield files, and every error case."""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from releval.inputs.corpus import (
    CRANFIELD_GRADE_MAP,
    EmptyTextWarning,
    corpus_format_of,
    read_corpus,
    read_judgments,
    read_queries,
)
from releval.errors import InputError, InputErrors
from releval.tables import DOCUMENTS, IMPORTED_QUERIES, QRELS, SMART_QUERIES

from support import TEST_DATA
from support.cranfield import CRANFIELD, needs_cranfield

DATA = TEST_DATA / "corpus"


def sha(title: str, text: str) -> str:
    return hashlib.sha256(f"{title}\n{text}".encode()).hexdigest()


def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return path


def raises_input_error(call, *, file: Path, line: int | None, field: str) -> InputError:
    """Run ``call``; check the InputError names the file, line and field, in attributes and message."""
    with pytest.raises(InputError) as info:
        call()
    error = info.value
    assert (error.file, error.line, error.field) == (str(file), line, field), str(error)
    message = str(error)
    assert str(file) in message and f"'{field}'" in message
    if line is not None:
        assert f"{file}:{line}:" in message
    return error


# --- jsonl ------------------------------------------------------------------------------------


def test_jsonl_corpus_keeps_source_order_and_fixed_schema():
    with pytest.warns(EmptyTextWarning, match="d4"):
        docs = read_corpus(DATA / "docs.jsonl", "jsonl")
    assert docs.schema == DOCUMENTS.schema
    assert docs["doc_id"].to_list() == ["d1", "d2", "3", "d4"]
    assert docs["title"].to_list() == ["Wings", "", "", "Empty"]
    # A raw U+2028 inside a JSON string is text, not a line break.
    assert docs["text"][1] == "Heat flow in a composite slab\u2028with a line separator inside."
    assert docs["sha256"].to_list() == [sha(t, x) for t, x in zip(docs["title"], docs["text"])]


def test_jsonl_queries():
    queries = read_queries(DATA / "queries.jsonl", "jsonl")
    assert queries.schema == IMPORTED_QUERIES.schema
    assert queries.rows() == [
        ("q1", "lift in a slipstream"),
        ("q2", "heat conduction in slabs"),
        ("7", "numeric query id"),
    ]


def test_bom_and_crlf_are_accepted(tmp_path):
    path = write(tmp_path, "c.jsonl", b'\xef\xbb\xbf{"_id": "a", "text": "x"}\r\n{"_id": "b", "text": "y"}\r\n')
    assert read_corpus(path, "jsonl").select("doc_id", "text").rows() == [("a", "x"), ("b", "y")]


# --- folder -----------------------------------------------------------------------------------


def test_folder_corpus_ids_titles_and_order():
    docs = read_corpus(DATA / "folder", "folder")
    assert docs.schema == DOCUMENTS.schema
    # Sorted relative paths; hidden files and folders and non-.txt/.md files skipped.
    assert docs["doc_id"].to_list() == ["a", "notes/b", "notes/c"]
    # .txt: no title; .md: first ATX heading outside code fences, else "".
    assert docs["title"].to_list() == ["", "Boundary layers", ""]
    assert docs["text"][0] == (DATA / "folder" / "a.txt").read_text()


def test_folder_text_is_verbatim_except_crlf(tmp_path):
    write(tmp_path / "c", "x.md", b"\xef\xbb\xbf# Title\r\n\r\nbody\r\n")
    docs = read_corpus(tmp_path / "c", "folder")
    assert docs.row(0) == ("x", "Title", "# Title\n\nbody\n", sha("Title", "# Title\n\nbody\n"))


# --- beir -------------------------------------------------------------------------------------


def test_beir_corpus_queries_and_splits():
    root = DATA / "beir"
    docs = read_corpus(root, "beir")
    assert docs.select("doc_id", "title").rows() == [("doc-a", "Shock waves"), ("doc-b", ""), ("doc-c", "Slip flow")]
    assert read_queries(root, "beir")["query_id"].to_list() == ["q-1", "q-2"]
    qrels = read_judgments(root, "beir")
    assert qrels.schema == QRELS.schema
    assert qrels.rows() == [("q-1", "doc-a", 2), ("q-1", "doc-c", 0), ("q-2", "doc-b", 1)]
    assert read_judgments(root, "beir", split="dev").rows() == [("q-2", "doc-c", 1)]
    assert read_judgments(root / "qrels" / "dev.tsv", "beir").rows() == [("q-2", "doc-c", 1)]
    assert read_judgments(root, "beir", grade_map={0: 0, 1: 1, 2: 3})["grade"].to_list() == [3, 0, 1]


# --- smart (tiny fixture, runs everywhere) ----------------------------------------------------


def test_smart_fixture():
    with pytest.warns(EmptyTextWarning, match=r"2 \(line 13\)"):
        docs = read_corpus(DATA / "mini.all", "smart")
    assert docs.select("doc_id", "title", "text").rows() == [
        ("1", "shock waves in supersonic flow .", "shock waves in supersonic flow . the waves are studied ."),
        ("2", "", ""),
        ("3", "slip flow .", "slip flow in a tube ."),
    ]
    queries = read_queries(DATA / "mini.qry", "smart")
    assert queries.schema == SMART_QUERIES.schema
    assert queries.rows() == [("1", "what are shock waves .", "004"), ("2", "slip flow in tubes .", "009")]
    assert read_judgments(DATA / "mini.rel", "smart").rows() == [("1", "1", 4), ("1", "2", 0), ("2", "3", 1)]


def test_cranfield_grade_map_reverses_cleverdon_codes():
    # Code 1 "complete answer" is the best; -1 (undefined by the readme, once per query) is judged
    # but not relevant.
    assert dict(CRANFIELD_GRADE_MAP) == {1: 4, 2: 3, 3: 2, 4: 1, -1: 0}


def test_custom_grade_map_for_smart(tmp_path):
    path = write(tmp_path, "rel", "1 5 -1\n1 6 1\n")
    assert read_judgments(path, "smart", grade_map={1: 1, -1: 2})["grade"].to_list() == [2, 1]


# --- real Cranfield ---------------------------------------------------------------------------


@needs_cranfield
def test_cranfield_corpus_counts():
    with pytest.warns(EmptyTextWarning) as caught:
        docs = read_corpus(CRANFIELD / "cran.all.1400", "smart")
    assert docs.height == 1400 and docs["doc_id"].n_unique() == 1400
    assert docs["doc_id"].to_list() == [str(i) for i in range(1, 1401)]
    empty = docs.filter(pl.col("text") == "")["doc_id"].to_list()
    assert empty == ["471", "995"] and "471 (line 13470), 995 (line 27712)" in str(caught[0].message)
    first = docs.row(0, named=True)
    assert first["title"] == "experimental investigation of the aerodynamics of a wing in a slipstream ."
    assert first["text"].startswith(first["title"] + " an experimental study of a wing")
    assert not docs["text"].str.contains(r"\s\s|\r|\n").any()


@needs_cranfield
def test_cranfield_queries_are_numbered_by_position():
    queries = read_queries(CRANFIELD / "cran.qry", "smart")
    assert queries.height == 225
    assert queries["query_id"].to_list() == [str(i) for i in range(1, 226)]
    assert queries["source_id"].head(3).to_list() == ["001", "002", "004"]
    assert queries["source_id"][-1] == "365"
    assert queries["text"][2] == "what problems of heat conduction in composite slabs have been solved so far ."


@needs_cranfield
def test_cranfield_judgment_counts_and_grades():
    qrels = read_judgments(CRANFIELD / "cranqrel", "smart")
    assert qrels.height == 1837
    grades = Counter(qrels["grade"].to_list())
    codes = {1: 128, 2: 387, 3: 734, 4: 363, -1: 225}
    assert grades == {CRANFIELD_GRADE_MAP[code]: n for code, n in codes.items()}
    assert qrels["query_id"].n_unique() == 225
    assert qrels.filter(pl.col("grade") == 0).group_by("query_id").len()["len"].to_list() == [1] * 225
    # Every judged document and query exists in the other files.
    with pytest.warns(EmptyTextWarning):
        doc_ids = set(read_corpus(CRANFIELD / "cran.all.1400", "smart")["doc_id"])
    assert set(qrels["doc_id"]) <= doc_ids
    assert set(qrels["query_id"]) == set(read_queries(CRANFIELD / "cran.qry", "smart")["query_id"])


# --- errors: each names file, line and field -------------------------------------------------


def test_duplicate_doc_id_names_both_lines(tmp_path):
    path = write(
        tmp_path, "c.jsonl", '{"_id": "a", "text": "x"}\n{"_id": "b", "text": "y"}\n{"id": "a", "text": "z"}\n'
    )
    error = raises_input_error(lambda: read_corpus(path, "jsonl"), file=path, line=3, field="id")
    assert f"{path}:1" in str(error)


def test_duplicate_smart_id_after_leading_zeros(tmp_path):
    path = write(tmp_path, "c.all", ".I 7\n.W\nx\n.I 007\n.W\ny\n")
    error = raises_input_error(lambda: read_corpus(path, "smart"), file=path, line=4, field=".I")
    assert f"{path}:1" in str(error)


def test_duplicate_folder_id_names_both_files(tmp_path):
    first, second = write(tmp_path / "c", "x.md", "a"), write(tmp_path / "c", "x.txt", "b")
    error = raises_input_error(lambda: read_corpus(tmp_path / "c", "folder"), file=second, line=1, field="path")
    assert f"{first}:1" in str(error)


def test_duplicate_judgment_names_both_lines(tmp_path):
    path = write(tmp_path, "rel", "1 5 2\n1 6 2\n1 5 3\n")
    error = raises_input_error(lambda: read_judgments(path, "smart"), file=path, line=3, field="doc")
    assert "line 1" in str(error)


@pytest.mark.parametrize("content", ["", "\n\n  \n"])
def test_empty_corpus(tmp_path, content):
    path = write(tmp_path, "c.jsonl", content)
    raises_input_error(lambda: read_corpus(path, "jsonl"), file=path, line=1, field="_id")


def test_empty_smart_corpus_and_judgments(tmp_path):
    path = write(tmp_path, "c.all", "\r\n")
    raises_input_error(lambda: read_corpus(path, "smart"), file=path, line=1, field=".I")
    raises_input_error(lambda: read_judgments(path, "smart"), file=path, line=1, field="query")


def test_empty_folder(tmp_path):
    write(tmp_path / "c", "notes.csv", "x")
    raises_input_error(lambda: read_corpus(tmp_path / "c", "folder"), file=tmp_path / "c", line=None, field="path")


def test_non_utf8_line_is_named(tmp_path):
    data = b'{"_id": "a", "text": "x"}\n{"_id": "b", "text": "caf\xe9"}\n'
    path = write(tmp_path, "c.jsonl", data)
    error = raises_input_error(lambda: read_corpus(path, "jsonl"), file=path, line=2, field="encoding")
    offset = data.index(b"\xe9")
    assert f"byte 0xe9 at byte offset {offset}" in str(error)


def test_non_utf8_folder_file_is_named(tmp_path):
    path = write(tmp_path / "c", "x.txt", b"ok\nok\n\xff\n")
    raises_input_error(lambda: read_corpus(tmp_path / "c", "folder"), file=path, line=3, field="encoding")


def test_every_bad_file_of_a_folder_corpus_is_reported(tmp_path):
    """Not only the first: every unreadable file and every repeated id, each naming its file."""
    root = tmp_path / "c"
    latin1 = write(root, "a.txt", b"caf\xe9\n")
    utf16 = write(root, "sub/b.md", "# T\n".encode("utf-16"))
    write(root, "d.md", "fine")
    repeated = write(root, "d.txt", "same id as d.md")
    with pytest.raises(InputErrors) as info:
        read_corpus(root, "folder")
    found = [(e.file, e.line, e.field) for e in info.value.errors]
    assert found == [(str(latin1), 1, "encoding"), (str(utf16), 1, "encoding"), (str(repeated), 1, "path")]
    assert len(str(info.value).splitlines()) == 3


def test_a_corpus_path_s_format_when_none_is_named(tmp_path):
    write(tmp_path / "corpus", "a.md", "x")
    assert corpus_format_of(tmp_path / "corpus") == "folder"
    write(tmp_path / "corpus", "corpus.jsonl", "{}")
    assert corpus_format_of(tmp_path / "corpus") == "beir"
    assert corpus_format_of(Path("docs.parquet")) == "parquet" and corpus_format_of(Path("c.jsonl")) == "jsonl"


def test_non_utf8_after_bom_keeps_line_numbers(tmp_path):
    data = b"\xef\xbb\xbf.I 1\r\n.W\r\nbad \x80\r\n"
    path = write(tmp_path, "c.all", data)
    error = raises_input_error(lambda: read_corpus(path, "smart"), file=path, line=3, field="encoding")
    offset = data.index(b"\x80")  # offsets count the BOM
    assert f"byte offset {offset}" in str(error)


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ('{"_id": "b", "text": ', "json"),
        ('["_id", "b"]', "json"),
        ('{"title": "t", "text": "x"}', "_id"),
        ('{"_id": "", "text": "x"}', "_id"),
        ('{"doc_id": true, "text": "x"}', "doc_id"),
        ('{"_id": "b", "title": "t"}', "text"),
        ('{"_id": "b", "text": 5}', "text"),
        ('{"_id": "b", "title": 5, "text": "x"}', "title"),
        ('{"_id": "b", "text": "\\ud800"}', "text"),
    ],
)
def test_bad_json_records(tmp_path, line, field):
    path = write(tmp_path, "c.jsonl", '{"_id": "a", "text": "x"}\r\n\r\n' + line + "\n")
    raises_input_error(lambda: read_corpus(path, "jsonl"), file=path, line=3, field=field)


def test_query_missing_id(tmp_path):
    path = write(tmp_path, "q.jsonl", '{"text": "x"}\n')
    error = raises_input_error(lambda: read_queries(path, "jsonl"), file=path, line=1, field="_id")
    assert "query_id" in str(error)


@pytest.mark.parametrize(
    ("content", "line"),
    [
        ("\n.T\ntitle\n.I 1\n.W\nx\n", 2),  # a field before any .I
        ("stray text\n.I 1\n.W\nx\n", 1),
        (".I 1\n.W\nx\n.I\n.W\ny\n", 4),  # .I without an id
        (".I 1\n.W\nx\n.I 2b\n", 4),
        (".I 1\nno marker yet\n", 2),
    ],
)
def test_smart_record_without_id(tmp_path, content, line):
    path = write(tmp_path, "c.all", content)
    raises_input_error(lambda: read_corpus(path, "smart"), file=path, line=line, field=".I")


def test_smart_queries_with_repeated_printed_id(tmp_path):
    path = write(tmp_path, "q", ".I 001\n.W\nx\n.I 001\n.W\ny\n")
    raises_input_error(lambda: read_queries(path, "smart"), file=path, line=4, field=".I")


@pytest.mark.parametrize(
    ("content", "field"),
    [
        ("1 2 3\n1 3\n", "query"),
        ("1 2 3\nx 3 1\n", "query"),
        ("1 2 3\n1 y 1\n", "doc"),
        ("1 2 3\n1 3 1.5\n", "code"),
        ("1 2 3\n1 3 5\n", "code"),  # 5 is not in the grade map
    ],
)
def test_bad_smart_judgments(tmp_path, content, field):
    path = write(tmp_path, "rel", content)
    raises_input_error(lambda: read_judgments(path, "smart"), file=path, line=2, field=field)


@pytest.mark.parametrize(
    ("content", "line", "field"),
    [
        ("q\td\t1\n", 1, "header"),
        ("query-id\tcorpus-id\tscore\nq1\td1\n", 2, "query-id"),
        ("query-id\tcorpus-id\tscore\nq1\td1\thigh\n", 2, "score"),
        ("query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td1\t2\n", 3, "corpus-id"),
        ("query-id\tcorpus-id\tscore\n", 1, "query-id"),
    ],
)
def test_bad_beir_qrels(tmp_path, content, line, field):
    path = write(tmp_path, "test.tsv", content)
    raises_input_error(lambda: read_judgments(path, "beir"), file=path, line=line, field=field)


def test_beir_grade_map_must_cover_every_score(tmp_path):
    path = write(tmp_path, "test.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t2\n")
    raises_input_error(lambda: read_judgments(path, "beir", grade_map={1: 1}), file=path, line=3, field="score")


def test_unknown_format(tmp_path):
    path = write(tmp_path, "c.jsonl", '{"_id": "a", "text": "x"}\n')
    raises_input_error(lambda: read_corpus(path, "trec"), file=path, line=None, field="fmt")
    raises_input_error(lambda: read_queries(path, "folder"), file=path, line=None, field="fmt")
    raises_input_error(lambda: read_judgments(path, "trec"), file=path, line=None, field="fmt")


def test_missing_paths(tmp_path):
    missing = tmp_path / "nope.jsonl"
    for call in (
        lambda: read_corpus(missing, "jsonl"),
        lambda: read_queries(missing, "smart"),
        lambda: read_judgments(missing, "smart"),
    ):
        raises_input_error(call, file=missing, line=None, field="path")
    (tmp_path / "beir").mkdir()
    raises_input_error(
        lambda: read_corpus(tmp_path / "beir", "beir"), file=tmp_path / "beir" / "corpus.jsonl", line=None, field="path"
    )
    raises_input_error(
        lambda: read_judgments(tmp_path / "beir", "beir", split="dev"),
        file=tmp_path / "beir" / "qrels" / "dev.tsv",
        line=None,
        field="path",
    )
    raises_input_error(lambda: read_corpus(tmp_path, "jsonl"), file=tmp_path, line=None, field="path")
