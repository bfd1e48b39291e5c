"""Linux network namespaces for the multi-host tests: hosts that reach each other only
by address, through a bridge in a namespace of their own.

Every namespace is named `pmmh<pid>-<host>`, after the test process that made it, so a
crashed run's leftovers are found by name and removed (with the processes still in
them) by the next run, and concurrent runs never touch each other's. Addresses come
from 198.18.0.0/15 (reserved for network benchmarks, RFC 2544) and are given only to
interfaces inside these namespaces; nothing is added to the machine's own namespace.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

PREFIX = "pmmh"
NETNS_DIR = Path("/run/netns")
SUBNET_BITS = 24
CLONE_NEWNET = 0x40000000


def run(*argv: str) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


def unavailable() -> str | None:
    """Why namespaces cannot be made here, or None when they can."""
    if os.geteuid() != 0:
        return "network namespaces need root (CAP_SYS_ADMIN and CAP_NET_ADMIN)"
    probe = f"{PREFIX}{os.getpid()}-probe"
    try:
        run("ip", "netns", "add", probe)
        run("ip", "-n", probe, "link", "add", "probe0", "type", "bridge")
    except (RuntimeError, FileNotFoundError) as error:
        return f"cannot create a network namespace with a bridge: {error}"
    finally:
        with contextlib.suppress(RuntimeError, FileNotFoundError):
            run("ip", "netns", "del", probe)
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_leftovers() -> list[str]:
    """Namespaces a test process that no longer runs left behind, with whatever still
    runs in them; returns their names."""
    removed = []
    for line in run("ip", "netns", "list").splitlines():
        name = line.split()[0] if line.strip() else ""
        owner = name[len(PREFIX) :].split("-", 1)[0]
        if not name.startswith(PREFIX) or not owner.isdigit() or _alive(int(owner)):
            continue
        delete(name)
        removed.append(name)
    return removed


def delete(name: str) -> None:
    # A namespace lives on, unnamed, while a process holds it: end those first.
    with contextlib.suppress(RuntimeError):
        for pid in run("ip", "netns", "pids", name).split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
    with contextlib.suppress(RuntimeError):
        run("ip", "netns", "del", name)


class Network:
    """A bridge namespace and one namespace per host, each with one interface (`eth0`)
    on the bridge and one address."""

    def __init__(self, hosts: dict[str, str]) -> None:
        self.addresses = dict(hosts)
        self.names = {host: f"{PREFIX}{os.getpid()}-{host}" for host in hosts}
        self.bridge = f"{PREFIX}{os.getpid()}-bridge"
        self.made: list[str] = []

    def create(self) -> None:
        self._add(self.bridge)
        run("ip", "-n", self.bridge, "link", "add", "br0", "type", "bridge")
        run("ip", "-n", self.bridge, "link", "set", "br0", "up")
        for index, (host, address) in enumerate(self.addresses.items()):
            self.add_host(host, address, index)

    def add_host(self, host: str, address: str, index: int | None = None) -> None:
        name = self.names.setdefault(host, f"{PREFIX}{os.getpid()}-{host}")
        self.addresses[host] = address
        port = f"port{len(self.made) if index is None else index}"
        self._add(name)
        # Both ends are made inside namespaces of ours; none ever exists outside them.
        run("ip", "-n", self.bridge, "link", "add", port, "type", "veth",
            "peer", "name", "eth0", "netns", name)  # fmt: skip
        run("ip", "-n", self.bridge, "link", "set", port, "master", "br0", "up")
        run("ip", "-n", name, "addr", "add", f"{address}/{SUBNET_BITS}", "dev", "eth0")
        run("ip", "-n", name, "link", "set", "eth0", "up")

    def _add(self, name: str) -> None:
        run("ip", "netns", "add", name)
        self.made.append(name)
        run("ip", "-n", name, "link", "set", "lo", "up")

    def cut(self, host: str) -> None:
        """The host's only link goes down, inside its namespace: it reaches nobody."""
        run("ip", "-n", self.names[host], "link", "set", "eth0", "down")

    def restore(self, host: str) -> None:
        run("ip", "-n", self.names[host], "link", "set", "eth0", "up")

    def prefix(self, host: str, hostname: str) -> list[str]:
        """A command line's start that runs it on that host: in its network namespace,
        with a hostname of its own (a UTS namespace), as a separate machine would."""
        return [
            "ip", "netns", "exec", self.names[host],
            "unshare", "--uts", "--", "sh", "-c", f'hostname {hostname} && exec "$@"', "sh",
        ]  # fmt: skip

    def remove(self) -> None:
        for name in reversed(self.made):
            delete(name)
        self.made.clear()

    @contextlib.contextmanager
    def inside(self, host: str) -> Iterator[None]:
        """This thread in the host's network namespace for the block: sockets opened in
        it stay there, so the tests reach the hosts as one of them would."""
        libc = ctypes.CDLL(None, use_errno=True)
        own = os.open(f"/proc/self/task/{threading.get_native_id()}/ns/net", os.O_RDONLY)
        target = os.open(NETNS_DIR / self.names[host], os.O_RDONLY)
        try:
            if libc.setns(target, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns into the host's namespace")
            try:
                yield
            finally:
                if libc.setns(own, CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), "setns back")
        finally:
            os.close(own)
            os.close(target)
