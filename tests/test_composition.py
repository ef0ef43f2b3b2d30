"""params.yaml composed from conf/ keeps what the user configured, and refuses what it cannot honour.

Real Hydra composition (DVC's composer, as `dvc exp run` uses it) on a copy of the shipped conf/.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from dvc.utils.hydra import compose_and_dump

from releval.cli import main as cli_main
from releval.composition import RECORDED, check_composed, compose
from releval.errors import InputError
from support.projects import ROOT


@pytest.fixture
def project(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "conf", tmp_path / "conf")
    (tmp_path / "conf" / RECORDED).unlink(missing_ok=True)
    return tmp_path


def composed(project: Path) -> dict:
    return yaml.safe_load((project / "params.yaml").read_text(encoding="utf-8"))


def dvc_composed(project: Path, *overrides: str) -> dict:
    """What `dvc exp run -S ...` composes: DVC's Hydra integration over the same conf/."""
    out = project / "dvc-params.yaml"
    compose_and_dump(out, str(project / "conf"), None, "config", "", list(overrides))
    return yaml.safe_load(out.read_text(encoding="utf-8"))


def test_overrides_stick_for_make_repro_and_dvc_exp_run(project):
    conf, params = project / "conf", project / "params.yaml"
    compose(conf, params, ["grid.chunkings=[c256]", "fusions.rrf.k=30"])
    compose(conf, params)  # what `make repro` runs: no overrides given, the recorded ones kept
    assert composed(project)["grid"]["chunkings"] == ["c256"]
    assert composed(project)["fusions"]["rrf"]["k"] == 30
    from_dvc = dvc_composed(project, "models.minilm.batch_size=8")
    assert from_dvc["grid"]["chunkings"] == ["c256"] and from_dvc["fusions"]["rrf"]["k"] == 30
    assert from_dvc["models"]["minilm"]["batch_size"] == 8


def test_a_later_override_replaces_the_same_key_and_reset_forgets_all(project):
    conf, params = project / "conf", project / "params.yaml"
    compose(conf, params, ["grid.chunkings=[c256]", "fusions.rrf.k=30"])
    result = compose(conf, params, ["grid.chunkings=[c256,c512]"])
    assert result.overrides == ["fusions.rrf.k=30", "grid.chunkings=[c256,c512]"]
    assert composed(project)["grid"]["chunkings"] == ["c256", "c512"]
    compose(conf, params, reset=True)
    assert not (conf / RECORDED).exists()
    assert composed(project)["grid"]["chunkings"] == ["c256", "c512"]
    assert composed(project)["fusions"]["rrf"]["k"] == 60


def test_a_dataset_brings_its_judgments_and_a_group_can_be_added(project):
    conf, params = project / "conf", project / "params.yaml"
    compose(
        conf,
        params,
        [
            "dataset=cranfield-mini",
            "+model@models.mpnet=mpnet",
            "grid.models=[minilm,mpnet]",
            "~fused@grid.fused.splade_minilm",
        ],
    )
    params_doc = composed(project)
    assert params_doc["dataset"]["name"] == "cranfield-mini"
    assert params_doc["judgments"]["version"] == "cranfield-1"
    assert set(params_doc["models"]) == {"minilm", "e5small", "splade", "wordllama", "minilm_l3", "mpnet"}
    assert dvc_composed(project)["dataset"]["name"] == "cranfield-mini"


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("dataset=pydcs", "unknown dataset option 'pydcs'; did you mean 'pydocs' or 'pydocs-v2'?"),
        ("judgments=pydocs-v9", "unknown judgments option 'pydocs-v9'; did you mean"),
        ("grid.models=[minlm]", "unknown model 'minlm'; did you mean 'minilm' or 'minilm_l3'?"),
        ("grid.chunkings=[c265]", "unknown chunking 'c265'; did you mean 'c256'"),
        # the reranked and fused entries of c256 leave with it; the baseline must be chosen again
        ("grid.chunkings=[c512]", "unknown configuration 'minilm/c256'"),
        ("grid.chunkings=[c512]", "choose what reports compare against with 'grid.baseline=minilm/c512'"),
        ("grid.fusions=[rff]", "unknown fusion 'rff'; did you mean 'rrf'?"),
        ("grid.baseline=minilm/c999", "unknown configuration 'minilm/c999'"),
        ("grid.reranked.minilm-c256-e5.reranker=e6", "unknown reranker 'e6'; did you mean 'e5'?"),
        ("grid.reranked.minilm-c256-e5.run=model/minlm/c256", "unknown first-stage run 'minlm/c256'"),
        # the folder every model family's runs share was named dense/ before; the old path says what to write
        (
            "grid.reranked.minilm-c256-e5.run=dense/minilm/c256",
            "runs of models are under model/ now; write 'model/minilm/c256'",
        ),
        ("datasett=x", "unknown key under the top level 'datasett'; did you mean 'dataset'?"),
        ("grid.chunkingz=[c256]", "unknown key under grid 'chunkingz'; did you mean 'chunkings'?"),
    ],
)
def test_a_typo_is_one_error_with_the_closest_names_and_records_nothing(project, override, expected):
    conf, params = project / "conf", project / "params.yaml"
    compose(conf, params, ["fusions.rrf.k=30"])
    recorded = (conf / RECORDED).read_bytes()
    written = params.read_bytes()
    with pytest.raises(InputError) as caught:
        compose(conf, params, [override])
    assert expected in str(caught.value)
    assert "\n" not in str(caught.value)
    assert (conf / RECORDED).read_bytes() == recorded and params.read_bytes() == written


