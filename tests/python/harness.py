"""The Kafka test harness (tests/harness, Scala) driven from Python through its command line.

The build writes target/harness.classpath and target/brokers/<version>/classpath.txt
(`make build`); each call here is one short JVM.
"""

from __future__ import annotations

import json
import subprocess
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


def harness(*args: str, timeout: float = 180) -> str:
    """Runs one HarnessCli command and returns its standard output; raises with its stderr on failure."""
    classpath = (ROOT / "target" / "harness.classpath").read_text().strip()
    command = ["java", f"-Dkafkashare.root={ROOT}", "-cp", classpath, "io.github.kafkashare.testkit.HarnessCli", *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"harness {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    return done.stdout.strip()


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
