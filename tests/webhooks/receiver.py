"""A real HTTP receiver for webhook tests, on a loopback address in the test process.

The server runs on its own threads (``ThreadingHTTPServer``, one per connection). It counts
every TCP connection it accepts, before any byte is read, so a test can show that a refused
delivery sent nothing at all, and records every request. Answers come from ``answers``, a
queue of :class:`Answer` (status, headers, body, or ``hang`` to never answer), then
``default``. With ``tls`` (a server context) it speaks https and records the server name
each client asked for.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Answer:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b"ok"
    hang: bool = False  # accept the request and never answer (until the receiver stops)
    trickle: float = 0  # seconds between the body's bytes, sent one at a time


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    body: bytes


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, receiver: Receiver, address: tuple[str, int]) -> None:
        self.receiver = receiver
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, _Handler)

    def get_request(self) -> tuple[socket.socket, Any]:
        connection = super().get_request()
        with self.receiver.lock:
            self.receiver.connections += 1
        return connection


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep the test output quiet

    def do_POST(self) -> None:
        self._answer()

    def do_GET(self) -> None:
        self._answer()

    def _answer(self) -> None:
        receiver = self.server.receiver
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        received = Received(
            method=self.command,
            path=self.path,
            headers={name.lower(): value for name, value in self.headers.items()},
            body=body,
        )
        with receiver.lock:
            receiver.requests.append(received)
            answer = receiver.answers.pop(0) if receiver.answers else receiver.default
        if answer.hang:
            receiver.released.wait(30)
            return
        self.send_response(answer.status)
        for name, value in answer.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(answer.body)))
        self.end_headers()
        # The client may stop reading part way (the body cap, a timeout): expected.
        with contextlib.suppress(OSError):
            if answer.trickle:
                self._trickle(answer.body, answer.trickle)
            else:
                self.wfile.write(answer.body)

    def _trickle(self, body: bytes, interval: float) -> None:
        for index in range(len(body)):
            self.wfile.write(body[index : index + 1])
            self.wfile.flush()
            if self.server.receiver.released.wait(interval):
                return


class Receiver:
    """An HTTP server on ``host`` (port 0: any free one); ``url(path)`` addresses it."""

    def __init__(
        self, host: str = "127.0.0.1", port: int = 0, tls: ssl.SSLContext | None = None
    ) -> None:
        self.lock = threading.Lock()
        self.connections = 0
        self.server_names: list[str | None] = []  # the TLS server name of each handshake
        self.requests: list[Received] = []
        self.answers: list[Answer] = []
        self.default = Answer()
        self.released = threading.Event()
        self._server = _Server(self, (host, port))
        self.scheme = "https" if tls else "http"
        if tls is not None:
            tls.sni_callback = self._record_server_name
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
        self.host = host
        self.port: int = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def url(self, path: str = "/hook", host: str | None = None) -> str:
        host = host or self.host
        if ":" in host:
            host = f"[{host}]"
        return f"{self.scheme}://{host}:{self.port}{path}"

    def _record_server_name(self, _socket: Any, name: str | None, _context: Any) -> None:
        self.server_names.append(name)

    def start(self) -> Receiver:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.released.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


def running_receiver(
    host: str = "127.0.0.1", port: int = 0, tls: ssl.SSLContext | None = None
) -> Iterator[Receiver]:
    """A started receiver, stopped afterwards: the body of a pytest fixture."""
    receiver = Receiver(host, port, tls).start()
    try:
        yield receiver
    finally:
        receiver.stop()
