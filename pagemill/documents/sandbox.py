"""Open untrusted documents in a child process with memory, CPU and wall-clock limits.

PyMuPDF is not thread-safe and a malformed file can crash or hang it. In a child,
a crash costs one process, not the API or the worker; a hang is killed at the
deadline; a decompression bomb hits the address-space limit.

Children are forked by a per-process fork server (zygote.py) that has already
imported PyMuPDF: a fresh interpreter spends about a second of CPU importing it,
which for a one-page invoice was most of what the service spent on the whole job.

A child writes JSON lines to its data pipe. A line with "error" is a verdict about
the document (deterministic: retrying will not help); one with "crash" says why
the child failed; anything else is data.

A child that passes its wall-clock limit is slow if it spent that time computing,
and starved if the machine hardly ran it (too many processes for its cores): the
first says something about the document, the second only about the moment.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, Any

from pagemill.documents.zygote import EXIT_STATUS


@dataclass(frozen=True)
class Limits:
    memory_bytes: int
    cpu_s: int
    wall_s: float


# A child that used less CPU than this share of its wall-clock limit was starved of
# the CPU rather than slow: a document that takes long computes nearly all the time.
STARVED_CPU_SHARE = 0.25
# What one read of a child's data pipe takes at most: a pipe holds 64 KiB.
_READ_BYTES = 1 << 16


class SandboxFailed(Exception):
    """The child crashed, ran out of memory or time: the document is suspect."""


class SandboxStarved(SandboxFailed):
    """The child ran out of wall-clock time with the CPU mostly spent elsewhere: the
    machine was too busy to judge the document, so trying again later may succeed."""


class DocumentVerdict(Exception):
    """The child judged the document unusable; `code` and `message` say why."""

    def __init__(self, code: str, message: str, http_status: int = 422) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.http_status = http_status


@dataclass(frozen=True)
class Idle:
    """What to do while the child is silent: `call` after each `seconds` without a line."""

    seconds: float
    call: Callable[[], None]


def run_sandboxed(
    module: str, args: list[str], limits: Limits, idle: Idle | None = None
) -> Iterator[dict[str, Any]]:
    """Run `module.run(args)` in a limited child; yield its JSON lines as they come.
    An exception `idle.call` raises comes out of the iteration, as the child is killed."""
    data_r, data_w = os.pipe()
    status_r, status_w = os.pipe()
    try:
        pid = _FORK_SERVER.fork(
            {
                "module": module,
                "args": args,
                "memory_bytes": limits.memory_bytes,
                "cpu_s": limits.cpu_s,
            },
            data_w,
            status_w,
        )
    finally:
        os.close(data_w)
        os.close(status_w)
    deadline = time.monotonic() + limits.wall_s
    crash: str | None = None
    timed_out = False
    # Whether the child is done on its own; if not (a timeout, or the caller
    # stopped reading), it is killed at once rather than awaited.
    child_done = False
    # The data pipe unbuffered: its lines are split here (`_lines_until`), so a line that
    # arrived with the one before is not left in a buffer that select cannot see.
    with os.fdopen(data_r, "rb", buffering=0) as data, os.fdopen(status_r, "rb") as status:
        try:
            for line in _lines_until(data, deadline, idle):
                if line is None:
                    timed_out = True
                    break
                if "crash" in line:
                    crash = line["crash"]
                    child_done = True
                elif "error" in line:
                    child_done = True
                    raise DocumentVerdict(line["error"], line["message"], line.get("status", 422))
                else:
                    yield line
            else:
                child_done = True
        finally:
            exit_code, cpu_s = _exit_status(pid, status, wait_s=5.0 if child_done else 0.0)
    if timed_out:
        took_longer = f"the document took longer than {limits.wall_s:.0f} s to process"
        if cpu_s is not None and cpu_s < STARVED_CPU_SHARE * limits.wall_s:
            raise SandboxStarved(
                f"{took_longer}, with {cpu_s:.1f} s of CPU: the machine was too busy"
            )
        raise SandboxFailed(took_longer)
    if exit_code != 0:
        raise SandboxFailed(_describe_exit(exit_code, crash))


def _lines_until(
    data: IO[bytes], deadline: float, idle: Idle | None
) -> Iterator[dict[str, Any] | None]:
    """The child's lines; None once the deadline passes first.

    Read in chunks as they arrive and split here: every whole line a chunk holds is
    yielded before waiting again, and a partial line waits for the rest of it without
    blocking past the deadline."""
    pending = bytearray()
    while True:
        end = pending.find(b"\n")
        if end >= 0:
            line = json.loads(pending[:end])
            del pending[: end + 1]
            yield line
            continue
        left = max(0.0, deadline - time.monotonic())
        wait = left if idle is None else min(left, idle.seconds)
        ready, _, _ = select.select([data], [], [], wait)
        if not ready:
            if idle is not None and wait < left:
                idle.call()
                continue
            yield None
            return
        chunk = data.read(_READ_BYTES)
        if not chunk:
            if pending.strip():  # a last line without its newline
                yield json.loads(pending)
            return
        pending += chunk


def _exit_status(pid: int, status: IO[bytes], wait_s: float) -> tuple[int, float | None]:
    """The child's exit code and the CPU seconds it used (None when unknown)."""
    # The child is the fork server's, which reports how it ended on the status pipe.
    ready, _, _ = select.select([status], [], [], wait_s)
    if not ready:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    raw = status.read(EXIT_STATUS.size)
    if len(raw) < EXIT_STATUS.size:
        return -signal.SIGKILL, None  # the fork server died with its child
    code, cpu_s = EXIT_STATUS.unpack(raw)
    return int(code), float(cpu_s)


