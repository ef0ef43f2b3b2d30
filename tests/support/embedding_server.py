"""An OpenAI-compatible embedding server over real HTTP, serving a sentence-transformers folder.

Speaks the ``/v1/embeddings`` wire protocol (request ``{model, input: [...], dimensions?,
encoding_format?}``; response ``{object: "list", data: [{object: "embedding", index, embedding}],
model, usage: {prompt_tokens, total_tokens}}``) on 127.0.0.1 at a free port, in a thread of the
test's process. ``faults`` is a queue the test fills: each request takes the next fault, if any:

* ``"429"``: Too Many Requests with ``Retry-After``;
* ``"500"``: an internal error;
* ``"slow"``: the answer comes after ``slow_s`` seconds (past the client's timeout);
* ``"drop"``: the headers and half the body are sent, then the connection is closed.

It counts requests (every POST, faults included) and keeps every text it answered in time.
"""

from __future__ import annotations

import collections
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np


class EmbeddingServer:
    """``with EmbeddingServer(folder) as server:`` serves ``folder`` at ``server.base_url``."""

    def __init__(self, folder: str | Path, served_model: str = "all-MiniLM-L6-v2", api_key: str | None = None):
        from sentence_transformers import SentenceTransformer

        self.model = SentenceTransformer(str(folder), device="cpu", local_files_only=True)
        self.served_model = served_model
        self.api_key = api_key
        self.faults: collections.deque[str] = collections.deque()
        self.slow_s = 6.0
        self.retry_after = "0"
        self.requests = 0
        self.answered: list[str] = []  # every text answered, in order
        self.transform = None  # a function of the vectors: the test changes the model behind the name
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> "EmbeddingServer":
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    def embed(self, texts: list[str], dimensions: int | None) -> tuple[np.ndarray, int]:
        """The vectors the served model gives ``texts`` (cut to ``dimensions`` and renormalised, as
        OpenAI's models do), and their token count (special tokens included, untruncated)."""
        with self._lock:  # one forward pass at a time
            vectors = self.model.encode(texts, batch_size=len(texts), convert_to_numpy=True, show_progress_bar=False)
            tokens = sum(len(ids) for ids in self.model.tokenizer(texts, truncation=False)["input_ids"])
        if self.transform is not None:
            vectors = self.transform(vectors)
        if dimensions is not None and dimensions < vectors.shape[1]:
            vectors = vectors[:, :dimensions]
            vectors = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        return np.asarray(vectors, dtype=np.float32), tokens


def _handler(server: EmbeddingServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:  # quiet
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with server._lock:
                server.requests += 1
                fault = server.faults.popleft() if server.faults else None
            if self.path.rstrip("/") != "/v1/embeddings":
                return self._json(404, {"error": {"message": f"no route {self.path}"}})
            if server.api_key is not None and self.headers.get("Authorization") != f"Bearer {server.api_key}":
                # echoes what it got, as some servers do: the client must not repeat it
                return self._json(401, {"error": {"message": f"bad key: {self.headers.get('Authorization')}"}})
            if fault == "429":
                return self._json(429, {"error": {"message": "rate limited"}}, {"Retry-After": server.retry_after})
            if fault == "500":
                return self._json(500, {"error": {"message": "internal error"}})
            request = json.loads(body)
            texts = request["input"] if isinstance(request["input"], list) else [request["input"]]
            vectors, tokens = server.embed(texts, request.get("dimensions"))
            answer = {
                "object": "list",
                "data": [{"object": "embedding", "index": i, "embedding": v.tolist()} for i, v in enumerate(vectors)],
                "model": server.served_model,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
            if fault == "slow":  # the client has given up by now: nobody was answered
                time.sleep(server.slow_s)
                return self._send(200, json.dumps(answer).encode("utf-8"))
            payload = json.dumps(answer).encode("utf-8")
            if fault == "drop":
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload[: len(payload) // 2])
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True
                return
            with server._lock:
                server.answered.extend(texts)
            self._send(200, payload)

        def _json(self, status: int, obj, headers: dict[str, str] | None = None) -> None:
            self._send(status, json.dumps(obj).encode("utf-8"), headers)

        def _send(self, status: int, payload: bytes, headers: dict[str, str] | None = None) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (its timeout): nothing to answer

    return Handler
