"""Which process holds which TCP connection, read from /proc as `ss -tnp` does.

A connection is one socket inode; two processes that both hold it share the
connection, whatever each of them believes it owns.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

_TCP_LISTEN = "0A"


@dataclass(frozen=True)
class Connection:
    local_port: int
    remote_port: int


def tcp_connections() -> dict[int, Connection]:
    """Every established (or closing) TCP connection on this host, by socket inode."""
    found: dict[int, Connection] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == _TCP_LISTEN:
                continue
            local, remote, inode = fields[1], fields[2], int(fields[9])
            found[inode] = Connection(
                int(local.rsplit(":", 1)[1], 16), int(remote.split(":")[1], 16)
            )
    return found


def socket_inodes(pid: int) -> set[int]:
    inodes: set[int] = set()
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except (FileNotFoundError, ProcessLookupError):
        return inodes
    for name in names:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:
            continue  # closed while we looked
        if target.startswith("socket:["):
            inodes.add(int(target[8:-1]))
    return inodes


def children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return found
    for thread in threads:
        try:
            found += [
                int(child)
                for child in Path(f"/proc/{pid}/task/{thread}/children").read_text().split()
            ]
        except FileNotFoundError:
            continue
    return found


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except FileNotFoundError:
        return ""


@dataclass(frozen=True)
class WorkerTree:
    parent: int
    pool_children: list[int]
    fork_servers: list[int]
    sandboxed: list[int]


def worker_tree(parent: int) -> WorkerTree:
    """A prefork worker: its pool children, their fork servers and the servers' children."""
    pool = children(parent)
    servers = [
        grandchild
        for child in pool
        for grandchild in children(child)
        if "pagemill.documents.zygote" in command_line(grandchild)
    ]
    sandboxed = [leaf for server in servers for leaf in children(server)]
    return WorkerTree(parent, pool, servers, sandboxed)


def tcp_by_process(pids: list[int]) -> dict[int, dict[int, Connection]]:
    connections = tcp_connections()
    return {
        pid: {inode: connections[inode] for inode in socket_inodes(pid) if inode in connections}
        for pid in pids
    }


def shared_connections(pids: list[int]) -> dict[int, tuple[Connection, list[int]]]:
    """TCP connections held by more than one of these processes: inode -> (connection, pids)."""
    holders: dict[int, list[int]] = {}
    found: dict[int, Connection] = {}
    for pid, held in tcp_by_process(pids).items():
        for inode, connection in held.items():
            holders.setdefault(inode, []).append(pid)
            found[inode] = connection
    return {inode: (found[inode], pids) for inode, pids in holders.items() if len(pids) > 1}


def lasting_shares(parent: int, settle_s: float = 1.5) -> dict[int, tuple[Connection, list[int]]]:
    """Shares between the worker and its pool children that are still there a moment
    later with the same processes alive: a child is forked holding its parent's
    descriptors, and releases them in its first milliseconds, so one look could
    catch a child in that window."""
    first = shared_connections([parent, *worker_tree(parent).pool_children])
    if not first:
        return {}
    time.sleep(settle_s)
    again = shared_connections([parent, *worker_tree(parent).pool_children])
    return {inode: share for inode, share in again.items() if first.get(inode) == share}
