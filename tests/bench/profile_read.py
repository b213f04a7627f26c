"""`make bench-profile`: where a kafka-share read task's time goes, batch by batch (docs/internals/performance.md).

One broker, the records of `make bench` (4 partitions of 100-byte records in lz4 batches), one
kafka-share read clocked as `make bench` clocks it, with `PinnedPolls` logging at DEBUG what each read
task did: its polls and records, and how long it spent polling, pinning, acknowledging and between
parts (Spark's work on the rows). Prints one line per batch (the sum over its tasks) and the shares of
the batches after --warm-up batches. With --jfr FILE the app's JVM also records a Java Flight Recorder
profile (`jfr print --events jdk.ExecutionSample FILE` reads it).

This is a diagnosis, not a benchmark: one run, no baseline. Compare contenders with `make bench`.

Usage: profile_read.py [--records N] [--strategy S] [--partitions P] [--parallelism K] [--max-poll-records M]
                       [--lock-limit L] [--jfr FILE]
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import spark_read_by_record  # noqa: E402

from harness import Broker, broker_versions  # noqa: E402

# What PinnedPolls logs at DEBUG when a read task ends.
TASK_LINE = re.compile(
    r"batch (\d+) task (\d+): (\d+) polls, (\d+) records in (\d+) ms: polling (\d+) ms, pinning (\d+) ms, "
    r"acknowledging (\d+) ms, in Spark (\d+) ms"
)
STEPS = ["polling", "pinning", "acknowledging", "in Spark"]

LOG4J2 = """rootLogger.level = error
rootLogger.appenderRef.f.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{HH:mm:ss.SSS}} %t %c{{1}}: %m%n
logger.polls.name = io.github.kafkashare.spark.reader.PinnedPolls
logger.polls.level = debug
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--strategy", default="checkpoint-dedup")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--parallelism", type=int, default=4)
    parser.add_argument("--max-poll-records", type=int, default=2000)
    parser.add_argument(
        "--lock-limit",
        type=int,
        default=0,
        help="the group's share.partition.max.record.locks (Kafka 4.3+; 0: the broker's 2,000)",
    )
    parser.add_argument("--warm-up", type=int, default=2, help="batches left out of the shares (the group join, the JIT)")
    parser.add_argument("--jfr", help="also record a Java Flight Recorder profile into this file")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="kafka-share-profile-"))
    log = work / "tasks.log"
    config_file = work / "log4j2.properties"
    config_file.write_text(LOG4J2.format(log=log))
    java_options = f"-Dlog4j2.configurationFile={config_file}"
    if args.jfr:
        java_options += f" -XX:StartFlightRecording=filename={Path(args.jfr).resolve()},settings=profile"

    broker = Broker(broker_versions()[-1], work / "broker").start()
    try:
        broker.create_topic("bench", args.partitions)
        broker.produce("bench", args.records, 100, bulk=True)
        if args.lock_limit:  # as make bench sets it for two-phase-commit
            broker.group_config("profile", {"share.partition.max.record.locks": str(args.lock_limit)})
        result = spark_read_by_record(
            {
                "source": "kafka-share",
                "bootstrap": broker.bootstrap,
                "topic": "bench",
                "records": args.records,
                "parallelism": args.parallelism,
                "master": f"local[{max(2, args.parallelism)}]",
                "group": "profile",
                "strategy": args.strategy,
                "checkpoint": str(work / "checkpoint"),
                "options": {"kafka.max.poll.records": args.max_poll_records},
                "driver_java_options": java_options,
            }
        )
    finally:
        broker.stop()

    tasks = [tuple(int(g) for g in m.groups()) for m in TASK_LINE.finditer(log.read_text() if log.exists() else "")]
    print(f"{args.strategy}: {result['records_per_s']:,} records/s (one run), {result['batches']} batches")
    print(f"median phases of a batch, ms: {result['median_batch_ms']}")
    if not tasks:
        # Every task that polls logs a line (two-phase-commit's when it closes, after its rows);
        # a retry that only replays does not.
        raise SystemExit(f"no task lines in {log}: the phases above are all there is for {args.strategy}")
    print("\n| batch | tasks | polls | records | records a poll | task ms | " + " | ".join(f"{s} %" for s in STEPS) + " |")
    print("|---:|---:|---:|---:|---:|---:|" + "---:|" * len(STEPS))
    step_totals, task_ms_total = [0] * len(STEPS), 0
    for batch in sorted({t[0] for t in tasks}):
        rows = [t for t in tasks if t[0] == batch]
        polls, records, ms = (sum(r[i] for r in rows) for i in (2, 3, 4))
        steps = [sum(r[5 + i] for r in rows) for i in range(len(STEPS))]
        shares = " | ".join(f"{100 * s / max(ms, 1):.0f}" for s in steps)
        print(f"| {batch} | {len(rows)} | {polls} | {records:,} | {records // max(polls, 1):,} | {ms:,} | {shares} |")
        if batch >= args.warm_up:
            step_totals = [a + b for a, b in zip(step_totals, steps)]
            task_ms_total += ms
    if task_ms_total:
        shares = ", ".join(f"{s} {100 * v / task_ms_total:.0f}%" for s, v in zip(STEPS, step_totals))
        print(f"\nbatches {args.warm_up} and later, of the read tasks' time: {shares}")


if __name__ == "__main__":
    main()
