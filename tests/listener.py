"""A local HTTP listener that must never see a request: the attack suites (queries, rule files)
point SERVICE and LOAD at it, and a control test proves that it would see one.

tests/conftest.py serves it as the fixture `listener`."""

from __future__ import annotations

import socketserver

#: What the listener answers: a SPARQL result a federated call would bring back.
LEAKED = b"LEAKED"


class Listener(socketserver.ThreadingTCPServer):
    """A TCP server on 127.0.0.1 (a free port) that records every connection in `seen`."""

    allow_reuse_address = True
    daemon_threads = True

    def __init__(self):
        self.seen: list[bytes] = []
        super().__init__(("127.0.0.1", 0), _Handler)

    def url(self, path: str = "query") -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/{path}"


class _Handler(socketserver.BaseRequestHandler):
    def handle(self):
        self.request.settimeout(2)
        try:
            data = self.request.recv(65536)
        except OSError:
            data = b""
        self.server.seen.append(data or b"<connection>")
        body = b'{"head":{"vars":["s"]},"results":{"bindings":[{"s":{"type":"literal","value":"' + LEAKED + b'"}}]}}'
        self.request.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/sparql-results+json\r\n"
                             b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
