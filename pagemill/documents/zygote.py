"""A fork server for sandboxed children: `python -m pagemill.documents.zygote FD`.

It imports what every child needs once (sandbox_preload), then forks one child a
request. It never opens a document itself, so each child starts from the same
clean, already-initialised state at the cost of a fork instead of a fresh
interpreter.

Protocol on the inherited Unix socket FD: the client sends one JSON request
(module, args, limits) with two file descriptors attached: the write ends of the
child's data pipe and of its status pipe. The server answers with the child's pid
as JSON, and when the child exits writes its exit code (negative: the signal) and
the CPU seconds it used to the status pipe. The server exits when the client's end
of the socket closes.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import resource
import selectors
import signal
import socket
import struct
import sys
from typing import Any

# Exit code (negative: the signal) and CPU seconds, user and system together.
EXIT_STATUS = struct.Struct("!id")
MAX_REQUEST_BYTES = 1 << 20


def serve(connection: socket.socket) -> None:
    wakeup_r, wakeup_w = os.pipe()
    os.set_blocking(wakeup_w, False)
    signal.set_wakeup_fd(wakeup_w)
    # A handler (not SIG_IGN) so children are reaped by us and their status is known.
    signal.signal(signal.SIGCHLD, lambda *_: None)
    status_fds: dict[int, int] = {}
    selector = selectors.DefaultSelector()
    selector.register(connection, selectors.EVENT_READ, "request")
    selector.register(wakeup_r, selectors.EVENT_READ, "children")
    while True:
        for key, _ in selector.select():
            if key.data == "children":
                with contextlib.suppress(BlockingIOError):
                    os.read(wakeup_r, 4096)
                _reap(status_fds)
                continue
            message, fds, _, _ = socket.recv_fds(connection, MAX_REQUEST_BYTES, 2)
            if not message:
                return  # the client is gone; running children finish on their own
            data_fd, status_fd = fds
            request = json.loads(message)
            _ready_to_fork(request.get("module"))
            pid = os.fork()
            if pid == 0:
                selector.close()
                connection.close()
                os.close(wakeup_r)
                os.close(wakeup_w)
                os.close(status_fd)
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                _child(request, data_fd)
            os.close(data_fd)
            status_fds[pid] = status_fd
            connection.sendall(json.dumps({"pid": pid}).encode())


def _ready_to_fork(module: Any) -> None:
    """Import the child's module here, once, not in every child (the renderer's took
    27 ms a child); then freeze every object alive (gc.freeze), so a child's garbage
    collections never visit them: each visit writes to the object and copies its
    memory page, which cost an inspection child 4,400 page faults and a fifth of its
    CPU. Importing our own module opens no document."""
    if isinstance(module, str):
        # A module that fails to import fails again in the child, which reports it.
        with contextlib.suppress(Exception):
            importlib.import_module(module)
    gc.freeze()


def _reap(status_fds: dict[int, int]) -> None:
    while status_fds:
        try:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        fd = status_fds.pop(pid, None)
        if fd is not None:
            cpu_s = usage.ru_utime + usage.ru_stime
            with contextlib.suppress(OSError):
                os.write(fd, EXIT_STATUS.pack(os.waitstatus_to_exitcode(status), cpu_s))
            os.close(fd)


def _child(request: dict[str, Any], data_fd: int) -> None:
    """Runs in the forked child; never returns."""
    from pagemill.documents import sandbox

    code = 0
    try:
        memory_bytes, cpu_s = request["memory_bytes"], request["cpu_s"]
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 5))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        sandbox.open_protocol(data_fd)
        importlib.import_module(request["module"]).run(request["args"])
    except BaseException as error:  # any failure is reported, then the exit
        code = 1
        with contextlib.suppress(BaseException):
            sandbox.emit({"crash": f"{type(error).__name__}: {error}"})
    finally:
        with contextlib.suppress(BaseException):
            sandbox.close_protocol()
            sys.stderr.flush()
        os._exit(code)


def main() -> None:
    # Libraries that print (MuPDF's warnings, for one) write to stderr, never stdout.
    os.dup2(2, 1)
    importlib.import_module("pagemill.documents.sandbox_preload")
    serve(socket.socket(fileno=int(sys.argv[1])))


if __name__ == "__main__":
    main()
