"""Each dataset's reports in their own folder: reports/ for the default dataset, reports/<name> for any other.

params.yaml's ``reports_dir`` (composed from conf/) is what dvc.yaml templates as ``${reports_dir}``
and what commands reading reports by default use (:func:`releval.config.reports_folder`), so that
`releval params dataset=...` never writes over another dataset's committed reports. Composition and
DVC's resolution of dvc.yaml are real; no stage runs.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from releval import composition, config, paths
from releval.errors import InputError
from support import ROOT
from support.commands import run
from support.projects import make_project

# A dataset of its own (name differs from its config's file name), so no test needs ../shared.
TINY_DATASET = """\
defaults:
  - /judgments@_global_.judgments: pydocs-v3
  - _self_
name: tiny-v1
corpus: {path: data/tiny/corpus.jsonl, format: jsonl}
queries: {path: data/tiny/queries.jsonl, format: releval}
subset: {docs: null, queries: null}
"""


def conf_with_tiny_dataset(dest: Path) -> Path:
    conf = dest / paths.CONF
    shutil.copytree(ROOT / paths.CONF, conf, ignore=shutil.ignore_patterns("overrides", "__pycache__"))
    (conf / "dataset" / "tiny.yaml").write_text(TINY_DATASET, encoding="utf-8")
    return conf


def composed_reports(conf: Path, params: Path, overrides: list[str]) -> str:
    composition.compose(conf, params, overrides, reset=True, discard_edits=True)
    return config.reports_folder(params)


def test_the_default_dataset_keeps_reports_and_any_other_gets_its_own_folder(tmp_path):
    conf, params = conf_with_tiny_dataset(tmp_path), tmp_path / paths.PARAMS
    assert composed_reports(conf, params, []) == paths.REPORTS
    assert composed_reports(conf, params, ["dataset=tiny"]) == "reports/tiny-v1"
    # Cranfield's files are not read when composing: its folder is known without ../shared.
    assert composed_reports(conf, params, ["dataset=cranfield-mini"]) == "reports/cranfield-mini"
    # DVC's own composer (`dvc exp run`) reads the same conf/ and so writes the same folder.
    assert yaml.safe_load(composition.compose_text(conf, ["dataset=tiny"]))[paths.REPORTS_DIR_KEY] == "reports/tiny-v1"


def test_a_report_folder_outside_reports_or_on_the_defaults_files_is_refused():
    assert paths.reports_folder({}) == paths.REPORTS  # params.yaml composed before the key existed
    for bad in ("elsewhere", "reports/../x", "reports/a/b", "/tmp/reports", "reports/plots", "reports/holdout", 3):
        with pytest.raises(InputError) as caught:
            paths.reports_folder({paths.REPORTS_DIR_KEY: bad}, source="params.yaml")
        assert caught.value.field == paths.REPORTS_DIR_KEY and caught.value.file == "params.yaml"


def test_no_params_file_means_the_default_folder(tmp_path):
    assert config.reports_folder(tmp_path / "absent.yaml") == paths.REPORTS


def dvc_outs(project: Path) -> set[str]:
    """Every stage output (metrics included) as `dvc status` resolves dvc.yaml: all are missing."""
    out = run(["dvc", "status", "--json"], project).stdout
    found = set()
    for changes in json.loads(out).values():
        for change in changes:
            if isinstance(change, dict):
                found.update((change.get("changed outs") or {}).keys())
    return found


def test_dvc_resolves_the_reports_paths_of_the_active_dataset(tmp_path):
    project = make_project(tmp_path / "project")
    shutil.rmtree(project / paths.CONF)
    conf_with_tiny_dataset(project)
    run(["releval", "params"], project)
    default = dvc_outs(project)
    assert {paths.METRICS, paths.QUALITY, paths.REPORT_MD, paths.PLOTS, paths.HISTORY} <= default
    run(["releval", "params", "dataset=tiny"], project)
    tiny = dvc_outs(project)
    moved = {paths.rebase(p, paths.REPORTS, "reports/tiny-v1").as_posix() for p in (paths.METRICS, paths.PLOTS)}
    assert moved <= tiny
    assert not {p for p in tiny if p.startswith(paths.REPORTS + "/") and not p.startswith("reports/tiny-v1/")}
    lock_free = run(["dvc", "stage", "list"], project).stdout
    assert "reports/tiny-v1/" in lock_free


def test_compare_reads_the_active_datasets_reports(tmp_path, capsys):
    from support.scored_project import Project, qids

    proj = Project(tmp_path)
    n = 12
    proj.write_reports({"a": {"ndcg@10": [0.5] * n}, "b": {"ndcg@10": [0.6] * n}}, qids(n))
    proj.write_queries(qids(n))
    (tmp_path / "reports" / "tiny-v1").mkdir()
    for name in ("metrics.json", "per_query.parquet"):
        (tmp_path / "reports" / name).rename(tmp_path / "reports" / "tiny-v1" / name)
    (tmp_path / paths.PARAMS).write_text(f"{paths.REPORTS_DIR_KEY}: reports/tiny-v1\n", encoding="utf-8")
    code, out, _ = proj.cli(capsys, "compare", "a", "b", "--resamples", "200")
    assert code == 0 and "1. candidate b vs baseline a" in out
    (tmp_path / paths.PARAMS).write_text(f"{paths.REPORTS_DIR_KEY}: reports\n", encoding="utf-8")
    code, _, err = proj.cli(capsys, "compare", "a", "b", "--resamples", "200")
    assert code == 2 and "reports/ holds no scores" in err
