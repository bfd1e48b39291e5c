"""An HTTPS server on 127.0.0.1 that serves documents the way callers' stores might, and
some the way hostile or broken ones would: redirects, endless streams, a trickle.

Its certificate is self-signed, made with openssl for the test, and written where
PAGEMILL_SOURCE_FETCH_CA_BUNDLE points (tests/conftest.py), so the worker trusts it
and nothing else changes: the fetch verifies it as it would a real one.
"""

from __future__ import annotations

import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

# What a route sends: (status, headers, body chunks).
Route = Callable[[], tuple[int, dict[str, str], Iterator[bytes]]]


def make_certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1, and its key."""
    cert, key = directory / "source-cert.pem", directory / "source-key.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
            "-keyout", str(key), "-out", str(cert),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


@dataclass
class SourceServer:
    port: int
    routes: dict[str, Route]
    # Paths requested, and bytes of body sent per path, as the server saw them.
    requested: list[str] = field(default_factory=list)
    sent_bytes: dict[str, int] = field(default_factory=dict)

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"https://{host}:{self.port}{path}"


def serve(
    cert: Path, key: Path, routes: dict[str, Route]
) -> tuple[SourceServer, Callable[[], None]]:
    """Start the server in a thread; returns it and a function that stops it."""
    state = SourceServer(0, routes)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            state.requested.append(self.path)
            route = state.routes.get(self.path)
            if route is None:
                self.send_error(404)
                return
            status, headers, chunks = route()
            self.send_response(status)
            chunked = "Content-Length" not in headers
            for name, value in headers.items():
                self.send_header(name, value)
            if chunked:
                self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                for chunk in chunks:
                    if chunked:
                        self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                    else:
                        self.wfile.write(chunk)
                    state.sent_bytes[self.path] = state.sent_bytes.get(self.path, 0) + len(chunk)
                if chunked:
                    self.wfile.write(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
                pass  # the client stopped reading: what a capped fetch does

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    def stop() -> None:
        server.shutdown()
        server.server_close()

    return state, stop


def document(body: bytes, content_type: str = "application/pdf") -> Route:
    return lambda: (
        200,
        {"Content-Type": content_type, "Content-Length": str(len(body))},
        iter([body]),
    )


def redirect(location: str) -> Route:
    return lambda: (302, {"Location": location, "Content-Length": "0"}, iter([]))


def endless_pdf(total_bytes: int, chunk_bytes: int = 1024 * 1024) -> Route:
    """A PDF header, then zeros up to `total_bytes`, made as they are sent: nothing
    holds the whole stream, on either side unless the client buffers it."""

    def chunks() -> Iterator[bytes]:
        yield b"%PDF-1.7\n"
        padding = bytes(chunk_bytes)
        sent = 0
        while sent < total_bytes:
            yield padding
            sent += chunk_bytes

    return lambda: (200, {"Content-Type": "application/pdf"}, chunks())


def trickle(interval_s: float, max_s: float = 60) -> Route:
    """A PDF header, then a byte every `interval_s`: never a read timeout, never done."""

    def chunks() -> Iterator[bytes]:
        yield b"%PDF-1.7\n" + b" " * 1024  # past the sniffed head: the type is known
        deadline = time.monotonic() + max_s
        while time.monotonic() < deadline:
            time.sleep(interval_s)
            yield b" "

    return lambda: (200, {"Content-Type": "application/pdf"}, chunks())
