"""The long run: one query at a steady produce rate for many minutes, a failure every minute.

    python tests/python/longrun.py [--minutes 12] [--rate 200] [--strategy checkpoint-dedup] [--seed N]

A kafka-share query (spark_apps/share_stream.py, local-cluster mode: real executor JVMs) reads a
2-partition topic that a producer fills at `rate` records a second for `minutes`. Every minute one
failure strikes, in turn: an executor is SIGKILLed (F3), the broker is SIGKILLed and started again
(F6), the driver JVM is paused 20 s (F7), the driver is SIGKILLed and the query started again on its
checkpoint (F4/F5). Before each failure the live heap of the driver and of every executor is measured
(a full GC, then jstat): a leak shows as a heap that grows from minute to minute.

At the end it waits for the sink to hold every produced key, then counts lost and doubled and prints
the heap table. `make longrun` runs it; docs/internals/reliability.md holds the latest figures. Exits 1 when a
record was lost, or doubled with an exactly-once strategy.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from chaos import EXACTLY_ONCE, LOCK_MS
from harness import ROOT, Broker, broker_versions, harness
from spark_runs import finish, start_spark

FAILURES = ["F3 executor SIGKILL", "F6 broker SIGKILL + restart", "F7 driver paused 20 s", "F4 driver SIGKILL + restart"]


def live_heap_mb(pid: int) -> float | None:
    """Live heap of a JVM: a full GC, then the used young, survivor and old spaces (jstat, KB)."""
    try:
        subprocess.run(["jcmd", str(pid), "GC.run"], capture_output=True, timeout=30, check=True)
        out = subprocess.run(["jstat", "-gc", str(pid)], capture_output=True, text=True, timeout=30, check=True).stdout
    except (subprocess.SubprocessError, OSError):
        return None  # the process is gone (it was just killed) or does not answer
    names, values = out.split("\n")[0].split(), out.split("\n")[1].split()
    used = dict(zip(names, values))
    return round(sum(float(used[k]) for k in ("S0U", "S1U", "EU", "OU")) / 1024, 1)


def executor_pids(app_id: str) -> list[int]:
    found = subprocess.run(["pgrep", "-f", f"CoarseGrainedExecutorBackend.*{app_id}"], capture_output=True, text=True)
    return [int(p) for p in found.stdout.split()]


class Query:
    """The query process, which a driver kill replaces with a new one on the same checkpoint."""

    def __init__(self, config: dict[str, object], work: Path) -> None:
        self.config, self.work, self.starts = config, work, 0
        self.start()

    def start(self) -> None:
        pid_file = self.work / "driver.json"
        pid_file.unlink(missing_ok=True)
        self.process = start_spark("share_stream.py", json.dumps(self.config))
        self.starts += 1
        deadline = time.time() + 120
        while not pid_file.exists() and time.time() < deadline:
            time.sleep(0.5)
        started = json.loads(pid_file.read_text())
        self.pid, self.app_id = int(started["pid"]), str(started["app_id"])

    def kill_driver_and_restart(self) -> None:
        os.kill(self.pid, signal.SIGKILL)
        self.process.kill()
        self.process.communicate()
        self.start()

    def landed(self) -> int:
        status = Path(str(self.config["status_file"]))
        return int(status.read_text() or 0) if status.exists() else 0


def inject(failure: str, query: Query, broker: Broker) -> None:
    if failure.startswith("F3"):
        pids = executor_pids(query.app_id)
        if pids:
            os.kill(pids[0], signal.SIGKILL)
    elif failure.startswith("F6"):
        harness("kill", str(broker.directory))
        harness("start", broker.version, str(broker.directory))
    elif failure.startswith("F7"):
        os.kill(query.pid, signal.SIGSTOP)
        time.sleep(20)
        os.kill(query.pid, signal.SIGCONT)
    else:
        query.kill_driver_and_restart()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=int, default=12)
    parser.add_argument("--rate", type=int, default=200, help="records a second")
    parser.add_argument("--strategy", default="checkpoint-dedup")
    parser.add_argument("--seed", type=int, default=int(time.time()) % 100000)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    work = ROOT / "target" / "longrun"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    os.environ["KAFKASHARE_RUN"] = "longrun"
    print(f"long run: {args.minutes} min at {args.rate} records/s, strategy {args.strategy}, seed {args.seed}", flush=True)

    broker = Broker(broker_versions()[-1], work / "broker").start()
    topic, group = "longrun", "longrun-group"
    broker.create_topic(topic, 2)
    broker.group_config(group, {"share.record.lock.duration.ms": str(LOCK_MS), "share.auto.offset.reset": "earliest"})
    produced: list[int] = []
    producer = threading.Thread(
        target=lambda: produced.append(
            int(
                harness(
                    "produce-rate",
                    broker.bootstrap,
                    topic,
                    str(args.rate),
                    str(args.minutes * 60),
                    timeout=args.minutes * 60 + 600,
                )
            )
        )
    )
    config: dict[str, object] = {
        "bootstrap": broker.bootstrap,
        "topic": topic,
        "group": group,
        "strategy": args.strategy,
        "parallelism": 2,
        "master": "local-cluster[2,1,1024]",
        "checkpoint": str(work / "checkpoint"),
        "sink": str(work / "sink"),
        "status_file": str(work / "status"),
        "status_every_s": 20,
        "until_file": str(work / "enough"),
        "pid_file": str(work / "driver.json"),
        "timeout_s": args.minutes * 60 + 900,
        "expected": 0,
    }
    rows: list[str] = []
    try:
        query = Query(config, work)
        producer.start()
        started = time.time()
        order = FAILURES[:]
        rng.shuffle(order)
        for minute in range(1, args.minutes + 1):
            # A random moment in this minute, so that failures strike batches at different phases.
            time.sleep(max(0.0, started + (minute - 1) * 60 + rng.uniform(20, 40) - time.time()))
            driver = live_heap_mb(query.pid)
            executors = [h for h in (live_heap_mb(p) for p in executor_pids(query.app_id)) if h is not None]
            failure = order[(minute - 1) % len(order)] if minute < args.minutes else "-"
            rows.append(f"| {minute} | {driver} | {', '.join(map(str, executors))} | {query.landed()} | {failure} |")
            print(rows[-1], flush=True)
            if failure != "-":
                inject(failure, query, broker)
        producer.join()
        total = produced[0]
        deadline = time.time() + 300
        while query.landed() < total and time.time() < deadline:
            time.sleep(5)
        (work / "enough").touch()
        result = finish(query.process, timeout=300)
    finally:
        broker.stop()
    rows_landed, distinct = int(result["rows"]), int(result["distinct"])
    lost, doubled = total - distinct, rows_landed - distinct
    print(
        "\n| minute | driver live heap MB | executors live heap MB | landed so far | failure then |\n"
        "|---:|---:|---|---:|---|\n" + "\n".join(rows)
    )
    print(
        f"\nproduced {total}, landed {rows_landed}, lost {lost}, doubled {doubled}; query started {query.starts} times; "
        f"{len(rows) - 1} failures; seed {args.seed}"
    )
    bad = lost > 0 or (doubled > 0 and args.strategy in EXACTLY_ONCE)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