def _describe_exit(exit_code: int, crash: str | None) -> str:
    if exit_code < 0:
        name = signal.Signals(-exit_code).name
        if name == "SIGXCPU":
            return "processing the document used up its CPU time limit"
        return f"the document crashed the renderer ({name})"
    if crash is None:
        return f"the renderer failed with exit status {exit_code}"
    lowered = crash.lower()
    # Python's MemoryError, C++'s bad_alloc, MuPDF's "malloc (N bytes) failed".
    if (
        "memoryerror" in lowered
        or "bad_alloc" in lowered
        or "out of memory" in lowered
        or ("malloc" in lowered and "failed" in lowered)
    ):
        return "processing the document needed more memory than allowed"
    return f"the renderer failed: {crash[:300]}"


_SINGLE_THREADED = {
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}


class _ForkServer:
    """This process's zygote: started on first use, again after a fork or a crash."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner_pid: int | None = None
        self._socket: socket.socket | None = None
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self._lock:
            self._ensure_running()

    def fork(self, request: dict[str, Any], data_fd: int, status_fd: int) -> int:
        message = json.dumps(request).encode()
        with self._lock:
            for attempt in (1, 2):
                connection = self._ensure_running()
                try:
                    socket.send_fds(connection, [message], [data_fd, status_fd])
                    reply = connection.recv(4096)
                    if reply:
                        return int(json.loads(reply)["pid"])
                except OSError:
                    if attempt == 2:
                        raise
                self._stop()  # the server died: start a new one and ask again
        raise SandboxFailed("the sandbox's fork server is not answering")

    def _ensure_running(self) -> socket.socket:
        # A fork server belongs to the process that started it: a forked worker
        # child starts its own rather than sharing its parent's socket.
        if self._socket is not None and self._owner_pid == os.getpid():
            return self._socket
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with theirs:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "pagemill.documents.zygote", str(theirs.fileno())],
                pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL,
                # One thread: fork copies only the calling thread, so a thread pool
                # (numpy's BLAS starts one on import) could leave a lock held forever.
                env={**os.environ, **_SINGLE_THREADED},
                # Its own process group: a signal meant for the caller's group
                # (Ctrl-C in a terminal) must not kill a child mid-document.
                start_new_session=True,
            )
        self._socket, self._owner_pid = ours, os.getpid()
        return ours

    def _stop(self) -> None:
        if self._socket is not None:
            self._socket.close()
        if self._process is not None and self._owner_pid == os.getpid():
            self._process.kill()
            self._process.wait()
        self._socket = self._process = self._owner_pid = None


_FORK_SERVER = _ForkServer()


def start_fork_server() -> None:
    """Start this process's fork server now rather than with the first document."""
    _FORK_SERVER.start()


# --- The child side.

_protocol: IO[str] | None = None


def open_protocol(fd: int) -> None:
    global _protocol
    _protocol = os.fdopen(fd, "w")


def close_protocol() -> None:
    if _protocol is not None:
        _protocol.close()


def emit(line: dict[str, Any]) -> None:
    """Send one line to the parent; only valid inside a sandboxed child."""
    if _protocol is None:
        raise RuntimeError("emit() is only for a sandboxed child")
    _protocol.write(json.dumps(line) + "\n")
    _protocol.flush()
