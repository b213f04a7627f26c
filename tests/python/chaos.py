"""The failure suite: every failure of the delivery contract (docs/internals/delivery-semantics.md, F1 to F11), every strategy.

Each cell runs a real kafka-share query (spark_apps/share_stream.py) against a real broker, injects
one failure at a seeded random point, reads the sink back and counts produced, landed, lost and
doubled, and how long the query took to commit a batch after the failure. The cells of one failure run
side by side: a query per strategy in one Spark application, each in its own group (run_cells). Processes die for real:
SIGKILL for the driver (F4, F5), an executor (F3) and the broker (F6), SIGSTOP for a pause (F7).

    python tests/python/chaos.py [--seed N] [--records N] [--failures F1,F3] [--strategies none,...]
                                 [--cluster]

`make chaos` runs every cell, the 3-node cluster scenario and writes target/chaos/table.md;
docs/internals/reliability.md holds the latest table. The pytest suite (test_delivery.py) runs a subset of the
same cells in CI.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import ROOT, Broker, Cluster, broker_versions, harness
from spark_runs import finish, run_spark, start_spark

STRATEGIES = ["none", "idempotent", "checkpoint-dedup", "two-phase-commit"]
EXACTLY_ONCE = {"checkpoint-dedup", "two-phase-commit"}
FAILURES = {
    "F1": "a read task throws midway; Spark retries it",
    "F2": "the batch fails after its reader finished; the query restarts",
    "F3": "an executor JVM is killed (SIGKILL, local-cluster mode)",
    "F4": "the driver is killed after offset log N, before the sink has N; restart",
    "F5": "the driver is killed after the sink has N, before commit log N; restart",
    "F6": "the broker is killed (SIGKILL) and started again mid-stream",
    "F7": "the Spark JVM pauses (SIGSTOP) longer than the session and the locks",
    "F8": "foreachBatch runs two actions on the batch",
    "F9": "two queries and Kafka's console share consumer in one group",
    "F10": "a poison record fails its batch three times, then the fix is deployed",
    "F11": "the query is stopped and started five times in a row",
}
LOCK_MS = 15000  # the shortest lock the broker allows: what a dead consumer held comes back quickly


@dataclass
class Cell:
    failure: str
    strategy: str
    produced: int
    landed: int
    lost: int
    doubled: int
    recover_s: float | None
    detail: str = ""
    restarts: int = 0  # how often the last run had to start its query again after it failed

    def row(self) -> str:
        recover = "-" if self.recover_s is None else f"{self.recover_s:.1f}"
        return (
            f"| {self.failure} | {self.strategy} | {self.produced} | {self.landed} | {self.lost} | {self.doubled} "
            f"| {recover} | {self.detail} |"
        )

    def problems(self) -> list[str]:
        """The suite's requirements: nothing lost anywhere, nothing doubled with exactly-once strategies."""
        found = []
        if self.lost:
            found.append(f"{self.failure}/{self.strategy}: {self.lost} records lost")
        if self.doubled and self.strategy in EXACTLY_ONCE:
            found.append(f"{self.failure}/{self.strategy}: {self.doubled} records landed twice")
        return found


TABLE_HEADER = (
    "| failure | strategy | produced | landed | lost | doubled | seconds to recover | detail |\n"
    "|---|---|---:|---:|---:|---:|---:|---|"
)


def run_cell(broker: Broker, work: Path, failure: str, strategy: str, seed: int, **settings: Any) -> Cell:
    """One failure against one strategy (the settings: those of run_cells)."""
    return run_cells(broker, work, failure, [strategy], seed, **settings)[0]


