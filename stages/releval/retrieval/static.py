"""Static embeddings: WordLlama's token-embedding table, averaged over a text's tokens.

A static model has no encoder network: a text's vector is the mean of its tokens' rows in one
embedding table. WordLlama (PyPI ``wordllama``, MIT) ships ``l2_supercat`` at 256 dimensions
inside its wheel: ``weights/l2_supercat_256.safetensors`` (32,000 x 256, stored float16, used
as float32) and ``tokenizers/l2_supercat_tokenizer_config.json`` (Llama-2's BPE with byte
fallback). What WordLlama does, read from its source (0.4.0.post1) and recorded by
:func:`static_protocol`:

* tokens: the tokenizer without special tokens (no ``<s>``), every space a ``▁``;
* no truncation: ``WordLlamaInference`` calls ``no_truncation()``, so every token of a text
  counts, however long (the model was trained on inputs cut at 256 tokens);
* pooling: the unweighted mean of the token rows (padding masked out); an input without tokens
  gives the zero vector.

Loading is offline: plain ``WordLlama.load()`` looks for the tokenizer under ``tokenizer/`` in
the package, which the wheel names ``tokenizers/``, and then downloads it; with the package
folder as ``cache_dir`` and downloads disabled it finds both files in the wheel.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import importlib.util
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from releval.errors import InputError
from releval.io import sha256_file
from releval.retrieval.models import ModelConfig

DISTRIBUTION = "wordllama"
TENSOR_KEY = "embedding.weight"
# Token count that stands for "never truncated" where a Truncation needs a length.
NO_TRUNCATION = sys.maxsize
TOKEN_BATCH = 1024


@dataclasses.dataclass(frozen=True)
class StaticModel:
    """A loaded WordLlama table, with the names and files it was loaded from."""

    config_name: str
    dim: int
    inference: Any  # wordllama.WordLlamaInference
    files: tuple[Path, ...]
    stored_dtype: str


def _wordllama():
    """Import wordllama without the ``logging.basicConfig(level=INFO)`` its modules run on import.

    The root logger's handlers and level are put back as they were, so importing a model library
    does not change what every other logger in the process prints.
    """
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        import wordllama
    except ImportError as exc:
        raise InputError(f"the wordllama package is not installed ({exc})", field="source") from None
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    return wordllama


def package_dir() -> Path:
    """The installed wordllama package folder (its wheel carries the weights and tokenizer)."""
    spec = importlib.util.find_spec(DISTRIBUTION)
    if spec is None or not spec.submodule_search_locations:
        raise InputError("the wordllama package is not installed", field="source")
    return Path(list(spec.submodule_search_locations)[0])


def library_version() -> str:
    return importlib.metadata.version(DISTRIBUTION)


def _model_uri(config_name: str):
    models = _wordllama().config.WordLlamaModels
    configs = models.list_configs()
    if config_name not in configs:
        raise InputError(f"unknown WordLlama config {config_name!r} (expected one of {configs})", field="source")
    return getattr(models, config_name)


def static_files(config_name: str, dim: int) -> list[Path]:
    """The files the model is made of, weights then tokenizer: what its revision hash covers."""
    uri = _model_uri(config_name)
    if dim not in uri.available_dims:
        raise InputError(
            f"WordLlama {config_name} has no dimension {dim} (expected one of {uri.available_dims})",
            field="dimension",
        )
    root = package_dir()
    files = [
        root / "weights" / _wordllama().WordLlama.get_filename(config_name, dim),
        root / "tokenizers" / uri.tokenizer_config,
    ]
    for path in files:
        if not path.is_file():
            raise InputError(
                f"wordllama=={library_version()} does not ship {config_name} at {dim} dimensions "
                f"(downloads are off); its wheel carries {_shipped(root)}",
                file=str(path),
                field="source",
            )
    return files


def _shipped(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "weights").glob("*.safetensors"))


def files_sha256(root: Path, files: Sequence[Path]) -> str:
    """One hash over ``files``: each one's path relative to ``root`` and content hash, in sorted order.

    :func:`releval.retrieval.models.weights_sha256` hashes every weight file of a folder; a static
    model is two named files of a package folder, the tokenizer (a ``.json``) among them.
    """
    digest = hashlib.sha256()
    for name, path in sorted((p.relative_to(root).as_posix(), p) for p in files):
        digest.update(name.encode())
        digest.update(bytes.fromhex(sha256_file(path)))
    return digest.hexdigest()


def static_weights_sha256(config_name: str, dim: int) -> str:
    """The model revision: the hash of its weight and tokenizer files."""
    return files_sha256(package_dir(), static_files(config_name, dim))


def static_revision(config_name: str, dim: int) -> str:
    return f"wordllama=={library_version()} {config_name} {dim}-d (weights and tokenizer shipped in the wheel)"


def load_static(config_name: str, dim: int, config: ModelConfig) -> StaticModel:
    """Load the table and tokenizer from the installed package; no network is attempted."""
    if config.dtype != "float32":
        raise InputError(
            "a static model computes in float32 (WordLlama upcasts its table)",
            file="params.yaml",
            field=f"models.{config.name}.dtype",
        )
    if any(device != "cpu" for device in config.devices):
        raise InputError(
            "a static model runs in numpy on the CPU; set devices: [cpu]",
            file="params.yaml",
            field=f"models.{config.name}.devices",
        )
    files = static_files(config_name, dim)
    wordllama = _wordllama()
    try:
        inference = wordllama.WordLlama.load(
            config=config_name, dim=dim, cache_dir=package_dir(), disable_download=True
        )
    except FileNotFoundError as exc:
        raise InputError(f"WordLlama could not load offline: {exc}", field="source") from None
    from safetensors import safe_open

    with safe_open(str(files[0]), framework="np") as fh:
        stored_dtype = str(fh.get_tensor(TENSOR_KEY).dtype)
    return StaticModel(config_name, dim, inference, tuple(files), stored_dtype)


def _prompted(texts: Sequence[str], prompt: str) -> list[str]:
    return [prompt + text for text in texts]


def encode_static(model: StaticModel, texts: Sequence[str], config: ModelConfig, role: str) -> np.ndarray:
    """``(n, dim)`` float32: WordLlama's ``embed`` under the protocol (prompt, batch size, normalisation).

    Normalised like sentence-transformers: a vector of norm 0 (a text without tokens) stays zero,
    where WordLlama's own ``norm=True`` divides by zero and gives NaN.
    """
    prompt = config.query_prompt if role == "query" else config.document_prompt
    vectors = model.inference.embed(_prompted(texts, prompt), norm=False, batch_size=config.batch_size)
    vectors = np.ascontiguousarray(vectors, dtype=np.float32).reshape(len(texts), model.dim)
    if config.normalize:
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
    return vectors


def static_token_lengths(model: StaticModel, texts: Sequence[str], prompt: str) -> np.ndarray:
    """Token count of each ``prompt + text`` as WordLlama tokenizes it (no special tokens, untruncated)."""
    lengths = np.empty(len(texts), dtype=np.int64)
    for start in range(0, len(texts), TOKEN_BATCH):
        # WordLlama's tokenizer pads each batch to its longest text: the mask counts the real tokens.
        encodings = model.inference.tokenize(_prompted(texts[start : start + TOKEN_BATCH], prompt))
        lengths[start : start + len(encodings)] = [sum(e.attention_mask) for e in encodings]
    return lengths


def static_protocol(model: StaticModel) -> dict[str, Any]:
    """What the loaded model does beyond its config, recorded next to every score."""
    tokenizer = model.files[1].name
    trained = getattr(_wordllama().Config, model.config_name, None)
    return {
        "family": "static",
        "library": f"wordllama=={library_version()}",
        "config": model.config_name,
        "dimension": int(model.inference.embedding.shape[1]),
        "vocabulary": int(model.inference.embedding.shape[0]),
        "stored_dtype": model.stored_dtype,
        "pooling": "mean of token embeddings (unweighted, padding masked)",
        "truncation": None,
        "trained_max_length": trained.tokenizer.max_length if trained is not None else None,
        "tokenizer": f"{tokenizer} (WordLlama's copy of the {model.config_name} tokenizer)",
        "special_tokens": False,
    }
