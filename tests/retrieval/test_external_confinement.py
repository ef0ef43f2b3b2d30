"""An external run file stays inside the project unless its configuration says otherwise (issue 27, seam 13).

The README says an external run's ``path`` is relative to the project root; a path that leads out of it (absolute,
``../``, a symlink whose target is outside) was read all the same. Now the `external@<name>` stage refuses it in one
line naming ``externals.<name>.path`` and writes nothing, unless the entry says ``allow_outside: true`` (then it is
read, and run.json records the opt-in). Each case runs the real stage script, `python stages/external.py`, in a
project directory.
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

DESCRIPTION = {"system": "Elasticsearch 8 BM25", "produced": "2026-05-02", "by": "search team"}
RUN = "q1 Q0 d2 1 3.5 es\nq1 Q0 d1 2 1.0 es\n"


def project(tmp_path: Path, path: str, **more) -> Path:
    """A project declaring ``externals.prod`` at ``path``; a run file lies outside it, in tmp_path/elsewhere."""
    root = tmp_path / "project"
    (root / "data" / "external").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "prod.trec").write_text(RUN, encoding="utf-8")
    (root / "data" / "inside.trec").write_text(RUN, encoding="utf-8")
    entry = {"path": path, "format": "trec", "description": DESCRIPTION, "unit": "documents", **more}
    params = {"externals": {"prod": entry}, "grid": {"external": ["prod"]}}
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    pl.DataFrame({"query_id": ["q1"], "text": ["a"], "split": ["dev"]}).write_parquet(root / "queries.parquet")
    pl.DataFrame({"doc_id": ["d1", "d2"]}).write_parquet(root / "docs.parquet")
    return root


def external_stage(root: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    command = [sys.executable, str(ROOT / "stages" / "external.py"), "--name", "prod"]
    command += ["--queries", "queries.parquet", "--docs", "docs.parquet", "--runs-root", "runs"]
    return subprocess.run(command, cwd=root, env=env, capture_output=True, text=True)


def link(root: Path, target: str) -> str:
    """data/external/prod.trec inside the project, a symlink to ``target``; its path relative to the root."""
    (root / "data" / "external" / "prod.trec").symlink_to(target)
    return "data/external/prod.trec"


# (case, the declared path given the tmp_path, a symlink target to make at data/external/prod.trec or None)
OUTSIDE = [
    ("absolute", lambda tmp: str(tmp / "elsewhere" / "prod.trec"), None),
    ("../", lambda tmp: "../elsewhere/prod.trec", None),
    ("data/../../", lambda tmp: "data/../../elsewhere/prod.trec", None),
    ("symlink out", lambda tmp: "data/external/prod.trec", "../../../elsewhere/prod.trec"),
    ("absolute symlink out", lambda tmp: "data/external/prod.trec", "{tmp}/elsewhere/prod.trec"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("path", "target"), [c[1:] for c in OUTSIDE], ids=[c[0] for c in OUTSIDE])
def test_a_run_file_outside_the_project_is_one_line_naming_the_field_and_nothing_is_written(tmp_path, path, target):
    root = project(tmp_path, path(tmp_path))
    if target is not None:
        link(root, target.format(tmp=tmp_path))
    result = external_stage(root)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: {path(tmp_path)}: field 'externals.prod.path': outside the project root")
    assert "allow_outside" in lines[0]
    if target is not None:
        assert f"(a link to {tmp_path.resolve() / 'elsewhere' / 'prod.trec'})" in lines[0]
    assert not (root / "runs").exists()


@pytest.mark.slow
@pytest.mark.parametrize(("path", "target"), [c[1:] for c in OUTSIDE], ids=[c[0] for c in OUTSIDE])
def test_allow_outside_true_reads_it_and_run_json_records_the_opt_in(tmp_path, path, target):
    root = project(tmp_path, path(tmp_path), allow_outside=True)
    if target is not None:
        link(root, target.format(tmp=tmp_path))
    result = external_stage(root)
    assert result.returncode == 0, result.stderr
    folder = root / "runs" / "external" / "prod"
    assert pl.read_parquet(folder / "run.parquet")["doc_id"].to_list() == ["d2", "d1"]
    record = json.loads((folder / "run.json").read_text())["external"]
    assert record["allow_outside"] is True and record["path"] == path(tmp_path)


@pytest.mark.slow
def test_a_path_and_a_link_inside_the_project_need_no_opt_in_and_record_nothing_new(tmp_path):
    """The default entry's records keep their bytes: no allow_outside key in run.json or declared.json."""
    root = project(tmp_path, "data/inside.trec")
    link(root, "../inside.trec")  # a symlink inside the project, to a file inside it
    for path in ("data/inside.trec", "data/external/prod.trec"):
        params = yaml.safe_load((root / "params.yaml").read_text())
        params["externals"]["prod"]["path"] = path
        (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
        result = external_stage(root)
        assert result.returncode == 0, result.stderr
        record = json.loads((root / "runs" / "external" / "prod" / "run.json").read_text())["external"]
        assert "allow_outside" not in record and record["path"] == path
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    declared = [sys.executable, str(ROOT / "stages" / "external.py"), "--declared", "--runs-root", "runs"]
    subprocess.run(declared, cwd=root, env=env, check=True, capture_output=True)
    record = json.loads((root / "runs" / "external" / "declared.json").read_text())["externals"]["prod"]
    assert sorted(record) == ["chunk_pattern", "description", "format", "path", "unit"]


@pytest.mark.slow
def test_allow_outside_must_be_true_or_false(tmp_path):
    root = project(tmp_path, "../elsewhere/prod.trec", allow_outside="yes")
    result = external_stage(root)
    assert result.returncode == 2
    assert (
        result.stderr.strip()
        == "error: params.yaml: field 'externals.prod.allow_outside': expected true or false, found 'yes'"
    )