def run_cells(
    broker: Broker,
    work: Path,
    failure: str,
    strategies: list[str],
    seed: int,
    records: int = 4000,
    group_timing: dict[str, str] | None = None,
    checkpoint: str | None = None,
    spark_conf: dict[str, str] | None = None,
    slow_batch_s: float = 0,
) -> list[Cell]:
    """One failure against several strategies at once: a query per strategy in one Spark application,
    each in its own share group on one topic (a group reads the whole topic), with its own checkpoint and
    sink, so that one Spark start serves every cell. A failure at a batch (F4, F5) strikes each query at
    its own seeded batch; one at a moment (F3, F6, F7) strikes all of them together. F9 runs alone.
    `work` is an empty directory for the checkpoints and the sinks.
    `group_timing`: the groups' heartbeat and session settings (by default the broker's, as in production).
    `checkpoint`: a URI on another store (s3a://...) instead of work/checkpoint, with `spark_conf` to reach it.
    `slow_batch_s`: F4 strikes that long into the batch (its foreachBatch sleeps first)."""
    assert len(strategies) == 1 or (failure != "F9" and checkpoint is None), "F9 and other stores run one strategy"
    if failure == "F9":
        return [_shared_group_cell(broker, work, strategies[0], seed, records, group_timing)]
    rngs = {s: random.Random(f"{seed}/{failure}/{s}") for s in strategies}
    rng = rngs[strategies[0]]  # the moment and the node of a failure that strikes all queries
    name = f"chaos-{failure}-{'-'.join(s[:4] for s in strategies)}-{uuid.uuid4().hex[:6]}".lower()
    topic = name
    broker.create_topic(topic, 2)
    groups = {s: f"{name}-{s}-group" for s in strategies}
    for group in groups.values():
        broker.group_config(group, _group_settings(failure, group_timing))
    upstream, records = _produce(broker, topic, failure, records)
    per_query = []
    # A failure at a batch or a key: each strategy draws from its own seed what it drew when it ran alone.
    # A failure at a moment (and F6's node) strikes all queries at once: the first strategy's seed draws it.
    failure_batches = {s: rngs[s].randint(1, 3) for s in strategies}
    inject_after = {s: round(rngs[s].uniform(0.0, 2.0), 1) for s in strategies}  # each draws it, as alone
    inject_after_s = inject_after[strategies[0]]
    for s in strategies:
        own = work if len(strategies) == 1 else work / s
        own.mkdir(parents=True, exist_ok=True)
        per_query.append(
            {
                "group": groups[s],
                "strategy": s,
                "checkpoint": checkpoint or str(own / "checkpoint"),
                "sink": str(own / "sink"),
                "marker": str(own / "injected"),
                "failure_batch": failure_batches[s],
            }
        )
    config: dict[str, object] = {
        "bootstrap": broker.bootstrap,
        "topic": topic,
        "parallelism": 2,
        "spark_conf": spark_conf or {},
        "expected": records,
        "timeout_s": 240,
        "failure": failure,
        # At least five batches, so that the failure can strike any of batches 1 to 3, with several
        # polls (parts) per read task where the strategy allows it: tasks of 400 records, polls of
        # about 150 (max.poll.records plus the rest of the record batch a poll ends in).
        "options": {"kafka.max.poll.records": 150, "maxRecordsPerTrigger": 800},
        "inject_after_s": inject_after_s,
        "slow_batch_s": slow_batch_s,
    }
    where = {s: f"batch {failure_batches[s]}" + (f", {slow_batch_s:g} s into it" if slow_batch_s else "") for s in strategies}
    if failure in ("F3", "F6", "F7"):
        where = dict.fromkeys(strategies, f"{inject_after_s} s after the first rows")
    if failure == "F3":
        config["master"] = "local-cluster[2,1,1024]"
    if failure == "F6":
        node = rng.choice(broker.node_dirs())
        config.update({"broker_dir": str(node), "broker_version": broker.version})
        if len(broker.node_dirs()) > 1:
            where = {s: f"{w}, {node.name}" for s, w in where.items()}
    if failure == "F7":
        config["pause_s"] = LOCK_MS / 1000 + 5
    if failure == "F10":
        for q, s in zip(per_query, strategies):
            q["poison_key"] = str(rngs[s].randrange(records))
            where[s] = f"key {q['poison_key']}"
    if len(strategies) == 1:
        config.update(per_query[0])
    else:
        config["queries"] = per_query
    timeout = 2 * float(str(config["timeout_s"])) + 120 + 60 * (len(strategies) - 1)
    if failure in ("F4", "F5"):
        run_spark("share_stream.py", json.dumps(config), timeout=400 + 60 * (len(strategies) - 1), killed=True)
    if failure == "F11":
        for _ in range(5):
            run_spark("share_stream.py", json.dumps({**config, "stop_after_batches": 1}), timeout=timeout)
        for q in per_query:
            Path(str(q["marker"])).write_text(str(time.time()))  # "injected": the last stop
        where = dict.fromkeys(strategies, "5 stops")
    result = run_spark("share_stream.py", json.dumps(config), timeout=timeout)
    if upstream:
        upstream.join()
    results = result["queries"] if len(strategies) > 1 else [result]
    cells, errors = [], []
    for q, s, r in zip(per_query, strategies, results):
        if not Path(str(q["marker"])).exists() and failure not in ("F8", "-"):
            errors.append(f"{failure}/{s}: the failure was never injected: {r.get('progress')}")
        mismatch = Path(f"{q['sink']}.replay-mismatch")
        if mismatch.exists():
            errors.append(f"{failure}/{s}: two reads of one batch differed: {mismatch.read_text()}")
        rows, distinct = int(r["rows"]), int(r["distinct"])
        recover_s = None if checkpoint else _seconds_to_recover(Path(str(q["marker"])), Path(str(q["checkpoint"])))
        cells.append(
            Cell(failure, s, records, rows, records - distinct, rows - distinct, recover_s, where[s], int(r.get("restarts", 0)))
        )
    if errors:  # every strategy's, with the counts of all: one strategy's error hides no other's result
        raise AssertionError("; ".join(errors) + " | " + " | ".join(c.row() for c in cells))
    return cells


