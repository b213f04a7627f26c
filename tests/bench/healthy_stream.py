"""`make metrics-picture`: what a healthy kafka-share stream's metrics look like, drawn from a real run.

Starts a broker, produces at a steady rate to a 2-partition topic, and runs a kafka-share query
(checkpoint-dedup, parallelism 4, 1 s trigger, noop sink) in this process for the whole time. It
keeps every query progress event and draws docs/images/healthy-stream.png: input and processed
rows per second, the running totals the source reports, and batch durations.

Usage: healthy_stream.py [--seconds 90] [--rate 2000] [--out docs/images/healthy-stream.png]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "python"))

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402

import spark_kafka_share  # noqa: E402
from harness import Broker, broker_versions, harness  # noqa: E402
from spark_kafka_share import KafkaShareOptions  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=int, default=90)
    parser.add_argument("--rate", type=int, default=2000, help="records produced per second")
    parser.add_argument("--out", default=str(ROOT / "docs" / "images" / "healthy-stream.png"))
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="healthy-stream-"))
    broker = Broker(broker_versions()[-1], work / "broker").start()
    try:
        producer = rate_producer(broker, "events", "events-processing", args.rate, args.seconds)
        spark = local_spark()
        options = KafkaShareOptions(
            bootstrap_servers=broker.bootstrap,
            group_id="events-processing",
            subscribe=["events"],
            strategy="checkpoint-dedup",
            parallelism=4,
        )
        query = (
            spark.readStream.format("kafka-share")
            .options(**options.to_dict())
            .load()
            .writeStream.format("noop")
            .option("checkpointLocation", str(work / "checkpoint"))
            .trigger(processingTime="1 second")
            .start()
        )
        producer.start()
        events: dict[int, dict[str, object]] = {}
        until = time.time() + args.seconds + 15
        while time.time() < until:
            for p in query.recentProgress:
                events[int(p["batchId"])] = p
            time.sleep(2)
        producer.join()
        query.stop()
        spark.stop()
    finally:
        broker.stop()
    draw([events[b] for b in sorted(events)], Path(args.out), args.rate)


def rate_producer(broker: Broker, topic: str, group: str, rate: int, seconds: int) -> threading.Thread:
    """A 2-partition topic, a group that reads it from its first record, and a thread (not started yet) that
    produces `rate` records a second to it for `seconds`."""
    broker.create_topic(topic, 2)
    broker.group_config(group, {"share.auto.offset.reset": "earliest"})
    return threading.Thread(
        target=harness,
        args=("produce-rate", broker.bootstrap, topic, str(rate), str(seconds)),
        kwargs={"timeout": seconds + 300},
    )


def local_spark() -> SparkSession:
    """Spark in this process with the connector, 4 cores, quiet."""
    spark = spark_kafka_share.configure(SparkSession.builder.master("local[4]")).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def draw(progress: list[dict[str, object]], out: Path, rate: int) -> None:
    start = _seconds(str(progress[0]["timestamp"]))
    t = [_seconds(str(p["timestamp"])) - start for p in progress]
    metrics = [p["sources"][0]["metrics"] for p in progress]  # type: ignore[index]
    fig, (rows, totals, durations) = plt.subplots(3, 1, figsize=(9, 9), sharex=True)
    rows.plot(t, [p["inputRowsPerSecond"] for p in progress], label="input rows/s")
    rows.plot(t, [p["processedRowsPerSecond"] for p in progress], label="processed rows/s")
    rows.axhline(rate, color="grey", linestyle=":", label=f"produce rate ({rate}/s)")
    rows.set_ylabel("rows / s")
    rows.legend(loc="upper right")
    rows.set_title("A healthy kafka-share stream (checkpoint-dedup, 4 consumers, 2 partitions)")
    for name in (
        "recordsAcquiredTotal",
        "recordsAcceptedTotal",
        "recordsReleasedTotal",
        "recordsReplayedTotal",
        "redeliveriesDroppedTotal",
    ):
        totals.plot(t, [int(m.get(name, 0)) for m in metrics], label=name)
    totals.set_ylabel("records since start")
    totals.legend(loc="upper left", fontsize="small")
    durations.plot(t, [p["durationMs"]["triggerExecution"] / 1000 for p in progress], label="batch duration (s)")  # type: ignore[index]
    durations.plot(t, [int(m.get("lastBatchMaxDeliveryCount", 0)) for m in metrics], label="lastBatchMaxDeliveryCount")
    durations.set_xlabel("seconds since the first batch")
    durations.legend(loc="upper right")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=90)
    print(f"{len(progress)} batches drawn to {out}")


def _seconds(timestamp: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


if __name__ == "__main__":
    main()
