"""Live search: an external run taken from an HTTP search endpoint instead of a file.

An entry of ``externals`` with an ``endpoint:`` mapping names a search service (production
Elasticsearch, OpenSearch, a vendor API, a team's own service). The ``external`` stage sends it
every query of the scored split (dev: the sealed holdout is never sent unless `releval holdout`
opens it), one request per query, and keeps its answers as a snapshot run file in the run folder,
which is then checked and stored exactly as a declared run file is
(:func:`releval.retrieval.external.snapshot`). A live endpoint is not reproducible: the snapshot
is the run, and run.json records the endpoint, when the snapshot was taken, how many queries
were sent and a sha256 over the answers (canonical JSON).

Keys of ``endpoint`` (:data:`FIELDS`):

* ``url`` (http or https, no credentials in it), ``method`` (``GET`` or ``POST``, default POST);
* ``body`` (POST: the JSON body) and ``params`` (query-string parameters), templates in which
  ``{query}``, ``{query_id}`` and ``{k}`` are replaced: a string that is exactly one placeholder
  becomes the value itself (``"{k}"`` an integer), one inside a longer string is replaced as text;
* ``hits``: the path to the list of hits in a response (default ``hits.hits[*]``); ``id`` and
  ``score``: the paths within one hit to its document id and score (default ``_id``,
  ``_score``). A path is keys joined by dots, each optionally followed by list indexes ``[0]``;
  ``[*]`` (only at the end of ``hits``) says "this is the list"; ``[*]`` alone is a response
  that is itself the list. Keys holding a dot or a bracket cannot be named;
* ``k`` (hits kept per query, default 100), ``concurrency`` (requests in flight, default 4),
  ``timeout`` (seconds per request, default 10), ``retries`` (tries after the first on 429, 5xx,
  a timeout or a dropped connection, default 3) and ``backoff`` (seconds before the first retry,
  doubling; a 429's Retry-After is honoured up to 30 s; default 0.5);
* ``headers``: header name -> ``{env: VARIABLE, prefix: "Bearer "}``. Header values come from
  environment variables only: they are never written (params.yaml, run.json, the card, the
  snapshot) and every error message is redacted of them.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from releval.errors import InputError

FIELDS = (
    "url",
    "method",
    "body",
    "params",
    "hits",
    "id",
    "score",
    "k",
    "concurrency",
    "timeout",
    "retries",
    "backoff",
    "headers",
)
PLACEHOLDERS = ("query", "query_id", "k")
METHODS = ("GET", "POST")
ALL = "*"  # the step ``[*]``: the list itself
RETRY_AFTER_CAP = 30.0
SNAPSHOT_FORMATS = ("trec", "jsonl", "parquet")
TREC_TAG = "live"
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_STEP = re.compile(r"(?P<dot>\.)?(?P<key>[^.\[\]]+)|\[(?P<index>\d+|\*)\]")


class EndpointError(InputError):
    """The endpoint failed or answered something the entry's paths do not find: one line naming
    the query, and the HTTP status or the path."""


@dataclass(frozen=True)
class Endpoint:
    """The ``endpoint`` mapping of an external entry, checked."""

    url: str
    method: str = "POST"
    body: Any = None
    params: dict[str, Any] | None = None
    hits: str = "hits.hits[*]"
    id: str = "_id"
    score: str = "_score"
    k: int = 100
    concurrency: int = 4
    timeout: float = 10.0
    retries: int = 3
    backoff: float = 0.5
    headers: dict[str, dict[str, str]] = field(default_factory=dict)  # name -> {env, prefix}

    def record(self) -> dict[str, Any]:
        """What run.json and declared.json say of it: everything declared (headers by variable
        name, never a value)."""
        return {name: getattr(self, name) for name in FIELDS}


# --------------------------------------------------------------------------- the declaration


def endpoint(value: Any, where: str, source: str = "params.yaml") -> Endpoint:
    """``<where>.endpoint`` checked: one InputError naming the key otherwise."""
    at = f"{where}.endpoint"
    if not isinstance(value, Mapping):
        raise InputError(f"expected a mapping of {', '.join(FIELDS)}", file=source, field=at)
    unknown = sorted(set(value) - set(FIELDS))
    if unknown:
        raise InputError(f"unknown key; keys: {', '.join(FIELDS)}", file=source, field=f"{at}.{unknown[0]}")
    url = value.get("url")
    parsed = urllib.parse.urlsplit(url) if isinstance(url, str) else None
    if parsed is None or parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise InputError("an http:// or https:// URL", file=source, field=f"{at}.url")
    if parsed.username or parsed.password:
        raise InputError(
            "no credentials in the URL: declare a header whose value comes from an environment variable",
            file=source,
            field=f"{at}.url",
        )
    method = str(value.get("method", "POST")).upper()
    if method not in METHODS:
        raise InputError(f"expected one of {', '.join(METHODS)}", file=source, field=f"{at}.method")
    body, params = value.get("body"), value.get("params")
    if body is not None and method == "GET":
        raise InputError("a GET request has no body: use params", file=source, field=f"{at}.body")
    if params is not None and not isinstance(params, Mapping):
        raise InputError("a mapping of query-string parameters", file=source, field=f"{at}.params")
    for name, template in (("body", body), ("params", params)):
        for text in _strings(template):
            for placeholder in _PLACEHOLDER.findall(text):
                if placeholder not in PLACEHOLDERS:
                    raise InputError(
                        f"unknown placeholder {{{placeholder}}}; placeholders: "
                        + ", ".join(f"{{{p}}}" for p in PLACEHOLDERS),
                        file=source,
                        field=f"{at}.{name}",
                    )
    if not any("{query}" in text for text in (*_strings(body), *_strings(params))):
        raise InputError("the request must carry {query} (in body or params)", file=source, field=f"{at}.body")
    paths = {}
    for name, default in (("hits", "hits.hits[*]"), ("id", "_id"), ("score", "_score")):
        paths[name] = value.get(name, default)
        parse_path(paths[name], allow_all=name == "hits", source=source, field=f"{at}.{name}")
    numbers = {
        "k": _number(value, "k", 100, int, 1, source, at),
        "concurrency": _number(value, "concurrency", 4, int, 1, source, at),
        "timeout": float(_number(value, "timeout", 10.0, float, 0, source, at)),
        "retries": _number(value, "retries", 3, int, 0, source, at),
        "backoff": float(_number(value, "backoff", 0.5, float, 0, source, at)),
    }
    if numbers["timeout"] <= 0:
        raise InputError("a number of seconds > 0", file=source, field=f"{at}.timeout")
    headers = {}
    for name, spec in (value.get("headers") or {}).items():
        key = f"{at}.headers.{name}"
        if not isinstance(spec, Mapping) or set(spec) - {"env", "prefix"} or not isinstance(spec.get("env"), str):
            raise InputError(
                "{env: VARIABLE, prefix: '...'}: a header's value comes from an environment variable, never the config",
                file=source,
                field=key,
            )
        headers[str(name)] = {"env": spec["env"], "prefix": str(spec.get("prefix") or "")}
    return Endpoint(
        url=url,
        method=method,
        body=_plain(body),
        params=_plain(params),
        **paths,
        **numbers,
        headers=headers,
    )


def _number(value: Mapping, name: str, default, kind: type, least: float, source: str, at: str):
    number = value.get(name, default)
    if isinstance(number, bool) or not isinstance(number, (int, float) if kind is float else int) or number < least:
        what = "a whole number" if kind is int else "a number"
        raise InputError(f"{what} >= {least}, got {number!r}", file=source, field=f"{at}.{name}")
    return number


def _plain(value: Any) -> Any:
    """A template as plain dicts and lists (OmegaConf containers and tuples included)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _strings(template: Any) -> list[str]:
    if isinstance(template, str):
        return [template]
    if isinstance(template, Mapping):
        return [s for v in template.values() for s in _strings(v)]
    if isinstance(template, (list, tuple)):
        return [s for v in template for s in _strings(v)]
    return []


