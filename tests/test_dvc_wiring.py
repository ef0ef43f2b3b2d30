"""Each stage depends on the code it runs, through its script's fingerprint (releval.provenance.code).

A module missing from a stage's code means editing it leaves `dvc repro` reporting "up to date"
over stale results; code listed that the stage never runs reruns it for nothing. The imports are
read with `ast`, so nothing is executed.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from releval import paths
from releval.provenance.code import (
    CODE_STAGE,
    fingerprint,
    fingerprint_path,
    project_files,
    script_code,
    write_fingerprints,
)
from support import ROOT
from support.code_project import write_code_project
from support.commands import git, ran_stages, run
from support.dvc_pipeline import PIPELINE, stage_bodies, stage_script


def code_deps(body) -> list[str]:
    """The deps of a stage that are code: files under stages/, or fingerprint files."""
    return [
        dep
        for dep in body.get("deps", [])
        if dep.startswith(paths.STAGES + "/") or dep == paths.STAGES or dep.startswith(paths.CODE_FINGERPRINTS + "/")
    ]


@pytest.mark.parametrize("stage", sorted(set(stage_bodies(PIPELINE)) - {CODE_STAGE}))
def test_each_stage_depends_on_its_scripts_fingerprint_only(stage: str) -> None:
    body = stage_bodies(PIPELINE)[stage]
    assert code_deps(body) == [fingerprint_path(stage_script(body)).as_posix()]


def test_the_code_stage_hashes_every_script_and_module() -> None:
    body = stage_bodies(PIPELINE)[CODE_STAGE]
    assert body["deps"] == [paths.STAGES]
    assert body["outs"] == [paths.CODE_FINGERPRINTS]
    ignored = (ROOT / ".dvcignore").read_text(encoding="utf-8").split()
    assert {"__pycache__/", "*.egg-info/"} <= set(ignored)  # not code, and they differ between machines


def test_every_stage_script_gets_a_fingerprint_of_its_whole_closure(tmp_path: Path) -> None:
    written = write_fingerprints(ROOT, tmp_path)
    scripts = {stage_script(body) for body in stage_bodies(PIPELINE).values()}
    assert {p.name for p in written} >= {Path(s).stem + ".json" for s in scripts}
    fuse = json.loads((tmp_path / "fuse.json").read_text())
    assert fuse["script"] == "stages/fuse.py"
    assert "stages/releval/retrieval/fusion.py" in fuse["files"]
    assert "stages/releval/retrieval/encoders.py" not in fuse["files"]  # fuse never loads a model


@pytest.fixture
def tiny_project(tmp_path: Path) -> Path:
    return write_code_project(tmp_path)


def test_project_files_follows_imports_transitively(tiny_project: Path) -> None:
    found = project_files(tiny_project / "stages/s.py", tiny_project / "stages")
    assert {path.relative_to(tiny_project / "stages/releval").as_posix() for path in found} == {
        "__init__.py",  # a docstring only, yet run by every import of the package
        "a.py",
        "b.py",
        "sub/__init__.py",
        "sub/c.py",
    }


def test_fingerprint_changes_with_imported_code_only(tiny_project: Path) -> None:
    script = tiny_project / "stages/s.py"
    before = fingerprint(script, tiny_project)
    assert list(before["files"]) == script_code(script, tiny_project)
    assert fingerprint(script, tiny_project) == before  # the same code, the same bytes
    (tiny_project / "stages/releval/unused.py").write_text("Y = 3\n", encoding="utf-8")
    assert fingerprint(script, tiny_project) == before
    (tiny_project / "stages/releval/sub/c.py").write_text("def g():\n    return 2\n", encoding="utf-8")
    after = fingerprint(script, tiny_project)
    assert [name for name in after["files"] if after["files"][name] != before["files"][name]] == [
        "stages/releval/sub/c.py"
    ]


def test_fingerprints_of_removed_scripts_are_removed(tiny_project: Path, tmp_path: Path) -> None:
    out = tmp_path / "code"
    assert sorted(p.name for p in write_fingerprints(tiny_project, out)) == ["s.json", "t.json"]
    (tiny_project / "stages/t.py").unlink()
    write_fingerprints(tiny_project, out)
    assert sorted(p.name for p in out.iterdir()) == ["s.json"]
    assert (
        json.loads((out / "s.json").read_text())["files"]
        == fingerprint(tiny_project / "stages/s.py", tiny_project)["files"]
    )


def test_dvc_reruns_exactly_the_stages_whose_code_changed(tiny_project: Path) -> None:
    """A real DVC run: stage s imports releval.a (-> b -> sub.c), stage t imports nothing of ours."""
    write = f"{sys.executable} {ROOT / paths.STAGES / 'code.py'}"  # the real stage, on the tiny project
    pipeline = {
        "stages": {
            CODE_STAGE: {"cmd": write, "deps": ["stages"], "outs": ["data/work/code"]},
            "s": {"cmd": "echo s > s.txt", "deps": ["data/work/code/s.json"], "outs": ["s.txt"]},
            "t": {"cmd": "echo t > t.txt", "deps": ["data/work/code/t.json"], "outs": ["t.txt"]},
        }
    }
    (tiny_project / "dvc.yaml").write_text(yaml.safe_dump(pipeline), encoding="utf-8")
    shutil.copy(ROOT / ".dvcignore", tiny_project / ".dvcignore")
    git(tiny_project, "init", "-q")
    run(["dvc", "init", "-q"], tiny_project)
    assert ran_stages(run(["dvc", "repro"], tiny_project).stdout) == {CODE_STAGE, "s", "t"}
    (tiny_project / "stages/releval/__pycache__").mkdir()
    (tiny_project / "stages/releval/__pycache__/a.cpython-311.pyc").write_bytes(b"not code")
    assert ran_stages(run(["dvc", "repro"], tiny_project).stdout) == set()
    (tiny_project / "stages/releval/unused.py").write_text("Y = 3\n", encoding="utf-8")
    assert ran_stages(run(["dvc", "repro"], tiny_project).stdout) == {CODE_STAGE}
    (tiny_project / "stages/releval/sub/c.py").write_text("def g():\n    return 2\n", encoding="utf-8")
    assert ran_stages(run(["dvc", "repro"], tiny_project).stdout) == {CODE_STAGE, "s"}