def _shared_group_cell(
    broker: Broker, work: Path, strategy: str, seed: int, records: int, group_timing: dict[str, str] | None
) -> Cell:
    """F9's setting: a topic and a group for two queries and Kafka's console share consumer."""
    rng = random.Random(f"{seed}/F9/{strategy}")
    rng.randint(1, 3), rng.uniform(0.0, 2.0)  # the draws of the other cells, so that the seed gives what it gave
    topic = f"chaos-f9-{strategy}-{uuid.uuid4().hex[:6]}".lower()
    broker.create_topic(topic, 2)
    broker.group_config(f"{topic}-group", _group_settings("F9", group_timing))
    upstream, records = _produce(broker, topic, "F9", records)
    config: dict[str, object] = {
        "bootstrap": broker.bootstrap,
        "topic": topic,
        "group": f"{topic}-group",
        "strategy": strategy,
        "parallelism": 2,
        "expected": records,
        "timeout_s": 240,
        "options": {"kafka.max.poll.records": 150, "maxRecordsPerTrigger": 800},
    }
    cell = _shared_group(broker, work, config, rng, records)
    if upstream:
        upstream.join()
    return cell


def _group_settings(failure: str, group_timing: dict[str, str] | None) -> dict[str, str]:
    # Earliest before anyone joins: F9's console consumer may join the group before the queries do.
    settings = {"share.record.lock.duration.ms": str(LOCK_MS), "share.auto.offset.reset": "earliest"}
    settings.update(group_timing or {})
    if failure == "F7":  # a short session, so that the pause outlives it (the harness lowers the broker's minimum)
        settings.update({"share.session.timeout.ms": "6000", "share.heartbeat.interval.ms": "1000"})
    return settings


