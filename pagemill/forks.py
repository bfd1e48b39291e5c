"""A forked child shares no connection with its parent.

Each client forgets its inherited pool in the child: the SQLAlchemy engine
(pagemill.db.session), the object store's HTTP pool (pagemill.storage), redis-py
by its own pid check, Celery's producer pool by its own after-fork hook. Forgetting
a pool does not close its descriptors, though: libpq never closes a connection
another process opened, and a Python socket closes only when it is collected. An
inherited descriptor keeps the parent's connection open in the child (`ss -tnp`
lists both processes on it), and any stale object that still reaches it would
write into the parent's conversation with the server.

So a worker's pool child, first thing, points every inherited TCP descriptor at
/dev/null. The parent's connections are untouched (closing a shared descriptor
in one process sends nothing to the server while another process holds it); in
the child, a stale client reads end-of-file or fails to write, and reconnects on
its own socket. Keeping the descriptor numbers open (instead of closing them)
means a later close by a stale object closes /dev/null, never a socket the child
opened since under the same number.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat

_NETWORK_FAMILIES = (socket.AF_INET, socket.AF_INET6)


def _is_network_connection(fd: int) -> bool:
    try:
        if not stat.S_ISSOCK(os.fstat(fd).st_mode):
            return False
        # A duplicate to look at: the original stays with whoever owns it.
        with socket.socket(fileno=os.dup(fd)) as probe:
            if probe.family not in _NETWORK_FAMILIES or probe.type != socket.SOCK_STREAM:
                return False
            probe.getpeername()  # listening or unconnected sockets have no peer
            return True
    except OSError:
        return False


def release_inherited_connections() -> int:
    """In a freshly forked child: let go of every TCP connection it inherited.
    Unix sockets and pipes (the pool's channels to its parent) are left alone.
    Returns how many were released."""
    try:
        descriptors = os.listdir("/proc/self/fd")
    except FileNotFoundError:  # not Linux: nothing to go by
        return 0
    released = 0
    null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    try:
        for name in descriptors:
            fd = int(name)
            if fd != null and _is_network_connection(fd):
                with contextlib.suppress(OSError):
                    os.dup2(null, fd, inheritable=False)
                    released += 1
    finally:
        os.close(null)
    return released
