"""A cluster of separate hosts on one machine: services (Postgres, Redis, SeaweedFS),
the API and two worker hosts, each in its own network namespace with its own address,
hostname and temporary directory. The test process reaches them from the services
host (tests/multihost/netns.py).

Timings are short so that a lost host shows within seconds: a page lease of 15 s
(a time limit of 12 s: the pages are a few lines of text layer), the reaper and
heartbeats every second.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tests.multihost import netns
from tests.multihost.held_app import CLOCK_OFFSET_VARIABLE, HOLD_FILE, HOLDING_FILE
from tests.support import services

SERVICES, API, W1, W2, W3 = "services", "api", "w1", "w2", "w3"
ADDRESSES = {SERVICES: "198.18.0.1", API: "198.18.0.2", W1: "198.18.0.11", W2: "198.18.0.12"}
SERVICES_ADDRESS = ADDRESSES[SERVICES]
# Not 8333: the suite's own SeaweedFS serves there, and a second one on its ports would take
# over the Unix sockets weed names by port.
S3_PORT = 8433
PG_URL = f"postgresql://postgres@{SERVICES_ADDRESS}:5432/pagemill"
S3_ACCESS_KEY, S3_SECRET_KEY, S3_BUCKET = "multihost", "multihost-secret", "pagemill"
API_URL = f"http://{ADDRESSES[API]}:8000"
PAGE_LEASE_S = 15
CLUSTER_SETTINGS = {
    "PAGEMILL_ENVIRONMENT": "test",
    "PAGEMILL_DATABASE_URL": PG_URL.replace("postgresql://", "postgresql+psycopg://"),
    "PAGEMILL_BROKER_URL": f"redis://{SERVICES_ADDRESS}:6379/0",
    "PAGEMILL_S3_ENDPOINT": f"{SERVICES_ADDRESS}:{S3_PORT}",
    "PAGEMILL_S3_ACCESS_KEY": S3_ACCESS_KEY,
    "PAGEMILL_S3_SECRET_KEY": S3_SECRET_KEY,
    "PAGEMILL_S3_BUCKET": S3_BUCKET,
    "PAGEMILL_API_BASE_URL": API_URL,
    "PAGEMILL_DEVICE_PRICE_USD_PER_HOUR": "3.6",
    "PAGEMILL_TASK_TIME_LIMIT_S": "12",
    "PAGEMILL_RENDER_TIMEOUT_S": "10",
    "PAGEMILL_PAGE_LEASE_S": str(PAGE_LEASE_S),
    "PAGEMILL_BROKER_VISIBILITY_TIMEOUT_S": "60",
    "PAGEMILL_WEBHOOK_MAX_COUNTDOWN_S": "10",
    "PAGEMILL_REAPER_INTERVAL_S": "1",
    "PAGEMILL_STALE_AFTER_S": "3",
    "PAGEMILL_HEARTBEAT_INTERVAL_S": "1",
}
WORKER_QUEUES = "prepare,ocr,finalize"


def _postgres_bin(name: str) -> str | None:
    found = shutil.which(name) or next(iter(glob.glob(f"/usr/lib/postgresql/*/bin/{name}")), None)
    return found


@dataclass
class Cluster:
    network: netns.Network
    base: Path
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    api_key: str = ""

    def tmp(self, host: str) -> Path:
        path = self.base / host / "tmp"
        path.mkdir(parents=True, exist_ok=True)
        return path

    def log(self, host: str) -> Path:
        return self.base / host / "process.log"

    def env(self, host: str, **extra: str) -> dict[str, str]:
        own = {key: value for key, value in os.environ.items() if not key.startswith("PAGEMILL_")}
        return {**own, **CLUSTER_SETTINGS, "TMPDIR": str(self.tmp(host)), **extra}

    def start(
        self, host: str, hostname: str, argv: list[str], env: dict[str, str], name: str = ""
    ) -> subprocess.Popen[bytes]:
        log = self.log(host).open("ab")
        process = subprocess.Popen(
            [*self.network.prefix(host, hostname), *argv],
            env=env,
            cwd=services.ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.processes[name or host] = process
        return process

    def start_worker(
        self, host: str, clock_offset_s: float = 0, queues: str = WORKER_QUEUES
    ) -> None:
        env = self.env(host, **{CLOCK_OFFSET_VARIABLE: str(clock_offset_s)})
        argv = [
            sys.executable, "-m", "celery", "-A", "tests.multihost.held_app", "worker",
            "--loglevel=INFO", f"--queues={queues}", "--concurrency=1", "--pool=prefork",
            "--without-gossip", "--without-mingle", "--without-heartbeat",
        ]  # fmt: skip
        self.start(host, f"pm-{host}", argv, env)

    def wait_worker(self, host: str) -> None:
        process, log = self.processes[host], self.log(host)
        try:
            services.wait_until(
                lambda: b"ready." in log.read_bytes() or process.poll() is not None,
                120,
                f"the worker on {host}",
            )
        except TimeoutError as error:
            raise TimeoutError(f"{error}: {log.read_text()[-3000:]}") from None
        if process.poll() is not None:
            raise RuntimeError(f"worker on {host} exited: {log.read_text()[-3000:]}")

    def stop(self, name: str) -> None:
        process = self.processes.pop(name)
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)

    # --- Reaching the hosts, as the services host does.

    def sql(self, query: str, *params: Any) -> list[tuple[Any, ...]]:
        with self.network.inside(SERVICES), psycopg.connect(PG_URL, autocommit=True) as conn:
            cursor = conn.execute(query, params)  # type: ignore[arg-type]
            return cursor.fetchall() if cursor.description else []

    def api(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.api_key}"}
        with self.network.inside(SERVICES):
            return httpx.request(method, API_URL + path, headers=headers, timeout=60, **kwargs)

    def objects(self, prefix: str) -> dict[str, tuple[str, Any]]:
        """Every stored object under the prefix: its ETag and last-modified time."""
        from minio import Minio

        with self.network.inside(SERVICES):
            client = Minio(
                f"{SERVICES_ADDRESS}:{S3_PORT}", S3_ACCESS_KEY, S3_SECRET_KEY, secure=False
            )
            return {
                found.object_name: (found.etag, found.last_modified)
                for found in client.list_objects(S3_BUCKET, prefix, recursive=True)
                if found.object_name is not None
            }

    def hold(self, host: str) -> None:
        """Pages reaching the engine on this host wait until `release`."""
        (self.tmp(host) / HOLD_FILE).touch()

    def release(self, host: str) -> None:
        (self.tmp(host) / HOLD_FILE).unlink(missing_ok=True)
        # Left behind when the held attempt was killed at its time limit.
        (self.tmp(host) / HOLDING_FILE).unlink(missing_ok=True)

    def held_page(self, host: str) -> int | None:
        """The id of the page this host holds, if it holds one."""
        try:
            return int((self.tmp(host) / HOLDING_FILE).read_text())
        except (FileNotFoundError, ValueError):
            return None

    def close(self) -> None:
        for name in list(self.processes):
            self.stop(name)
        self.network.remove()
        if not os.environ.get("PAGEMILL_MULTIHOST_KEEP_LOGS"):
            shutil.rmtree(self.base, ignore_errors=True)


def _remove_leftover_dirs() -> None:
    for path in Path(tempfile.gettempdir()).glob(f"pagemill-multihost-{netns.PREFIX}*"):
        owner = path.name.removeprefix(f"pagemill-multihost-{netns.PREFIX}").split("-", 1)[0]
        if owner.isdigit() and not Path(f"/proc/{owner}").exists():
            shutil.rmtree(path, ignore_errors=True)


def _wait_sql(cluster: Cluster, timeout_s: float) -> None:
    def ready() -> bool:
        try:
            with (
                cluster.network.inside(SERVICES),
                psycopg.connect(PG_URL.replace("/pagemill", "/postgres"), connect_timeout=1),
            ):
                return True
        except psycopg.OperationalError:
            return False

    services.wait_until(ready, timeout_s, "Postgres on the services host")


def _s3_ready(cluster: Cluster) -> bool:
    try:
        with cluster.network.inside(SERVICES):
            return services.port_open(SERVICES_ADDRESS, S3_PORT) and bool(
                httpx.get(f"http://{SERVICES_ADDRESS}:{S3_PORT}/", timeout=1).status_code
            )
    except httpx.HTTPError:
        return False


def _start_services(cluster: Cluster, initdb: str, postgres: str) -> None:
    data = cluster.base / SERVICES / "postgres"
    data.mkdir(parents=True)
    shutil.chown(data, "postgres", "postgres")
    # Postgres refuses to run as root: its own user, in its own throwaway cluster.
    netns.run("runuser", "-u", "postgres", "--", initdb, "-D", str(data), "-U", "postgres",
              "--auth=trust", "--no-sync", "-E", "UTF8")  # fmt: skip
    with (data / "pg_hba.conf").open("a") as hba:
        hba.write(f"host all all {SERVICES_ADDRESS}/{netns.SUBNET_BITS} trust\n")
    env = cluster.env(
        SERVICES, AWS_ACCESS_KEY_ID=S3_ACCESS_KEY, AWS_SECRET_ACCESS_KEY=S3_SECRET_KEY
    )
    cluster.start(
        SERVICES, "pm-services",
        ["runuser", "-u", "postgres", "--", postgres, "-D", str(data),
         "-c", f"listen_addresses={SERVICES_ADDRESS}", "-c", f"unix_socket_directories={data}",
         "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"],
        env, name="postgres",
    )  # fmt: skip
    cluster.start(
        SERVICES, "pm-services",
        ["redis-server", "--bind", SERVICES_ADDRESS, "--port", "6379", "--save", "",
         "--appendonly", "no", "--dir", str(cluster.tmp(SERVICES)),
         # Clients come from the other hosts; the network is this test's own.
         "--protected-mode", "no"],
        env, name="redis",
    )  # fmt: skip
    weed = cluster.base / SERVICES / "weed"
    weed.mkdir()
    cluster.start(
        SERVICES, "pm-services",
        [services.weed_binary(), "mini", f"-dir={weed}", f"-ip={SERVICES_ADDRESS}",
         *services.weed_socket_flags(weed), *services.weed_port_flags(S3_PORT - 8333)],
        env, name="seaweedfs",
    )  # fmt: skip
    _wait_sql(cluster, 60)
    with (
        cluster.network.inside(SERVICES),
        psycopg.connect(PG_URL.replace("/pagemill", "/postgres"), autocommit=True) as admin,
    ):
        admin.execute("CREATE DATABASE pagemill")
    _migrate(cluster)
    services.wait_until(lambda: _s3_ready(cluster), 90, "SeaweedFS on the services host")


def _migrate(cluster: Cluster) -> None:
    # The schema as a deployment makes it: `pagemill migrate`, here from the API host.
    done = subprocess.run(
        [*cluster.network.prefix(API, "pm-api"), str(Path(sys.executable).parent / "pagemill"),
         "migrate"],
        env=cluster.env(API), cwd=services.ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"pagemill migrate failed: {done.stderr[-3000:]}")


def _create_client(cluster: Cluster) -> str:
    done = subprocess.run(
        [*cluster.network.prefix(API, "pm-api"), str(Path(sys.executable).parent / "pagemill"),
         "client", "create", "multihost"],
        env=cluster.env(API), cwd=services.ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"pagemill client create failed: {done.stderr[-3000:]}")
    return done.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="package")
def cluster() -> Iterator[Cluster]:
    why = netns.unavailable()
    if why is not None:
        pytest.skip(f"multi-host tests need Linux network namespaces: {why}")
    initdb, postgres = _postgres_bin("initdb"), _postgres_bin("postgres")
    if initdb is None or postgres is None or shutil.which("redis-server") is None:
        pytest.skip("multi-host tests run their own Postgres and Redis: initdb, postgres and "
                    "redis-server must be installed")  # fmt: skip
    netns.remove_leftovers()
    _remove_leftover_dirs()
    base = Path(tempfile.mkdtemp(prefix=f"pagemill-multihost-{netns.PREFIX}{os.getpid()}-"))
    base.chmod(0o755)  # Postgres runs as its own user and must reach its data directory
    cluster = Cluster(network=netns.Network(ADDRESSES), base=base)
    try:
        cluster.network.create()
        _start_services(cluster, initdb, postgres)
        cluster.api_key = _create_client(cluster)
        cluster.start(
            API, "pm-api",
            [sys.executable, "-m", "uvicorn", "api.app:app", "--host", ADDRESSES[API],
             "--port", "8000"],
            cluster.env(API),
        )  # fmt: skip
        cluster.start_worker(W1)
        cluster.start_worker(W2)
        services.wait_until(lambda: _api_ready(cluster), 90, "the API on its host")
        cluster.wait_worker(W1)
        cluster.wait_worker(W2)
        yield cluster
    finally:
        cluster.close()


def _api_ready(cluster: Cluster) -> bool:
    try:
        return cluster.api("GET", "/healthz").status_code == 200
    except httpx.HTTPError:
        return False


def wait_for(check: Any, timeout_s: float, what: str) -> None:
    services.wait_until(check, timeout_s, what)


def db_now(cluster: Cluster) -> Any:
    """The database's clock: the one every lease and heartbeat is read against."""
    [(now,)] = cluster.sql("SELECT clock_timestamp()")
    return now