def render(template: Any, values: Mapping[str, Any]) -> Any:
    """``template`` with ``{query}``, ``{query_id}`` and ``{k}`` replaced (see the module docstring)."""
    if isinstance(template, str):
        whole = _PLACEHOLDER.fullmatch(template)
        if whole and whole.group(1) in values:
            return values[whole.group(1)]
        return _PLACEHOLDER.sub(lambda m: str(values.get(m.group(1), m.group(0))), template)
    if isinstance(template, Mapping):
        return {k: render(v, values) for k, v in template.items()}
    if isinstance(template, list):
        return [render(v, values) for v in template]
    return template


# --------------------------------------------------------------------------- paths into a response


def parse_path(text: Any, *, allow_all: bool = False, source: str = "params.yaml", field: str = "path") -> tuple:
    """``hits.hits[*]`` -> ``("hits", "hits", "*")``: keys (str), list indexes (int) and, last,
    :data:`ALL`. An InputError naming ``field`` when it is not such a path."""
    if not isinstance(text, str) or not text:
        raise InputError("a path such as hits.hits[*] or _source.doc_id", file=source, field=field)
    steps: list[Any] = []
    position = 0
    while position < len(text):
        match = _STEP.match(text, position)
        if match is None or (match.group("dot") and not steps) or (steps and match.group("key") and not match["dot"]):
            raise InputError(
                f"not a path at {text[position:]!r}: keys joined by '.', each with optional [N] or a final [*]",
                file=source,
                field=field,
            )
        index = match.group("index")
        steps.append(match.group("key") if index is None else (ALL if index == ALL else int(index)))
        position = match.end()
    if ALL in steps[:-1] or (steps[-1] == ALL and not allow_all):
        raise InputError("[*] only ends the path to the hit list", file=source, field=field)
    return tuple(steps)


