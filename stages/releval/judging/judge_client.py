"""A minimal client of an OpenAI-compatible chat-completions endpoint (vLLM, llama.cpp server,
Ollama, a hosted API), on the standard library only.

``POST {base_url}/chat/completions`` with a JSON body; the reply's first choice's message content
is the answer. 429 and 5xx answers and connection failures are retried with exponential backoff
(a ``Retry-After`` header, when sent, is honoured up to a minute); any other HTTP error, an answer
that is not the expected JSON, or running out of retries is a :class:`JudgeEndpointError` naming
the URL.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any, Callable, Sequence

RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
MAX_RETRY_AFTER_S = 60.0


class JudgeEndpointError(RuntimeError):
    """The endpoint could not be used: the message names the URL and what went wrong."""


@dataclass(frozen=True)
class ChatClient:
    base_url: str
    model: str
    api_key: str | None = None
    timeout: float = 120.0
    retries: int = 5  # retries after the first attempt
    backoff: float = 1.0  # seconds before the first retry; doubled after each
    sleep: Callable[[float], None] = time.sleep

    @property
    def url(self) -> str:
        return self.base_url.rstrip("/") + "/chat/completions"

    def request_body(
        self, messages: Sequence[dict[str, str]], *, temperature: float, seed: int | None, max_tokens: int | None
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": list(messages), "temperature": temperature}
        if seed is not None:
            body["seed"] = seed
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        return body

    def complete(
        self,
        messages: Sequence[dict[str, str]],
        *,
        temperature: float = 0.0,
        seed: int | None = None,
        max_tokens: int | None = None,
    ) -> str:
        """The text of the first choice's message for ``messages``."""
        body = self.request_body(messages, temperature=temperature, seed=seed, max_tokens=max_tokens)
        reply = self._post(json.dumps(body).encode("utf-8"))
        try:
            content = reply["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise JudgeEndpointError(
                f"{self.url}: the reply has no choices[0].message.content: {json.dumps(reply)[:300]}"
            ) from None
        if not isinstance(content, str):
            raise JudgeEndpointError(f"{self.url}: choices[0].message.content is {type(content).__name__}, not text")
        return content

    def _post(self, data: bytes) -> Any:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        last = ""
        for attempt in range(self.retries + 1):
            request = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
            wait = self.backoff * (2**attempt)
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    raw = response.read()
            except urllib.error.HTTPError as exc:
                detail = _error_text(exc)
                if exc.code not in RETRYABLE_STATUS:
                    raise JudgeEndpointError(f"{self.url}: HTTP {exc.code} {exc.reason}: {detail}") from None
                last = f"HTTP {exc.code} {exc.reason}: {detail}"
                wait = _retry_after(exc.headers.get("Retry-After"), wait)
            except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
                last = f"{getattr(exc, 'reason', exc)}"
            else:
                try:
                    return json.loads(raw.decode("utf-8"))
                except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                    raise JudgeEndpointError(f"{self.url}: the reply is not JSON ({exc}): {raw[:200]!r}") from None
            if attempt < self.retries:
                self.sleep(wait)
        raise JudgeEndpointError(f"{self.url}: gave up after {self.retries + 1} attempts; last: {last}")


def _error_text(exc: urllib.error.HTTPError) -> str:
    try:
        return exc.read().decode("utf-8", "replace")[:300]
    except Exception:  # the body is only used in the message
        return ""


def _retry_after(header: str | None, default: float) -> float:
    try:
        return min(max(float(header), 0.0), MAX_RETRY_AFTER_S) if header is not None else default
    except ValueError:
        return default
