"""Open untrusted documents in a child process with memory, CPU and wall-clock limits.

PyMuPDF is not thread-safe and a malformed file can crash or hang it. In a child,
a crash costs one subprocess, not the API or the worker; a hang is killed at the
deadline; a decompression bomb hits the address-space limit.

The child speaks JSON lines on stdout. A line with "error" is a verdict about the
document (deterministic: retrying will not help); anything else is data.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

LIMITS_ENV = "PAGEMILL_SANDBOX_LIMITS"


@dataclass(frozen=True)
class Limits:
    memory_bytes: int
    cpu_s: int
    wall_s: float


class SandboxFailed(Exception):
    """The child crashed, ran out of memory or time: the document is suspect."""


class DocumentVerdict(Exception):
    """The child judged the document unusable; `code` and `message` say why."""

    def __init__(self, code: str, message: str, http_status: int = 422) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.http_status = http_status


def run_sandboxed(module: str, args: list[str], limits: Limits) -> Iterator[dict[str, Any]]:
    """Run `python -m module args...` under limits; yield its JSON lines as they come."""
    env = {**os.environ, LIMITS_ENV: json.dumps([limits.memory_bytes, limits.cpu_s])}
    process = subprocess.Popen(
        [sys.executable, "-m", module, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,
    )
    timed_out = threading.Event()

    def kill_at_deadline() -> None:
        timed_out.set()
        _kill_group(process)

    watchdog = threading.Timer(limits.wall_s, kill_at_deadline)
    watchdog.daemon = True
    watchdog.start()
    try:
        assert process.stdout is not None
        for raw in process.stdout:
            line = json.loads(raw)
            if "error" in line:
                raise DocumentVerdict(line["error"], line["message"], line.get("status", 422))
            yield line
        process.wait()
    finally:
        watchdog.cancel()
        if process.poll() is None:
            _kill_group(process)
            process.wait()
        stderr = process.stderr.read().decode(errors="replace") if process.stderr else ""
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
    if timed_out.is_set():
        raise SandboxFailed(f"the document took longer than {limits.wall_s:.0f} s to process")
    if process.returncode != 0:
        raise SandboxFailed(_describe_exit(process.returncode, stderr))


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


def _describe_exit(returncode: int, stderr: str) -> str:
    if returncode < 0:
        name = signal.Signals(-returncode).name
        if name == "SIGXCPU":
            return "processing the document used up its CPU time limit"
        return f"the document crashed the renderer ({name})"
    if "MemoryError" in stderr or "std::bad_alloc" in stderr:
        return "processing the document needed more memory than allowed"
    last = stderr.strip().splitlines()[-1:] or ["no message"]
    return f"the renderer failed: {last[0][:300]}"


# --- The child side.


_protocol = sys.stdout


def apply_limits_from_env() -> None:
    """Called first thing in a sandboxed child, before any untrusted byte is parsed.

    Also keeps stdout for the JSON protocol alone: libraries that print (MuPDF's
    warnings, for one) are sent to stderr instead."""
    global _protocol
    _protocol = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    raw = os.environ.get(LIMITS_ENV)
    if raw is None:
        return
    memory_bytes, cpu_s = json.loads(raw)
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 5))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    # Opening and rendering need none of PyMuPDF's layout models, whose import (with
    # onnxruntime) costs a second per child; a None entry makes that import fail fast,
    # which PyMuPDF treats as "layout not installed".
    sys.modules["pymupdf.layout"] = None  # type: ignore[assignment]


def emit(line: dict[str, Any]) -> None:
    _protocol.write(json.dumps(line) + "\n")
    _protocol.flush()
