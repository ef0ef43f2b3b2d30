"""The endpoint family: a model served behind an OpenAI-compatible ``/v1/embeddings`` endpoint, searched
as dense vectors; the client, the probe and the settings are :mod:`releval.retrieval.endpoint`."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from releval.errors import InputError
from releval.retrieval.endpoint import REMOTE, EndpointClient, apportion, cost, load_tokenizer, probe_terms
from releval.retrieval.families import Family
from releval.retrieval.models import ModelConfig


class EndpointFamily(Family):
    name = "endpoint"
    torch_kernels = False  # the server computes; its model's identity is the probe's hash
    accelerators = False
    own_sources = ("endpoint",)
    sources_rule = "the endpoint family takes an endpoint:<base_url> source and an endpoint mapping, and only it does"
    remote = True

    def __init__(self, config: ModelConfig, manifest: dict[str, Any], client: EndpointClient, tokenizer: Any = None):
        super().__init__(config, manifest)
        self.client, self.tokenizer = client, tokenizer
        self.prompt_tokens = 0  # tokens the endpoint billed (usage, else counted) for texts sent by this encoder
        self.texts_sent = 0

    @classmethod
    def check_config(cls, config: ModelConfig, where: str) -> None:
        if not (isinstance(config.endpoint, dict) and config.endpoint.get("model")):
            raise InputError(
                "name the model the endpoint serves", file="params.yaml", field=f"{where}.endpoint.model"
            )  # the rest of the mapping is checked where it is used (releval.retrieval.endpoint)

    @classmethod
    def load(cls, manifest: dict[str, Any], config: ModelConfig, sleep=time.sleep) -> "EndpointFamily":
        """Connect and embed the probe; refuse when the endpoint no longer serves the recorded model."""
        client = EndpointClient(config, sleep=sleep)
        settings = client.settings
        tokenizer = load_tokenizer(settings.tokenizer) if settings.tokenizer else None
        now, recorded = probe_terms(config, client), manifest.get("endpoint") or {}
        changed = [key for key in now if now[key] != recorded.get(key)]
        if changed:
            raise InputError(
                f"the endpoint no longer serves the model its stored vectors came from ({', '.join(changed)}: "
                f"{recorded.get(changed[0])!r} recorded, {now[changed[0]]!r} now); "
                "rerun the `model` stage to record the new one",
                file="params.yaml",
                field=f"models.{config.name}.endpoint",
            )
        return cls(config, manifest, client, tokenizer)

    @classmethod
    def protocol(cls, config: ModelConfig) -> dict[str, Any]:
        """No weights: where it is served, and that it is remote."""
        return {
            "family": "endpoint",
            "endpoint": config.source.partition(":")[2].rstrip("/"),
            "model": config.endpoint["model"],
            "dimensions": config.endpoint.get("dimensions"),
            "query_prompt": config.query_prompt,
            "document_prompt": config.document_prompt,
            "normalize": config.normalize,
            "max_seq_length": config.max_seq_length,
            "remote": REMOTE,
        }

    @classmethod
    def computed_tokens_cap(cls, config: ModelConfig) -> int | None:
        return None  # billed for every token sent, whatever the server cuts

    @classmethod
    def namespace_terms(cls, manifest: dict[str, Any], config: ModelConfig) -> dict[str, Any]:
        """No weights: the served model's identity the `model` stage probed."""
        return {
            **manifest["endpoint"],  # endpoint, served model id, dimensions, normalisation, probe hash
            "family": "endpoint",
            "max_seq_length": config.max_seq_length,
        }

    @classmethod
    def encode_figures(
        cls, config: ModelConfig, lengths: np.ndarray, keys: np.ndarray, loaded: "EndpointFamily | None"
    ) -> dict[str, Any]:
        """An encode cell's endpoint figures: the tokens of its distinct texts (what indexing the corpus
        is billed for, whichever run sent them), what this run sent (none when the store had every
        vector), and both in money where the config declares a price (absent, not 0, where it does not)."""
        _, first = np.unique(keys, axis=0, return_index=True)  # each distinct text once: it is sent once
        index_tokens = int(np.asarray(lengths, dtype=np.int64)[first].sum())
        sent = (
            loaded.figures()
            if loaded is not None
            else {"requests": 0, "retried": {}, "texts_sent": 0, "tokens_sent": 0}
        )
        figures: dict[str, Any] = {"index_tokens": index_tokens, "endpoint": sent}
        if config.price_per_million_tokens is not None:
            figures["price_per_million_tokens"] = float(config.price_per_million_tokens)
            figures["index_cost"] = cost(config, index_tokens)
            sent["cost"] = cost(config, sent["tokens_sent"])
        return figures

    @classmethod
    def query_cost_figures(cls, config: ModelConfig, lengths: np.ndarray) -> dict[str, Any]:
        """1,000 queries of the mean token count of ``lengths`` (the queries' tokens as the endpoint
        counted them), where the config declares a price."""
        if config.price_per_million_tokens is None or not len(lengths):
            return {}
        return {"query_cost_per_1k": cost(config, int(np.sum(lengths)) * 1000 / len(lengths))}

    def token_lengths(self, texts: Sequence[str], role: str) -> np.ndarray:
        """Each text's token count under the declared tokenizer (prompt and special tokens included);
        without one, a rough count of characters / 4."""
        prompt = self.prompt(role)
        if self.tokenizer is None:
            return np.asarray([max(1, len(prompt + t) // 4) for t in texts], dtype=np.int64)
        ids = self.tokenizer([prompt + t for t in texts], add_special_tokens=True, truncation=False, verbose=False)
        return np.asarray([len(x) for x in ids["input_ids"]], dtype=np.int64)

    def encode(self, texts: Sequence[str], role: str) -> np.ndarray:
        """Vectors of ``texts`` (float32, L2-normalised when the config says so), batch by batch."""
        if not texts:
            return np.empty((0, self.manifest["endpoint"]["dimensions"]), dtype=np.float32)
        return np.concatenate([vectors for _, vectors, _ in self.batches(texts, role)])

    def batches(self, texts: Sequence[str], role: str) -> Iterator[tuple[slice, np.ndarray, np.ndarray]]:
        """(rows, vectors, billed tokens per text) of each answered batch of ``batch_size`` texts."""
        prompt = self.prompt(role)
        for start in range(0, len(texts), self.config.batch_size):
            rows = slice(start, min(start + self.config.batch_size, len(texts)))
            batch = [prompt + t for t in texts[rows]]
            counted = self.token_lengths(texts[rows], role)
            answer = self.client.embed(batch, int(counted.sum()))
            if answer.prompt_tokens is None and self.tokenizer is None and self.config.price_per_million_tokens:
                raise InputError(
                    "the endpoint reports no usage.prompt_tokens: declare endpoint.tokenizer to count the tokens "
                    "that price_per_million_tokens is charged on",
                    file="params.yaml",
                    field=f"models.{self.config.name}.endpoint.tokenizer",
                )
            billed = counted if answer.prompt_tokens is None else apportion(answer.prompt_tokens, counted)
            vectors = answer.vectors
            if self.config.normalize:
                norms = np.linalg.norm(vectors.astype(np.float64), axis=1, keepdims=True)
                vectors = (vectors / np.where(norms > 0, norms, 1.0)).astype(np.float32)
            self.prompt_tokens += int(billed.sum())
            self.texts_sent += len(batch)
            yield rows, np.ascontiguousarray(vectors, dtype=np.float32), billed

    def encode_to_store(self, store, keys: np.ndarray, texts: Sequence[str], role: str, on_encoded) -> np.ndarray:
        """Encode ``texts`` (whose sha256 ``keys`` the store lacks), each answered batch added to
        ``store`` as a shard at once; returns each text's billed tokens, the shards' ``lengths``."""
        lengths = np.zeros(len(texts), dtype=np.int64)
        for rows, vectors, billed in self.batches(texts, role):
            store.add(keys[rows], vectors, billed, self.module_protocol())
            lengths[rows] = billed
            on_encoded(len(vectors))
        return lengths

    def module_protocol(self) -> dict[str, Any]:
        """What identifies the served model (the manifest's probe terms) and that it is remote."""
        return {**self.manifest["endpoint"], "remote": REMOTE}

    def figures(self) -> dict[str, Any]:
        """What this encoder sent: requests (retries included), why some were sent again, texts, tokens."""
        return {
            "requests": self.client.requests,
            "retried": dict(sorted(self.client.retried.items())),
            "texts_sent": self.texts_sent,
            "tokens_sent": self.prompt_tokens,
        }


FAMILY = EndpointFamily