class _Missing(Exception):
    pass


def resolve(value: Any, steps: Sequence[Any]) -> Any:
    """The value at ``steps`` in ``value``; :class:`_Missing` when a step finds nothing."""
    for step in steps:
        if step == ALL:
            if not isinstance(value, list):
                raise _Missing
        elif isinstance(step, int):
            if not isinstance(value, list) or step >= len(value):
                raise _Missing
            value = value[step]
        else:
            if not isinstance(value, Mapping) or step not in value:
                raise _Missing
            value = value[step]
    return value


# --------------------------------------------------------------------------- asking the endpoint


def secret_headers(spec: Endpoint, where: str) -> dict[str, str]:
    """The declared headers with their values read from the environment (never written)."""
    headers = {}
    for name, header in spec.headers.items():
        value = os.environ.get(header["env"])
        if not value:
            raise InputError(
                f"environment variable {header['env']} is not set (the header's value comes from it)",
                field=f"{where}.endpoint.headers.{name}",
            )
        headers[name] = header["prefix"] + value
    return headers


def redact(text: str, secrets: Sequence[str]) -> str:
    for secret in sorted(secrets, key=len, reverse=True):
        if secret:
            text = text.replace(secret, "***")
    return text


@dataclass(frozen=True)
class Snapshot:
    """The endpoint's answers: ``rows`` (query_id, doc_id, score, rank as the endpoint ranked) and
    the record run.json keeps."""

    rows: list[tuple[str, str, float, int]]
    record: dict[str, Any]


def take(spec: Endpoint, queries: Sequence[tuple[str, str]], where: str) -> Snapshot:
    """Send every ``(query_id, text)`` of ``queries`` and read its hits; an :class:`EndpointError`
    naming the first query (in ``queries`` order) that failed after its retries."""
    headers = secret_headers(spec, where)
    secrets = list(headers.values()) + [h.split(" ", 1)[-1] for h in headers.values()]
    paths = {name: parse_path(getattr(spec, name), allow_all=name == "hits") for name in ("hits", "id", "score")}
    taken_at = datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=spec.concurrency) as pool:
        futures = [pool.submit(_ask, spec, headers, secrets, where, qid, text) for qid, text in queries]
        try:
            responses = [future.result() for future in futures]
        except BaseException:
            pool.shutdown(cancel_futures=True)
            raise
    rows: list[tuple[str, str, float, int]] = []
    for (query_id, _), response in zip(queries, responses):
        rows.extend(_hits(spec, paths, response, query_id, where))
    canonical = json.dumps(
        [[qid, response] for (qid, _), response in zip(queries, responses)],
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    )
    record = {
        "live": True,
        **spec.record(),
        "taken_at": taken_at,
        "seconds": round(time.perf_counter() - started, 3),
        "queries_sent": len(queries),
        "hits": len(rows),
        "responses_sha256": hashlib.sha256(canonical.encode("utf-8")).hexdigest(),
    }
    return Snapshot(rows, record)


def _fail(spec: Endpoint, where: str, secrets: Sequence[str], message: str) -> EndpointError:
    return EndpointError(redact(message, secrets), file=redact(spec.url, secrets), field=f"{where}.endpoint")


