"""The sandbox's children, forked from the fork server: data, verdicts and every way
a hostile document can make a child fail."""

from __future__ import annotations

import os
import signal
import time

import psutil
import pytest

from pagemill.documents import sandbox
from pagemill.documents.sandbox import (
    DocumentVerdict,
    Idle,
    Limits,
    SandboxFailed,
    SandboxStarved,
    run_sandboxed,
)

CHILD = "tests.support.sandbox_children"
GENEROUS = Limits(memory_bytes=2 * 1024**3, cpu_s=60, wall_s=60)


def _server_pid() -> int:
    sandbox.start_fork_server()
    process = sandbox._FORK_SERVER._process
    assert process is not None
    return process.pid


def test_lines_arrive_in_order_from_a_fresh_child_each_time() -> None:
    first = list(run_sandboxed(CHILD, ["lines", "3"], GENEROUS))
    second = list(run_sandboxed(CHILD, ["lines", "1"], GENEROUS))
    assert [line["number"] for line in first] == [0, 1, 2]
    assert first[0]["pid"] != second[0]["pid"]
    assert first[0]["pid"] != os.getpid()


def test_children_start_without_the_markdown_converter_and_its_model_runtime() -> None:
    """PyMuPDF imports pymupdf4llm when it can, and that brings onnxruntime: 25 MB in
    every fork server and each child it forks, for code no child runs."""
    wanted = ["pymupdf", "pymupdf4llm", "onnxruntime", "pymupdf.layout"]
    [line] = list(run_sandboxed(CHILD, ["modules", *wanted], GENEROUS))
    assert line["loaded"] == ["pymupdf"]


def test_a_verdict_is_raised_with_its_code_and_status() -> None:
    with pytest.raises(DocumentVerdict) as raised:
        list(run_sandboxed(CHILD, ["verdict"], GENEROUS))
    assert (raised.value.code, raised.value.http_status) == ("bad_document", 415)


def test_a_hang_is_killed_at_the_wall_clock_limit() -> None:
    started = time.monotonic()
    lines = []
    with pytest.raises(SandboxFailed, match="took longer than"):
        for line in run_sandboxed(CHILD, ["hang"], Limits(2 * 1024**3, 60, 1.0)):
            lines.append(line)
    assert lines == [{"started": True}]
    assert time.monotonic() - started < 30
    _assert_no_sandbox_children_left()


def test_lines_that_arrive_together_are_each_passed_on_at_once() -> None:
    # The child goes silent after one write of two lines: the second must not wait for
    # the child's next write (there is none) or its end.
    lines = []
    with pytest.raises(SandboxFailed, match="took longer than"):
        for line in run_sandboxed(
            CHILD, ["two-lines-at-once-then-hang"], Limits(2 * 1024**3, 60, 3.0)
        ):
            lines.append((line, time.monotonic()))
    assert [line for line, _ in lines] == [{"number": 0}, {"number": 1}]
    assert lines[1][1] - lines[0][1] < 1.0
    _assert_no_sandbox_children_left()


def test_a_silent_child_is_looked_away_from_and_an_error_there_stops_it() -> None:
    looked: list[float] = []

    def look() -> None:
        looked.append(time.monotonic())
        if len(looked) == 3:
            raise RuntimeError("stopped while the child was silent")

    lines = []
    with pytest.raises(RuntimeError, match="stopped while the child was silent"):
        for line in run_sandboxed(CHILD, ["hang"], GENEROUS, Idle(0.05, look)):
            lines.append(line)
    assert lines == [{"started": True}]
    assert len(looked) == 3
    _assert_no_sandbox_children_left()


def test_a_child_that_got_no_cpu_before_the_deadline_was_starved_not_slow() -> None:
    # A sleeping child stands for one the machine never ran: its document is not to blame.
    with pytest.raises(SandboxStarved, match=r"took longer than 1 s.*busy"):
        list(run_sandboxed(CHILD, ["hang"], Limits(2 * 1024**3, 60, 1.0)))


def test_a_child_that_computed_until_the_deadline_was_slow_not_starved() -> None:
    with pytest.raises(SandboxFailed, match="took longer than 2 s") as raised:
        list(run_sandboxed(CHILD, ["spin"], Limits(2 * 1024**3, 60, 2.0)))
    assert not isinstance(raised.value, SandboxStarved)


def test_the_cpu_limit_stops_a_spinning_child() -> None:
    with pytest.raises(SandboxFailed, match="CPU time limit"):
        list(run_sandboxed(CHILD, ["spin"], Limits(2 * 1024**3, 1, 60)))


def test_the_memory_limit_stops_a_large_allocation() -> None:
    with pytest.raises(SandboxFailed, match="more memory than allowed"):
        list(run_sandboxed(CHILD, ["allocate", str(4 * 1024**3)], Limits(1024**3, 60, 60)))


def test_a_crash_and_an_exception_are_described() -> None:
    with pytest.raises(SandboxFailed, match="crashed the renderer \\(SIGSEGV\\)"):
        list(run_sandboxed(CHILD, ["segfault"], GENEROUS))
    with pytest.raises(SandboxFailed, match="ValueError: a broken page tree"):
        list(run_sandboxed(CHILD, ["raise"], GENEROUS))


def test_a_dead_fork_server_is_replaced() -> None:
    old = _server_pid()
    os.kill(old, signal.SIGKILL)
    psutil.Process(old).wait(10)
    assert [line["number"] for line in run_sandboxed(CHILD, ["lines", "2"], GENEROUS)] == [0, 1]
    assert _server_pid() != old


def test_the_fork_server_leaves_when_its_owner_does() -> None:
    # A process that forks after starting a server gets its own; the server of a
    # process that exits goes with it.
    _server_pid()
    child = os.fork()
    if child == 0:
        try:
            lines = list(run_sandboxed(CHILD, ["lines", "1"], GENEROUS))
            own = sandbox._FORK_SERVER._process
            ok = len(lines) == 1 and own is not None and own.pid != _parent_server
            os._exit(0 if ok else 1)
        finally:
            os._exit(2)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    deadline = time.monotonic() + 10
    while _zygotes_of(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _zygotes_of(child) == []


_parent_server = 0


@pytest.fixture(autouse=True)
def _remember_server() -> None:
    global _parent_server
    _parent_server = _server_pid()


def _zygotes_of(pid: int) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline", "ppid"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if "pagemill.documents.zygote" in cmdline and proc.info["ppid"] == pid:
            found.append(proc)
    return found


def _assert_no_sandbox_children_left() -> None:
    server = psutil.Process(_server_pid())
    deadline = time.monotonic() + 10
    while server.children() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.children() == []
