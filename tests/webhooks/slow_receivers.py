"""Receivers that hold a delivery open on loopback, recording when each connection
opened and when the sender let go of it.

- trickle: reads the request, sends `HTTP/1.1 200 OK` and then one header byte a
  second, never finishing the headers;
- mute: reads the request and never answers;
- silent: accepts the connection and sends nothing, not even reading the request.
"""

from __future__ import annotations

import select
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

MODES = ("trickle", "mute", "silent")
HOLD_LIMIT_S = 90  # a connection the sender never closes is dropped after this


@dataclass
class Connection:
    opened: float  # time.monotonic()
    closed: float | None = None  # when the sender closed it (EOF or reset)
    webhook_id: str | None = None


class SlowReceiver:
    def __init__(self, mode: str, interval_s: float = 1.0) -> None:
        assert mode in MODES
        self.mode = mode
        self.interval_s = interval_s
        self.connections: list[Connection] = []
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._stopped = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def snapshot(self) -> list[Connection]:
        with self._lock:
            return [Connection(c.opened, c.closed, c.webhook_id) for c in self.connections]

    def close(self) -> None:
        self._stopped.set()
        self._listener.close()

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            connection = Connection(opened=time.monotonic())
            with self._lock:
                self.connections.append(connection)
            threading.Thread(target=self._serve, args=(sock, connection), daemon=True).start()

    def _serve(self, sock: socket.socket, connection: Connection) -> None:
        with sock:
            try:
                if self.mode == "silent":
                    # Nothing read, nothing sent: only notice when the sender gives up.
                    self._hold(sock, connection, send=None, read=False)
                    return
                connection.webhook_id = _read_request(sock)
                if self.mode == "trickle":
                    sock.sendall(b"HTTP/1.1 200 OK\r\n")
                    self._hold(sock, connection, send=b"X", read=True)
                else:
                    self._hold(sock, connection, send=None, read=True)
            except OSError:
                connection.closed = connection.closed or time.monotonic()

    def _hold(
        self, sock: socket.socket, connection: Connection, send: bytes | None, read: bool
    ) -> None:
        """Until the sender closes: send a byte every interval (or nothing)."""
        limit = time.monotonic() + HOLD_LIMIT_S
        while time.monotonic() < limit and not self._stopped.is_set():
            if read:
                readable, _, _ = select.select([sock], [], [], self.interval_s)
                if readable and not sock.recv(4096):
                    connection.closed = time.monotonic()
                    return
            else:
                # The request stays unread, so EOF cannot be read: ask the kernel instead.
                self._stopped.wait(0.2)
                if _peer_gone(sock):
                    connection.closed = time.monotonic()
                    return
                continue
            if send is not None:
                sock.sendall(send)


def _peer_gone(sock: socket.socket) -> bool:
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)
    # TCP_INFO's first byte is the state: ESTABLISHED is 1; CLOSE_WAIT (8) means the
    # peer sent its FIN, and anything else means the connection is going or gone.
    return info[0] != 1


def _read_request(sock: socket.socket) -> str | None:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionResetError("closed before the request ended")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    headers = {}
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    remaining = int(headers.get("content-length", "0")) - len(body)
    while remaining > 0:
        chunk = sock.recv(min(remaining, 65536))
        if not chunk:
            break
        remaining -= len(chunk)
    return headers.get("webhook-id")


@contextmanager
def slow_receiver(mode: str) -> Iterator[SlowReceiver]:
    receiver = SlowReceiver(mode)
    try:
        yield receiver
    finally:
        receiver.close()
