"""Untrusted files are read, never executed: no pickle, no remote code unless a config opts in,
no Hydra instantiation from data, no file named after a document id."""

import ast

import numpy as np
import pytest

from releval import io
from releval.provenance.card import declared_protocol
from releval.errors import InputError
from releval.retrieval.models import ModelConfig
from support import ROOT

STAGES = ROOT / "stages"


def calls_in_code():
    """(file, dotted call name, keyword names) for every call in the project's code."""
    for path in sorted(STAGES.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                yield path, ast.unparse(node.func), {k.arg: k.value for k in node.keywords}


def test_no_code_path_unpickles_or_instantiates_from_data():
    forbidden = {
        "pickle.load",
        "pickle.loads",
        "torch.load",
        "joblib.load",
        "instantiate",
        "hydra.utils.instantiate",
        "eval",
        "exec",
    }
    found = [(p.name, name) for p, name, _ in calls_in_code() if name in forbidden]
    assert found == []
    pickled = [
        (p.name, name)
        for p, name, kw in calls_in_code()
        if "allow_pickle" in kw
        and not (isinstance(kw["allow_pickle"], ast.Constant) and kw["allow_pickle"].value is False)
    ]
    assert pickled == []


def test_trust_remote_code_is_never_hard_wired_true():
    hard_wired = [
        (p.name, name)
        for p, name, kw in calls_in_code()
        if isinstance(kw.get("trust_remote_code"), ast.Constant) and kw["trust_remote_code"].value
    ]
    assert hard_wired == []


def test_trust_remote_code_is_opt_in_and_recorded():
    assert ModelConfig(name="m", source="path:x").trust_remote_code is False
    opted = ModelConfig(name="m", source="path:x", trust_remote_code=True)
    assert opted.protocol()["trust_remote_code"] is True
    assert declared_protocol({"query_prompt": ""})["trust_remote_code"] is False
    assert declared_protocol({"trust_remote_code": True})["trust_remote_code"] is True


def test_a_target_key_in_a_model_config_is_refused_not_instantiated():
    with pytest.raises(InputError, match="unknown key"):
        ModelConfig.from_params("m", {"source": "path:x", "_target_": "os.system"})


def test_embeddings_with_objects_are_refused(tmp_path):
    path = tmp_path / "embeddings.npy"
    np.save(path, np.array([{"payload": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match="allow_pickle"):
        io.read_npy(path)