def _ask(spec: Endpoint, headers: Mapping[str, str], secrets: Sequence[str], where: str, query_id: str, text: str):
    """One query's parsed JSON answer, retried on 429, 5xx, timeouts and dropped connections."""
    values = {"query": text, "query_id": query_id, "k": spec.k}
    url = spec.url
    if spec.params:
        query = urllib.parse.urlencode({k: _param(v) for k, v in render(spec.params, values).items()})
        url += ("&" if urllib.parse.urlsplit(url).query else "?") + query
    data = None
    sent = {"Accept": "application/json", **headers}
    if spec.method == "POST":
        data = json.dumps(render(spec.body, values) if spec.body is not None else {}).encode("utf-8")
        sent["Content-Type"] = "application/json"
    tries = spec.retries + 1
    for attempt in range(tries):
        wait = spec.backoff * 2**attempt
        try:
            request = urllib.request.Request(url, data=data, headers=sent, method=spec.method)
            with urllib.request.urlopen(request, timeout=spec.timeout) as response:
                payload = response.read()
                status = response.status
        except urllib.error.HTTPError as error:
            status = error.code
            retry_after = error.headers.get("Retry-After") if error.headers else None
            error.close()
            if status != 429 and status < 500:
                raise _fail(spec, where, secrets, f"query {query_id!r}: HTTP {status}") from None
            if retry_after and retry_after.strip().replace(".", "", 1).isdigit():
                wait = min(float(retry_after), RETRY_AFTER_CAP)
            what = f"HTTP {status}"
        except (urllib.error.URLError, TimeoutError, ConnectionError, http.client.HTTPException) as error:
            reason = getattr(error, "reason", error)
            what = "timed out" if isinstance(reason, TimeoutError) else f"no answer ({type(reason).__name__})"
        else:
            try:
                return json.loads(payload.decode("utf-8"))
            except (UnicodeDecodeError, ValueError):
                message = f"query {query_id!r}: HTTP {status}, the answer is not JSON"
                raise _fail(spec, where, secrets, message) from None
        if attempt + 1 < tries:
            time.sleep(wait)
    raise _fail(spec, where, secrets, f"query {query_id!r}: {what} after {tries} tries")


def _param(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _hits(spec: Endpoint, paths: Mapping[str, tuple], response: Any, query_id: str, where: str):
    at = f"{where}.endpoint"
    try:
        hits = resolve(response, paths["hits"])
    except _Missing:
        raise EndpointError(
            f"query {query_id!r}: the answer has no {spec.hits}", file=spec.url, field=f"{at}.hits"
        ) from None
    if not isinstance(hits, list):
        raise EndpointError(
            f"query {query_id!r}: {spec.hits} is not a list of hits", file=spec.url, field=f"{at}.hits"
        ) from None
    rows = []
    for number, hit in enumerate(hits[: spec.k], start=1):
        try:
            doc_id, score = resolve(hit, paths["id"]), resolve(hit, paths["score"])
        except _Missing:
            missing = "id" if _has(hit, paths["id"]) is False else "score"
            raise EndpointError(
                f"query {query_id!r}: hit {number} has no {getattr(spec, missing)}",
                file=spec.url,
                field=f"{at}.{missing}",
            ) from None
        if isinstance(doc_id, bool) or not isinstance(doc_id, (str, int)):
            raise EndpointError(
                f"query {query_id!r}: hit {number}'s {spec.id} is not an id ({doc_id!r})",
                file=spec.url,
                field=f"{at}.id",
            )
        if isinstance(score, bool) or not isinstance(score, (int, float)):
            raise EndpointError(
                f"query {query_id!r}: hit {number}'s {spec.score} is not a number ({score!r})",
                file=spec.url,
                field=f"{at}.score",
            )
        rows.append((query_id, str(doc_id), float(score), number))
    return rows


def _has(value: Any, steps: tuple) -> bool:
    try:
        resolve(value, steps)
    except _Missing:
        return False
    return True


# --------------------------------------------------------------------------- the snapshot file


def write_snapshot(path: Path, rows: Sequence[tuple[str, str, float, int]], format: str, where: str) -> None:
    """The rows as a run file of ``format`` (ranks as the endpoint ranked), at ``path`` as it is
    (the caller writes a temporary file and renames it)."""
    if format == "parquet":
        import polars as pl

        columns = list(zip(*rows)) or [[], [], [], []]
        frame = pl.DataFrame(
            {"query_id": columns[0], "doc_id": columns[1], "score": columns[2], "rank": columns[3]},
            schema={"query_id": pl.String, "doc_id": pl.String, "score": pl.Float64, "rank": pl.Int64},
        )
        frame.write_parquet(path, statistics=False, compression="zstd")
        return
    lines = []
    for query_id, doc_id, score, rank in rows:
        if format == "jsonl":
            record = {"query_id": query_id, "doc_id": doc_id, "score": score, "rank": rank}
            lines.append(json.dumps(record, ensure_ascii=False))
            continue
        if not doc_id or any(c.isspace() for c in doc_id) or any(c.isspace() for c in query_id):
            raise InputError(
                f"query {query_id!r}: id {doc_id!r} cannot be one TREC field; declare format: parquet",
                field=f"{where}.format",
            )
        lines.append(f"{query_id} Q0 {doc_id} {rank} {score!r} {TREC_TAG}")
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
