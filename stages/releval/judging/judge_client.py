"""A minimal client of an OpenAI-compatible chat-completions endpoint (vLLM, llama.cpp server,
Ollama, a hosted API), on the standard library only.

``POST {base_url}/chat/completions`` with a JSON body; the reply's first choice's message content
is the answer. 429 and 5xx answers and connection failures are retried with exponential backoff
(a ``Retry-After`` header, when sent, is honoured up to a minute); any other HTTP error, an answer
that is not the expected JSON, or running out of retries is a :class:`JudgeEndpointError` naming
the URL.

Secrets stay out of every message: the key and a ``user:password@`` in ``base_url`` (sent as HTTP
basic authorization, never as part of the URL) are replaced by ``***`` in every error and answer
this client passes on (:meth:`ChatClient.redact`), and every URL it names is the one without userinfo.
"""

from __future__ import annotations

import base64
import http.client
import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
MAX_RETRY_AFTER_S = 60.0
MAX_ERROR_BODY = 1 << 20  # bytes of an error reply read (and redacted) before its first 300 characters are kept
REDACTED = "***"
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/?#\s]*@")  # up to the netloc's last '@', as urlsplit


class JudgeEndpointError(RuntimeError):
    """The endpoint could not be used: the message names the URL (without userinfo) and what went
    wrong, secrets redacted; ``status`` is the HTTP status of a refused request (None otherwise)."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


def without_userinfo(url: str) -> str:
    """``url`` with any ``user:password@`` removed (every URL a message or a record names)."""
    return _USERINFO.sub(r"\1", url)


def url_secrets(url: str) -> list[str]:
    """The secrets a URL's userinfo carries: the userinfo, the user, the password (raw and decoded)
    and the basic-authorization token made of them."""
    userinfo = _userinfo(url)
    if userinfo is None:
        return []
    user, _, password = userinfo.partition(":")
    decoded = [urllib.parse.unquote(part) for part in (userinfo, user, password)]
    return [userinfo, user, password, *decoded, basic_token(userinfo)]


def basic_token(userinfo: str) -> str:
    user, _, password = userinfo.partition(":")
    plain = f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password)}"
    return base64.b64encode(plain.encode("utf-8")).decode("ascii")


def _userinfo(url: str) -> str | None:
    netloc = urllib.parse.urlsplit(url).netloc
    return netloc.rpartition("@")[0] if "@" in netloc else None


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with each secret (as is, URL-quoted, JSON-escaped, with or without ``\\/``) and any URL
    userinfo replaced by ***."""
    forms = set()
    for secret in secrets:
        if secret:
            escaped = json.dumps(secret)[1:-1]
            forms |= {secret, urllib.parse.quote(secret, safe=""), escaped, escaped.replace("/", "\\/")}
    for form in sorted(forms, key=len, reverse=True):  # the longest first: a secret may contain another
        text = text.replace(form, REDACTED)
    return _USERINFO.sub(lambda m: m.group(1) + REDACTED + "@", text)


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
        """The endpoint's URL, without userinfo: where requests go and what messages name."""
        return without_userinfo(self.base_url).rstrip("/") + "/chat/completions"

    @property
    def secrets(self) -> list[str]:
        return [s for s in [self.api_key or "", *url_secrets(self.base_url)] if s]

    def redact(self, text: str) -> str:
        """``text`` without this client's key and userinfo (see :func:`redact`)."""
        return redact(text, self.secrets)

    def _error(self, message: str, status: int | None = None) -> JudgeEndpointError:
        return JudgeEndpointError(self.redact(message), status)

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
            shown = self.redact(json.dumps(reply))[:300]
            raise self._error(f"{self.url}: the reply has no choices[0].message.content: {shown}") from None
        if not isinstance(content, str):
            raise self._error(f"{self.url}: choices[0].message.content is {type(content).__name__}, not text")
        # The answer is recorded: no key an endpoint echoes, no lone surrogate that UTF-8 files cannot hold.
        return self.redact(content).encode("utf-8", "backslashreplace").decode("utf-8")

    def _post(self, data: bytes) -> Any:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        userinfo = _userinfo(self.base_url)
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        elif userinfo is not None:
            headers["Authorization"] = f"Basic {basic_token(userinfo)}"
        last = ""
        for attempt in range(self.retries + 1):
            request = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
            wait = self.backoff * (2**attempt)
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    raw = response.read()
            except urllib.error.HTTPError as exc:
                detail = self.redact(_error_text(exc))[:300]  # redacted before it is cut: no half key survives
                if exc.code not in RETRYABLE_STATUS:
                    raise self._error(f"{self.url}: HTTP {exc.code} {exc.reason}: {detail}", exc.code) from None
                last = f"HTTP {exc.code} {exc.reason}: {detail}"
                wait = _retry_after(exc.headers.get("Retry-After"), wait)
            except (OSError, http.client.HTTPException) as exc:  # URLError, timeouts, resets, a garbled reply
                last = f"{getattr(exc, 'reason', None) or exc or type(exc).__name__}"
            else:
                try:
                    return json.loads(raw.decode("utf-8"))
                except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                    shown = self.redact(raw.decode("utf-8", "replace"))[:200]
                    raise self._error(f"{self.url}: the reply is not JSON ({exc}): {shown!r}") from None
            if attempt < self.retries:
                self.sleep(wait)
        raise self._error(f"{self.url}: gave up after {self.retries + 1} attempts; last: {last}")


def _error_text(exc: urllib.error.HTTPError) -> str:
    try:
        return exc.read(MAX_ERROR_BODY).decode("utf-8", "replace")
    except Exception:  # the body is only used in the message
        return ""


def _retry_after(header: str | None, default: float) -> float:
    try:
        return min(max(float(header), 0.0), MAX_RETRY_AFTER_S) if header is not None else default
    except ValueError:
        return default
