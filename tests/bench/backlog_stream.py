"""`make backlog-picture`: a share group's backlog building up and draining, from a real run.

Starts a broker and produces at a rate above what the query's sink takes (a foreachBatch that spends
1 s per `--capacity` records, as a slow downstream would), so the backlog builds up; then the producer
stops and the query drains it. Keeps every query progress
event and draws docs/images/backlog.png: the source's `backlogRecords` metric, and rows in and out.

Batches are bounded (maxRecordsPerTrigger, `--batch`), as a production query's are: without a bound
each batch takes the whole backlog and the picture has a handful of points.

Usage: backlog_stream.py [--seconds 30] [--rate 2000] [--capacity 1000] [--batch 2000] [--out docs/images/backlog.png]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "python"))

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from healthy_stream import _seconds, local_spark, rate_producer  # noqa: E402
from pyspark.sql import DataFrame  # noqa: E402

from harness import Broker, broker_versions  # noqa: E402
from spark_kafka_share import KafkaShareOptions  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=int, default=30, help="how long the producer writes")
    parser.add_argument("--rate", type=int, default=2000, help="records produced per second")
    parser.add_argument("--capacity", type=int, default=1000, help="records per second the sink takes")
    parser.add_argument("--batch", type=int, default=2000, help="maxRecordsPerTrigger")
    parser.add_argument("--out", default=str(ROOT / "docs" / "images" / "backlog.png"))
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="backlog-stream-"))
    broker = Broker(broker_versions()[-1], work / "broker").start()
    produced = args.rate * args.seconds
    try:
        producer = rate_producer(broker, "orders", "orders-processing", args.rate, args.seconds)
        spark = local_spark()
        options = KafkaShareOptions(
            bootstrap_servers=broker.bootstrap,
            group_id="orders-processing",
            subscribe=["orders"],
            strategy="checkpoint-dedup",
            parallelism=2,
            max_records_per_trigger=args.batch,
        )

        def slow_sink(batch: DataFrame, batch_id: int) -> None:
            time.sleep(batch.count() / args.capacity)

        query = (
            spark.readStream.format("kafka-share")
            .options(**options.to_dict())
            .load()
            .writeStream.foreachBatch(slow_sink)
            .option("checkpointLocation", str(work / "checkpoint"))
            .trigger(processingTime="1 second")
            .start()
        )
        producer.start()
        events: dict[int, dict[str, object]] = {}
        read = 0
        deadline = time.time() + args.seconds + 600
        while time.time() < deadline:
            for p in query.recentProgress:
                events[int(p["batchId"])] = p
            read = sum(int(p["numInputRows"]) for p in events.values())  # type: ignore[call-overload]
            last = events[max(events)]["sources"][0]["metrics"] if events else {}  # type: ignore[index]
            if not producer.is_alive() and read >= produced and last.get("backlogRecords") == "0":
                break
            time.sleep(2)
        producer.join()
        query.stop()
        spark.stop()
    finally:
        broker.stop()
    if read < produced:
        raise SystemExit(f"read {read} of {produced} records")
    draw([events[b] for b in sorted(events)], Path(args.out), args)


def draw(progress: list[dict[str, object]], out: Path, args: argparse.Namespace) -> None:
    start = _seconds(str(progress[0]["timestamp"]))
    t = [_seconds(str(p["timestamp"])) - start for p in progress]
    metrics = [p["sources"][0]["metrics"] for p in progress]  # type: ignore[index]
    fig, (backlog, rows) = plt.subplots(2, 1, figsize=(9, 7), sharex=True)
    backlog.plot(t, [int(m.get("backlogRecords", 0)) for m in metrics], marker=".", label="backlogRecords")
    backlog.plot(t, [int(m.get("backlogChangeSinceLastBatch", 0)) for m in metrics], label="backlogChangeSinceLastBatch")
    backlog.axvline(args.seconds, color="grey", linestyle=":", label="producer stops")
    backlog.set_ylabel("records")
    backlog.legend(loc="upper right")
    backlog.set_title(
        f"Backlog of a share group: {args.rate}/s produced for {args.seconds} s, a sink that takes {args.capacity}/s,\n"
        f"batches of at most {args.batch} (maxRecordsPerTrigger)"
    )
    rows.plot(t, [int(p["numInputRows"]) for p in progress], marker=".", label="records per batch")  # type: ignore[call-overload]
    rows.set_ylabel("records")
    rows.set_xlabel("seconds since the first batch")
    rows.legend(loc="upper right")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=90)
    peak = max(int(m.get("backlogRecords", 0)) for m in metrics)
    print(f"{len(progress)} batches drawn to {out}; backlog peaked at {peak} records")


if __name__ == "__main__":
    main()
