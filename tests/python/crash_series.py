"""Many driver crashes of one query into Delta: the scenario of issue 13, item 13, as a user ran it.

One two-phase-commit (or checkpoint-dedup) query reads a 4-partition topic with parallelism 4 and
maxRecordsPerTrigger 1000 into a Delta table (foreachBatch, idempotent through txnAppId/txnVersion).
Its driver is SIGKILLed again and again, from the same checkpoint: at random moments (F4r: seconds
after the run's first committed batch, whatever it is doing) and right after Delta committed a batch
and before Spark's commit log has it (F5), in a seeded random order. Then one clean run reads to the
end. It prints produced, landed, lost and doubled, the restarts that failed (a query that stopped
with an error after a restart and had to be started again: 0 is the requirement), and the source's
metrics of the last batch (records on their last delivery attempt among them).

    python tests/python/crash_series.py [--seed N] [--records 20000] [--random-kills 5] [--sink-kills 3]
                                        [--strategies two-phase-commit,checkpoint-dedup]

`make crash-series` runs it on the oldest Spark (Delta supports no newer pyspark yet) with Delta's jars;
docs/internals/reliability.md holds the latest table. Exit 1 when a record is lost, doubled (both strategies are
exactly-once) or a restart failed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from harness import ROOT, TEST_GROUP_TIMING, Broker, broker_versions
from spark_runs import finish, start_spark

PARTITIONS, PARALLELISM, PER_TRIGGER = 4, 4, 1000


def highest_batch(checkpoint: Path, log: str) -> int:
    folder = checkpoint / log
    return max((int(f.name) for f in folder.iterdir() if f.name.isdigit()), default=-1) if folder.exists() else -1


def run_once(config: dict[str, Any], timeout: float) -> tuple[str, dict[str, Any]]:
    """One run of the query: ('killed', {}) when its driver died by the injected SIGKILL (the app notes the
    moment in its marker file first), ('ended', result) when it ran to its end, ('died', {}) otherwise."""
    result = finish(start_spark("share_stream.py", json.dumps(config)), timeout=timeout, killed=None)
    if result:
        return "ended", result
    return ("killed", {}) if Path(config.get("marker", "/nonexistent")).exists() else ("died", {})


def series(broker: Broker, work: Path, strategy: str, args: argparse.Namespace, rng: random.Random) -> dict[str, Any]:
    topic, group = f"orders-{strategy}", f"spark-{strategy}"
    broker.create_topic(topic, PARTITIONS)
    broker.group_config(group, {"share.record.lock.duration.ms": str(args.lock_ms), **TEST_GROUP_TIMING})
    broker.produce(topic, args.records)
    checkpoint, failed_restarts = work / "checkpoint", work / "failed-restarts.json"
    base: dict[str, Any] = {
        "bootstrap": broker.bootstrap,
        "topic": topic,
        "group": group,
        "strategy": strategy,
        "parallelism": PARALLELISM,
        "checkpoint": str(checkpoint),
        "sink": str(work / "sink"),
        "expected": args.records,
        "delta": True,
        "delta_jars": os.environ["KAFKASHARE_DELTA_JARS"],
        "options": {"maxRecordsPerTrigger": PER_TRIGGER},
        "restarts_file": str(failed_restarts),
    }
    kills = ["F4r"] * args.random_kills + ["F5"] * args.sink_kills
    rng.shuffle(kills)
    events: list[str] = []
    for n, kill in enumerate(kills):
        config = {**base, "failure": kill, "marker": str(work / f"kill-{n}"), "timeout_s": 300}
        if kill == "F4r":
            config["inject_after_s"] = round(rng.uniform(0.0, 8.0), 1)
            moment = f"{config['inject_after_s']} s after a committed batch"
        else:
            # A batch this run will reach: the one after the first it runs (a restart runs the
            # interrupted batch again first).
            config["failure_batch"] = highest_batch(checkpoint, "commits") + 2
            moment = f"after Delta committed batch {config['failure_batch']}, before Spark's commit log"
        outcome, _ = run_once(config, timeout=400)
        events.append(f"{kill} {moment}: {outcome}")
        print(f"  {strategy} kill {n + 1}/{len(kills)}: {events[-1]}", flush=True)
    started = time.time()
    outcome, result = run_once({**base, "timeout_s": args.final_timeout_s}, timeout=2 * args.final_timeout_s + 120)
    assert outcome == "ended", f"{strategy}: the last run did not end by itself ({outcome})"
    failures = json.loads(failed_restarts.read_text()) if failed_restarts.exists() else []
    rows, distinct = int(result.get("rows", 0)), int(result.get("distinct", 0))
    return {
        "strategy": strategy,
        "produced": args.records,
        "landed": rows,
        "lost": args.records - distinct,
        "doubled": rows - distinct,
        "failed_restarts": len(failures),
        "failed_restart_errors": [f[:300] for f in failures],
        "last_run_s": round(time.time() - started, 1),
        "batches": highest_batch(checkpoint, "commits") + 1,
        "kills_done": sum(e.endswith(": killed") for e in events),
        "kills_asked": len(kills),
        "kills": events,
        "metrics": result.get("metrics", {}),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=int(time.time()) % 100000)
    parser.add_argument("--records", type=int, default=20000)
    parser.add_argument("--random-kills", type=int, default=5)
    parser.add_argument("--sink-kills", type=int, default=3)
    parser.add_argument("--strategies", default="two-phase-commit,checkpoint-dedup")
    parser.add_argument("--lock-ms", type=int, default=30000, help="the group's lock duration (the broker's default)")
    parser.add_argument("--final-timeout-s", type=int, default=600)
    args = parser.parse_args()
    assert os.environ.get("KAFKASHARE_DELTA_JARS"), "KAFKASHARE_DELTA_JARS is not set: run `make crash-series`"
    print(f"crash series, seed {args.seed} (rerun with --seed {args.seed})", flush=True)
    out = ROOT / "target" / "crash-series"
    work = out / f"run-{args.seed}"
    shutil.rmtree(work, ignore_errors=True)
    broker = Broker(broker_versions()[-1], work / "broker").start()
    rows: list[dict[str, Any]] = []
    try:
        for strategy in args.strategies.split(","):
            rows.append(series(broker, work / strategy, strategy, args, random.Random(f"{args.seed}-{strategy}")))
            print(json.dumps(rows[-1], indent=1), flush=True)
    finally:
        broker.stop()
    header = (
        "| strategy | produced | landed | lost | doubled | failed restarts | kills | batches | last run (s) |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
    table = "\n".join(
        f"| {r['strategy']} | {r['produced']} | {r['landed']} | {r['lost']} | {r['doubled']} | {r['failed_restarts']}"
        f" | {r['kills_done']} of {r['kills_asked']} | {r['batches']} | {r['last_run_s']} |"
        for r in rows
    )
    text = f"seed {args.seed}\n\n{header}\n{table}\n"
    print(text, flush=True)
    (out / "table.md").write_text(text)
    # A kill that did not happen (the run found the topic drained, or died otherwise) makes a weaker series.
    bad = [r for r in rows if r["lost"] or r["doubled"] or r["failed_restarts"] or r["kills_done"] < r["kills_asked"]]
    for r in bad:
        keys = ("lost", "doubled", "failed_restarts", "failed_restart_errors", "kills_done", "kills_asked")
        print("FAILED:", r["strategy"], {k: r[k] for k in keys})
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
