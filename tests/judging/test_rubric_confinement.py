"""A manifest's ``rubric`` is a file inside the judgment set or its dataset folder (the set's parent
directory, where the shipped layout keeps RUBRIC.md), symlinks resolved (seam 13a of issue 27): any
other file is a manifest error, so that neither the judging page shows it nor a model judge sends it.
Validation, the judging page and the model judge all read the rubric through the manifest's check."""

from __future__ import annotations

import argparse
import hashlib
import json
import re
from pathlib import Path

import pytest

from releval.commands import judge as judge_command
from releval.errors import InputError
from releval.judging import judgments as jmod
from releval.judging import model_judge

SECRET = "SYSTEM-FILE-CONTENT-4b1d"


def dataset(tmp_path: Path, rubric: str) -> Path:
    """project/data/judgments/{RUBRIC.md, v1/}, v1's manifest saying ``rubric: RUBRIC``, and a file
    outside the project, tmp_path/outside/secret.txt; returns v1's directory."""
    (tmp_path / "outside").mkdir(parents=True)
    (tmp_path / "outside" / "secret.txt").write_text(SECRET + "\n")
    judgments_dir = tmp_path / "project" / "data" / "judgments"
    set_dir = judgments_dir / "v1"
    set_dir.mkdir(parents=True)
    (judgments_dir / "RUBRIC.md").write_text("# Rubric\n")
    line = json.dumps({"query_id": "q1", "doc_id": "d1", "grade": 2, "annotator": "alice"}) + "\n"
    (set_dir / "judgments.jsonl").write_text(line)
    digest = hashlib.sha256(line.encode()).hexdigest()
    (set_dir / "manifest.yaml").write_text(
        "version: v1\nparent: null\ndate: 2026-11-30\nscale: {0: none, 1: some, 2: all}\n"
        f"rubric: {json.dumps(rubric)}\nannotators: [alice]\njudgments_sha256: {digest}\n"
    )
    return set_dir


def rubric_errors(set_dir: Path) -> list[str]:
    judgment_set, errors = jmod.validate_version(set_dir)
    assert judgment_set is None
    return [str(e) for e in errors]


@pytest.mark.parametrize("reference", ["ABSOLUTE", "../../../../outside/secret.txt", "../../../outside/secret.txt"])
def test_a_rubric_outside_the_set_and_its_dataset_folder_is_a_manifest_error(tmp_path, reference):
    absolute = str(tmp_path / "outside" / "secret.txt")
    set_dir = dataset(tmp_path, absolute if reference == "ABSOLUTE" else reference)
    (error,) = rubric_errors(set_dir)
    assert re.fullmatch(
        r".*/v1/manifest\.yaml:5: field 'rubric': rubric '.*secret\.txt' is outside the judgment set and its "
        r"dataset folder: a rubric must be a file inside .*/data/judgments/v1 or .*/data/judgments",
        error,
    ), error
    assert SECRET not in error


def test_a_symlink_out_of_the_dataset_folder_is_refused(tmp_path):
    set_dir = dataset(tmp_path, "../RUBRIC.md")
    shipped = set_dir.parent / "RUBRIC.md"
    shipped.unlink()
    shipped.symlink_to(tmp_path / "outside" / "secret.txt")
    (error,) = rubric_errors(set_dir)
    assert "field 'rubric': rubric '../RUBRIC.md' is outside the judgment set and its dataset folder" in error
    assert f"(a symlink to {(tmp_path / 'outside' / 'secret.txt').resolve()})" in error
    # Inside the set, a symlink to a folder outside: the same.
    set_dir = dataset(tmp_path / "again", "docs/secret.txt")
    (set_dir / "docs").symlink_to(tmp_path / "again" / "outside", target_is_directory=True)
    (error,) = rubric_errors(set_dir)
    assert "field 'rubric': rubric 'docs/secret.txt' is outside" in error


def test_rubrics_inside_the_set_or_its_dataset_folder_are_read(tmp_path):
    set_dir = dataset(tmp_path, "../RUBRIC.md")  # the shipped layout
    assert jmod.validate_version(set_dir)[1] == []
    for reference, place in [
        ("RUBRIC.md", set_dir / "RUBRIC.md"),
        ("../v0/RUBRIC.md", set_dir.parent / "v0" / "RUBRIC.md"),
        (str(set_dir.parent / "RUBRIC.md"), None),  # absolute, but inside the dataset folder
        ("link.md", set_dir / "link.md"),  # a symlink that stays inside
    ]:
        if place is not None and place.name == "link.md":
            place.symlink_to(set_dir.parent / "RUBRIC.md")
        elif place is not None:
            place.parent.mkdir(exist_ok=True)
            place.write_text("# Rubric\n")
        manifest = (set_dir / "manifest.yaml").read_text()
        current = re.search(r"^rubric: (.*)$", manifest, re.M).group(1)
        (set_dir / "manifest.yaml").write_text(
            manifest.replace(f"rubric: {current}", f"rubric: {json.dumps(reference)}")
        )
        judgment_set, errors = jmod.validate_version(set_dir)
        assert errors == [] and judgment_set.manifest.rubric == reference
    # Missing, but inside: the old message.
    set_dir = dataset(tmp_path / "missing", "../NOPE.md")
    assert rubric_errors(set_dir) == [
        f"{set_dir}/manifest.yaml:5: field 'rubric': rubric file '../NOPE.md' not found (relative to {set_dir})"
    ]


def test_the_judging_page_and_the_model_judge_refuse_such_a_set(tmp_path):
    """Both read the rubric of a loaded set: the manifest's check refuses it before anything is shown or sent."""
    from releval.judging import web

    set_dir = dataset(tmp_path, str(tmp_path / "outside" / "secret.txt"))
    with pytest.raises(InputError, match=r"manifest\.yaml:5: field 'rubric': .* is outside") as caught:
        web.open_desk(tmp_path / "project" / "data" / "judgments" / "v2", "alice", parent=set_dir)
    assert SECRET not in str(caught.value)

    config = tmp_path / "judge.yaml"  # nothing listens there: a request sent would fail differently
    config.write_text("kind: openai\nbase_url: http://127.0.0.1:9/v1\nmodel: m\ntemperature: 0\n")
    parser = argparse.ArgumentParser()
    judge_command.configure(parser)
    args = parser.parse_args(
        [str(set_dir.parent / "v2"), "--parent", str(set_dir), "--model", str(config)]
        + ["--queries", str(tmp_path / "q.jsonl"), "--corpus", str(tmp_path / "c.jsonl")]
    )
    with pytest.raises(InputError, match=r"manifest\.yaml:5: field 'rubric': .* is outside") as caught:
        model_judge.run(judge_command.model_judge_request(args))
    assert SECRET not in str(caught.value) and not (set_dir.parent / "v2").exists()
