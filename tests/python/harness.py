"""The Kafka test harness (tests/harness, Scala) driven from Python through its command line.

The build writes target/harness.classpath and target/brokers/<version>/classpath.txt
(`make build`). Calls go to long-lived harness JVMs (`HarnessCli serve`), one per concurrent caller
of this process, started on first use: a JVM per call cost about a second each.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def pins() -> dict[str, str]:
    """versions.properties, the project's one place for versions."""
    result = {}
    for line in (ROOT / "versions.properties").read_text().splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            key, value = line.split("=", 1)
            result[key.strip()] = value.strip()
    return result


def broker_versions() -> list[str]:
    return pins()["kafka.broker.versions"].split()


class _HarnessServer:
    """One `HarnessCli serve` JVM: a command per line (arguments separated by tabs), answered by its
    output and a line `@@harness-done <status>`. Its standard error goes to a log file."""

    END = "@@harness-done"

    def __init__(self) -> None:
        classpath = (ROOT / "target" / "harness.classpath").read_text().strip()
        logs = ROOT / "target" / "test-results" / "harness-logs"
        logs.mkdir(parents=True, exist_ok=True)
        self.log = logs / f"harness-{os.getpid()}-{id(self)}.log"
        with self.log.open("a") as log:  # the child keeps its own copy of the file
            self.process = subprocess.Popen(
                [
                    "java",
                    "-Xmx256m",
                    f"-Dkafkashare.root={ROOT}",
                    "-cp",
                    classpath,
                    "io.github.kafkashare.testkit.HarnessCli",
                    "serve",
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                # Called from a Spark application too (F6 restarts the broker): the JIT setting of its
                # JVMs (spark_runs.SPARK_TEST_JAVA_OPTIONS) is not for the harness and the brokers it starts.
                env={k: v for k, v in os.environ.items() if k != "JDK_JAVA_OPTIONS"},
            )

    def call(self, args: tuple[str, ...], timeout: float) -> tuple[int, str]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(("\t".join(args) + "\n").encode())
        self.process.stdin.flush()
        # Raw reads from the pipe: a buffered reader could hold the answer's end while select() waits.
        deadline, received, out = time.monotonic() + timeout, b"", self.process.stdout.fileno()
        end_line = b"\n" + self.END.encode() + b" "
        while True:
            # With a newline in front, the end line is found alike after output and after none.
            answer = b"\n" + received
            end = answer.rfind(end_line)
            if end >= 0 and answer.endswith(b"\n"):
                return int(answer[end + len(end_line) :]), received[:end].decode(errors="replace")
            readable, _, _ = select.select([out], [], [], max(0.0, deadline - time.monotonic()))
            if not readable:
                self.close(kill=True)
                raise TimeoutError(f"harness {' '.join(args)}: no answer in {timeout} s (log: {self.log})")
            chunk = os.read(out, 65536)
            if not chunk:
                self.close(kill=True)
                raise RuntimeError(f"harness JVM ended during {' '.join(args)} (log: {self.log})")
            received += chunk

    def close(self, kill: bool = False) -> None:
        if not kill and self.process.stdin is not None:
            self.process.stdin.close()  # the server ends at the end of its input
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                kill = True
        if kill:
            self.process.kill()
            self.process.wait()


_idle: list[_HarnessServer] = []
_idle_lock = threading.Lock()


@atexit.register
def _close_servers() -> None:
    with _idle_lock:
        while _idle:
            _idle.pop().close()


def harness(*args: str, timeout: float = 180) -> str:
    """Runs one HarnessCli command and returns its standard output; raises with its error on failure.
    A caller takes an idle server or starts one, so that concurrent calls (a producer thread) never wait
    for each other."""
    if any("\t" in a or "\n" in a for a in args):
        raise ValueError(f"harness arguments may hold no tab or newline: {args!r}")
    with _idle_lock:
        server = _idle.pop() if _idle else None
    server = server or _HarnessServer()
    status, output = server.call(args, timeout)  # a timeout kills the server: it is not given back
    with _idle_lock:
        _idle.append(server)
    if status != 0:
        raise RuntimeError(f"harness {' '.join(args)} failed ({status}):\n{output[-4000:]}")
    return output.strip()


# Group timing for most tests (the harness lowers the broker's minimums):
#  - a one-second heartbeat: a new consumer gets its partitions with a heartbeat, and the default
#    interval (5 s) costs every query start and restart that long;
#  - a ten-second session: records that a killed driver's consumers had acquired come back when their
#    session expires (measured: a driver crash cost a test 45 s, the default session, and not the 15 s
#    lock; with this session a crash cell takes 50 s instead of 80 s).
# The installed-jar test (test_delivery.py), `make chaos` and the stream suites' `none` tests keep the
# defaults, so that the usual timing stays tested.
TEST_GROUP_TIMING = {"share.heartbeat.interval.ms": "1000", "share.session.timeout.ms": "10000"}


@dataclass
class Broker:
    """A real single-node Kafka broker in its own JVM, data in `directory`."""

    version: str
    directory: Path
    bootstrap: str = ""

    @property
    def log(self) -> Path:
        return self.directory / "broker.log"

    # The node the failure tests kill and start again (F6): the broker itself, or one node of a cluster.
    def node_dirs(self) -> list[Path]:
        return [self.directory]

    def start(self, share_groups: bool = True, secure: bool = False) -> Broker:
        flags = ([] if share_groups else ["share-groups-off"]) + (["secure"] if secure else [])
        self.bootstrap = harness("start", self.version, str(self.directory), *flags).splitlines()[-1]
        return self

    def note(self, name: str) -> str:
        """What the harness noted for clients: sasl.bootstrap, sasl.user, sasl.password, ssl.bootstrap, ssl.truststore..."""
        return harness("note", str(self.directory), name)

    def stop(self) -> None:
        harness("stop", str(self.directory))

    def kill(self) -> None:
        harness("kill", str(self.directory))

    def log_tail(self, lines: int = 60) -> str:
        if not self.log.exists():
            return "(no broker log)"
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    # Test data and inspection -------------------------------------------------------------
    def create_topic(self, topic: str, partitions: int) -> None:
        harness("create-topic", self.bootstrap, topic, str(partitions))

    def delete_topic(self, topic: str) -> None:
        harness("delete-topic", self.bootstrap, topic)

    def group_config(self, group: str, settings: dict[str, str]) -> None:
        harness("group-config", self.bootstrap, group, *(f"{k}={v}" for k, v in settings.items()))

    def read_from_earliest(self, group: str) -> None:
        harness("earliest", self.bootstrap, group)

    def produce(self, topic: str, count: int, value_bytes: int = 100, first_key: int = 0, bulk: bool = False) -> None:
        """Typical 16 KB producer batches, or 256 KB lz4 ones (`bulk`, for benchmarks): a poll returns whole batches."""
        harness(
            "produce",
            self.bootstrap,
            topic,
            str(count),
            str(value_bytes),
            str(first_key),
            *(["bulk"] if bulk else []),
            timeout=400,
        )

    def share_consume(self, group: str, topic: str, expected: int, timeout_ms: int = 60000) -> int:
        return int(harness("share-consume", self.bootstrap, group, topic, str(expected), str(timeout_ms)))

    def read_topic(self, topic: str) -> list[dict[str, Any]]:
        """Every record of a topic read with a plain consumer: key and headers (as strings)."""
        return [json.loads(line) for line in harness("read-topic", self.bootstrap, topic).splitlines() if line.strip()]

    def group_state(self, group: str) -> dict[str, Any]:
        state: dict[str, Any] = json.loads(harness("group-state", self.bootstrap, group))
        return state


@dataclass
class Cluster(Broker):
    """A KRaft cluster of `nodes` nodes on loopback (replication factor 3, min ISR 2), data in `directory`/node-i."""

    nodes: int = 3

    def node_dirs(self) -> list[Path]:
        return [self.directory / f"node-{i}" for i in range(1, self.nodes + 1)]

    @property
    def log(self) -> Path:
        return self.directory / "node-1" / "broker.log"

    def start(self, share_groups: bool = True, secure: bool = False) -> Broker:
        started = harness("start-cluster", self.version, str(self.directory), str(self.nodes), timeout=300)
        self.bootstrap = started.splitlines()[-1]
        return self

    def stop(self) -> None:
        for node in self.node_dirs():
            harness("stop", str(node))