def _produce(broker: Broker, topic: str, failure: str, records: int) -> tuple[threading.Thread | None, int]:
    """Produces the cell's records: all before the query starts, or for F3, F6, F7 and F9 half now and half
    while the query runs (20 s at a steady rate), so that the failure strikes mid-stream. Gives the thread
    producing the second half and the number of records in all."""
    if failure not in ("F3", "F6", "F7", "F9"):
        broker.produce(topic, records)
        return None, records
    broker.produce(topic, records // 2)
    rate = max(10, (records - records // 2) // 20 // 10 * 10)
    upstream = threading.Thread(
        target=harness,
        args=("produce-rate", broker.bootstrap, topic, str(rate), "20", str(records // 2)),
        kwargs={"timeout": 400},
    )
    upstream.start()
    return upstream, records // 2 + rate * 20


def _seconds_to_recover(marker: Path, checkpoint: Path) -> float | None:
    """From the injection to the first batch committed after it (commit log file times)."""
    if not marker.exists() or not marker.read_text().strip():
        return None
    injected_at = float(marker.read_text())
    commits = [f.stat().st_mtime for f in (checkpoint / "commits").iterdir() if f.name.isdigit()]
    after = [t for t in commits if t > injected_at]
    return round(min(after) - injected_at, 1) if after else None


def _console_share_consumer(broker: Broker, topic: str, group: str, max_messages: int) -> list[str]:
    """Kafka's own kafka-console-share-consumer (kafka-tools), as its own process: the keys it received."""
    classpath = (ROOT / "target" / "bench" / "tools.classpath").read_text().strip()
    done = subprocess.run(
        [
            "java",
            "-Xmx256m",
            "-cp",
            classpath,
            "org.apache.kafka.tools.consumer.ConsoleShareConsumer",
            "--bootstrap-server",
            broker.bootstrap,
            "--topic",
            topic,
            "--group",
            group,
            "--property",
            "print.key=true",
            "--property",
            "print.value=false",
            "--max-messages",
            str(max_messages),
            "--timeout-ms",
            "20000",
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    if done.returncode != 0:
        raise AssertionError(f"kafka-console-share-consumer exited {done.returncode}: {done.stderr[-2000:]}")
    return [line.strip() for line in done.stdout.splitlines() if line.strip().isdigit()]


def _shared_group(broker: Broker, work: Path, config: dict[str, object], rng: random.Random, records: int) -> Cell:
    """F9: two queries share the group with Kafka's console share consumer, all started together."""
    queries = []
    for q in ("a", "b"):
        queries.append(
            {
                **config,
                "checkpoint": str(work / f"checkpoint-{q}"),
                "sink": str(work / f"sink-{q}"),
                "status_file": str(work / f"status-{q}"),
                "until_file": str(work / "enough"),
                "report_keys": True,
                "failure": "none",
                "marker": str(work / f"marker-{q}"),
            }
        )
    processes = [start_spark("share_stream.py", json.dumps(q)) for q in queries]
    statuses = [Path(str(q["status_file"])) for q in queries]

    def landed_by_queries() -> int:
        return sum(int(s.read_text() or 0) for s in statuses if s.exists())

    # Kafka's console share consumer joins with the queries and takes a seeded number of records.
    outside: list[str] = []
    console_failed: list[BaseException] = []

    def console_reads() -> None:
        try:
            outside.extend(
                _console_share_consumer(broker, str(config["topic"]), str(config["group"]), rng.randint(100, records // 4))
            )
        except BaseException as e:  # the cell must not pass without the third member it is about
            console_failed.append(e)

    console = threading.Thread(target=console_reads)
    console.start()
    deadline = time.time() + 240
    console.join(timeout=200)
    while landed_by_queries() + len(outside) < records and time.time() < deadline:
        time.sleep(1)
    time.sleep(3)  # a record landing twice would show in these seconds
    (work / "enough").touch()
    results = [finish(p, timeout=120) for p in processes]
    if console_failed:
        raise AssertionError(f"F9: Kafka's console share consumer did not run: {console_failed[0]}")
    if not outside:  # it exits 0 with nothing when its --timeout-ms passes: the group was not shared
        raise AssertionError("F9: Kafka's console share consumer received no record")
    by_member = {
        "query a": list(results[0].get("keys", [])),
        "query b": list(results[1].get("keys", [])),
        "console consumer": outside,
    }
    everything = [k for keys in by_member.values() for k in keys]
    received = set(everything)
    detail = ", ".join(f"{member} {len(keys)}" for member, keys in by_member.items())
    # Where doubles are, they say who took a record twice: one member (a replay) or two (a lock that ran out).
    members = list(by_member)
    overlaps = [
        f"{x} and {y} both {n}"
        for i, x in enumerate(members)
        for y in members[i + 1 :]
        if (n := len(set(by_member[x]) & set(by_member[y])))
    ]
    inside = [f"{m} twice {n}" for m, keys in by_member.items() if (n := len(keys) - len(set(keys)))]
    if overlaps or inside:
        detail += " (" + "; ".join(overlaps + inside) + ")"
    landed_keys = received & {str(i) for i in range(records)}
    return Cell(
        "F9",
        str(config["strategy"]),
        records,
        len(everything),
        records - len(landed_keys),
        len(everything) - len(received),
        None,
        detail,
    )


def print_table(cells: list[Cell], seed: int, out: Path | None) -> None:
    text = f"seed {seed}\n\n{TABLE_HEADER}\n" + "\n".join(c.row() for c in cells) + "\n"
    print(text, flush=True)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=int(time.time()) % 100000)
    parser.add_argument("--records", type=int, default=4000)
    parser.add_argument("--failures", default=",".join(FAILURES))
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    parser.add_argument("--cluster", action="store_true", help="also kill and restart one node of a 3-node cluster")
    args = parser.parse_args()
    print(f"chaos suite, seed {args.seed} (rerun the same points with --seed {args.seed})", flush=True)
    out = ROOT / "target" / "chaos"
    work = out / f"run-{args.seed}"
    shutil.rmtree(work, ignore_errors=True)  # a rerun of a seed must not find the last run's checkpoints and sinks
    version = broker_versions()[-1]
    broker = Broker(version, work / "broker").start()
    cells: list[Cell] = []
    try:
        strategies = args.strategies.split(",")
        for failure in filter(None, args.failures.split(",")):  # --failures "" --cluster: the cluster only
            # One Spark application for all strategies (F9, two queries and a console consumer, one each).
            runs = [[s] for s in strategies] if failure == "F9" else [strategies]
            for together in runs:
                started = time.time()
                cell_dir = work / f"{failure}-{'-'.join(together)}"
                try:
                    done = run_cells(broker, cell_dir, failure, together, args.seed, args.records)
                except Exception as e:  # cells that could not run are failed cells, reported with the rest
                    done = [Cell(failure, s, args.records, 0, args.records, 0, None, f"ERROR {str(e)[:200]}") for s in together]
                cells.extend(done)
                for cell in done:
                    print(cell.row(), f"({time.time() - started:.0f} s for {len(done)})", flush=True)
        if args.cluster:
            cluster = Cluster(version, work / "cluster").start()
            try:
                for cell in run_cells(cluster, work / "cluster", "F6", strategies, args.seed, args.records):
                    cell.failure = "F6 (3 nodes)"
                    cells.append(cell)
                    print(cell.row(), flush=True)
            finally:
                cluster.stop()
    finally:
        broker.stop()
    print_table(cells, args.seed, out / "table.md")
    problems = [p for c in cells for p in c.problems()] + [
        f"{c.failure}/{c.strategy}: {c.detail}" for c in cells if c.detail.startswith("ERROR")
    ]
    for p in problems:
        print("FAILED:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