def test_the_command_prints_one_line_for_a_typo(project, monkeypatch, capsys):
    monkeypatch.chdir(project)
    assert cli_main(["params", "dataset=helpdsk"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown dataset option 'helpdsk'" in err


def test_params_edited_after_composing_are_never_silently_recomposed(project):
    conf, params = project / "conf", project / "params.yaml"
    compose(conf, params)
    params.write_text(params.read_text(encoding="utf-8").replace("k: 60", "k: 7"), encoding="utf-8")
    with pytest.raises(InputError, match=r"changed since it was composed from conf/ \(fusions\.rrf\.k\)"):
        compose(conf, params)
    compose(conf, params, discard_edits=True)
    assert composed(project)["fusions"]["rrf"]["k"] == 60


def test_a_params_file_dvc_composed_with_extra_overrides_is_an_edit_to_keep_or_drop(project):
    conf, params = project / "conf", project / "params.yaml"
    compose_and_dump(params, str(conf), None, "config", "", ["grid.chunkings=[c256]"])  # `dvc exp run -S`
    check_composed(params, conf)  # DVC composed it from conf/ as it is: nothing stale
    with pytest.raises(InputError, match=r"grid\.chunkings"):
        compose(conf, params)
    compose(conf, params, ["grid.chunkings=[c256]"], discard_edits=True)
    assert composed(project)["grid"]["chunkings"] == ["c256"]


def test_check_fails_after_a_conf_edit_until_recomposed(project):
    conf, params = project / "conf", project / "params.yaml"
    compose(conf, params)
    check_composed(params, conf)
    metric = conf / "metric" / "default.yaml"
    metric.write_text(metric.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"changed since this file was composed; run `make repro`"):
        check_composed(params, conf)
    compose(conf, params)
    check_composed(params, conf)


def test_a_group_entry_can_be_deleted_and_stays_deleted(project):
    conf, params = project / "conf", project / "params.yaml"
    remaining = ["minilm", "splade", "wordllama", "minilm_l3"]
    compose(
        conf, params, ["~model@models.e5small", f"grid.models=[{','.join(remaining)}]", "rerankers.e5.model=minilm"]
    )
    compose(conf, params)
    assert set(composed(project)["models"]) == set(remaining)
    assert set(dvc_composed(project)["models"]) == set(remaining)
    with pytest.raises(InputError, match="only a config group entry can be deleted"):
        compose(conf, params, ["~grid.baseline"])


def test_shrinking_the_grid_takes_the_entries_built_on_what_left(project, monkeypatch, capsys):
    """Seam 4 of issue 27: the README's own `releval params 'grid.models=[minilm]' 'grid.chunkings=[c256]'`
    failed ("unknown first-stage run 'splade/c256'"). The fusion of SPLADE leaves with SPLADE, recorded
    (so `dvc exp run` composes the same) and said; the reranked run of MiniLM c256 stays."""
    monkeypatch.chdir(project)
    assert cli_main(["params", "grid.models=[minilm]", "grid.chunkings=[c256]"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(
        "dropped grid.fused.splade_minilm: it is built on model/splade/c256, which the grid no longer makes "
        "(recorded as '~fused@grid.fused.splade_minilm'"
    )
    grid = composed(project)["grid"]
    assert (grid["models"], grid["chunkings"], grid["fused"]) == (["minilm"], ["c256"], {})
    assert list(grid["reranked"]) == ["minilm-c256-e5"]
    assert dvc_composed(project)["grid"] == grid
    assert cli_main(["params"]) == 0  # what make repro runs: kept, and nothing to drop again
    assert "dropped" not in capsys.readouterr().out and composed(project)["grid"] == grid


def test_the_documented_ways_to_drop_fusions_and_the_reranker(project):
    conf, params = project / "conf", project / "params.yaml"
    compose(conf, params, ["~grid.fused.splade_minilm"])
    assert composed(project)["grid"]["fused"] == {} and composed(project)["grid"]["reranked"]
    compose(conf, params, ["~grid.fused.splade_minilm"])  # dropped already: nothing more to record
    compose(conf, params, ["grid.reranked={}"])
    assert composed(project)["grid"]["reranked"] == {}
    assert dvc_composed(project)["grid"]["reranked"] == {}
    compose(conf, params, reset=True)
    compose(conf, params, ["~grid.reranked.minilm-c256-e5", "grid.fused={}"])
    assert composed(project)["grid"]["reranked"] == {} and composed(project)["grid"]["fused"] == {}


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("grid.reranked=null", "cannot take effect: the pipeline iterates over grid.reranked; to drop every entry"),
        ("grid.models=null", "cannot take effect"),
        ("~grid.reranked.nope", "unknown entry of grid.reranked 'nope' (known: minilm-c256-e5)"),
        ("grid.fusions={}", "cannot compose"),
    ],
)
def test_values_that_cannot_take_effect_are_refused(project, override, expected):
    """`grid.reranked=null` was accepted and dvc repro then failed in DVC's foreach; `grid.reranked={}`
    printed "wrote params.yaml" and changed nothing (Hydra merges a mapping)."""
    conf, params = project / "conf", project / "params.yaml"
    compose(conf, params)
    written = params.read_bytes()
    with pytest.raises(InputError) as caught:
        compose(conf, params, [override])
    assert expected in str(caught.value) and "\n" not in str(caught.value)
    assert params.read_bytes() == written and not (conf / RECORDED).exists()
