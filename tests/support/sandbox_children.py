"""Children for the sandbox's tests: `run([behaviour, ...])` misbehaves on request."""

from __future__ import annotations

import os
import signal
import sys
import time

from pagemill.documents import sandbox
from pagemill.documents.sandbox import emit


def run(args: list[str]) -> None:
    behaviour = args[0]
    if behaviour == "lines":
        for number in range(int(args[1])):
            emit({"number": number, "pid": os.getpid()})
    elif behaviour == "modules":
        emit({"loaded": sorted(name for name in args[1:] if sys.modules.get(name) is not None)})
    elif behaviour == "verdict":
        emit({"error": "bad_document", "message": "The document is bad.", "status": 415})
    elif behaviour == "two-lines-at-once-then-hang":
        # Both lines in one write, so they reach the parent in one read.
        assert sandbox._protocol is not None
        sandbox._protocol.write('{"number": 0}\n{"number": 1}\n')
        sandbox._protocol.flush()
        time.sleep(3600)
    elif behaviour == "hang":
        emit({"started": True})
        time.sleep(3600)
    elif behaviour == "spin":
        while True:
            pass
    elif behaviour == "allocate":
        emit({"kept": len(bytearray(int(args[1])))})
    elif behaviour == "segfault":
        os.kill(os.getpid(), signal.SIGSEGV)
    elif behaviour == "raise":
        raise ValueError("a broken page tree")
