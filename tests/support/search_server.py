"""A small search service over real HTTP for the live-search tests: BM25 (releval's own,
releval.retrieval.bm25) over a corpus given by the test, answering as Elasticsearch does.

``POST /_search`` takes an Elasticsearch body, ``{"query": {"match": {"text": TEXT}}, "size": K}``
(or ``{"text": {"query": TEXT, "_name": QUERY_ID}}``, Elasticsearch's named query, which is how the
tests pass the query id), and answers ``{"took", "timed_out", "hits": {"total", "max_score",
"hits": [{"_index", "_id", "_score"}]}}``. ``GET /search?q=TEXT&size=K&qid=ID`` answers
``{"results": [{"id", "score"}]}``, a second shape.

The test injects faults per query id (``faults[qid]``: a list consumed one request at a time, each
an HTTP status such as 500 or 429, ``"slow"`` (sleeps past the client's timeout), ``"malformed"``
(a body that is not JSON), ``"drop"`` (closes the connection unanswered) or ``"nohits"`` (JSON
without the hit list); ``always[qid]`` is the same, every time) and reads what came in:
``received`` (query id, text, headers) in arrival order. ``token``: when set, a request without
``Authorization: Bearer <token>`` gets 401.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from releval.retrieval.bm25 import BM25Index, tokenize

SLOW_SECONDS = 1.5


class SearchServer:
    """BM25 over ``docs`` (id -> text) served on 127.0.0.1 (``port``; 0: an unused one), in a thread."""

    def __init__(self, docs: Mapping[str, str], token: str | None = None, port: int = 0):
        self.ids = list(docs)
        self.index = BM25Index.build([tokenize(docs[i]) for i in self.ids])
        self.token = token
        self.faults: dict[str, list] = {}
        self.always: dict[str, object] = {}
        self.received: list[tuple[str | None, str, dict[str, str]]] = []
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), _handler(self))
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> SearchServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def search(self, text: str, size: int) -> list[tuple[str, float]]:
        """The top ``size`` documents for ``text``, BM25 scores above 0, score descending."""
        indices, scores = self.index.top_k([tokenize(text)], size)
        return [(self.ids[i], float(s)) for i, s in zip(indices[0], scores[0]) if s > 0]

    def received_ids(self) -> list[str | None]:
        return [qid for qid, _, _ in self.received]

    def fault_for(self, query_id: str | None):
        with self.lock:
            if query_id in self.always:
                return self.always[query_id]
            queue = self.faults.get(query_id)
            return queue.pop(0) if queue else None


def _handler(server: SearchServer):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # quiet
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
                match = body["query"]["match"]["text"]
                text, qid = (match["query"], match.get("_name")) if isinstance(match, dict) else (match, None)
                size = int(body.get("size", 10))
            except (ValueError, KeyError, TypeError):
                self._send(400, {"error": "bad request"})
                return
            self._answer(qid, text, size, "es")

        def do_GET(self) -> None:
            parts = urllib.parse.urlsplit(self.path)
            args = dict(urllib.parse.parse_qsl(parts.query))
            if parts.path != "/search" or "q" not in args:
                self._send(404, {"error": "not found"})
                return
            self._answer(args.get("qid"), args["q"], int(args.get("size", 10)), "plain")

        def _answer(self, qid: str | None, text: str, size: int, shape: str) -> None:
            with server.lock:
                server.received.append((qid, text, dict(self.headers.items())))
            if server.token and self.headers.get("Authorization") != f"Bearer {server.token}":
                self._send(401, {"error": "unauthorized"})
                return
            fault = server.fault_for(qid)
            if isinstance(fault, int):
                self._send(fault, {"error": f"injected {fault}"}, {"Retry-After": "0"} if fault == 429 else {})
                return
            if fault == "slow":
                time.sleep(SLOW_SECONDS)
            if fault == "drop":
                self.close_connection = True
                self.connection.shutdown(2)
                return
            if fault == "malformed":
                self._send_bytes(200, b'{"hits": {"hits": [')
                return
            hits = server.search(text, size)
            if fault == "nohits":
                self._send(200, {"took": 1, "timed_out": False})
            elif shape == "es":
                es_hits = [{"_index": "docs", "_id": d, "_score": s} for d, s in hits]
                total = {"value": len(hits), "relation": "eq"}
                max_score = hits[0][1] if hits else None
                self._send(
                    200,
                    {"took": 1, "timed_out": False, "hits": {"total": total, "max_score": max_score, "hits": es_hits}},
                )
            else:
                self._send(200, {"results": [{"id": d, "score": s} for d, s in hits]})

        def _send(self, status: int, payload, headers: Mapping[str, str] | None = None) -> None:
            self._send_bytes(status, json.dumps(payload).encode("utf-8"), headers)

        def _send_bytes(self, status: int, data: bytes, headers: Mapping[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

    return Handler
