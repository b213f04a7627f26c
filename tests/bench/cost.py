"""`make bench-cost`: what a batch costs besides reading: checkpoint bytes, new consumers, heap.

One broker, a topic of `--partitions` partitions. kafka-share (`--strategy`, checkpoint-dedup by default;
parallelism `--parallelism`, local mode) reads it once for each batch size in `--batch-records` (maxRecordsPerTrigger),
each time for `--batches` batches, and prints per batch size:
  - checkpoint bytes per batch and per record: Spark's offset and commit logs and the source's
    acquisition log, the files of each batch summed after the run (within Spark's 100 retained
    batches nothing is purged); the first batch is left out;
  - share consumers created per batch after the first (the source's consumersCreatedTotal);
  - heap in use after a full GC, after the first batch and at the end, in the app's one JVM (local
    mode: the driver and the executor are one JVM), and the growth per record pinned in between.
The steady-state targets: 0 consumers per batch, and checkpoint bytes per batch that follow the
offset ranges a batch pins (one per poll and partition), not its record count.

Usage: cost.py [--batches 20] [--batch-records 1000,10000] [--partitions 4] [--parallelism 4] [--strategy S]
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "python"))

from bench import spark_read

from harness import Broker, broker_versions

# A batch's files: offsets/N and commits/N (with Hadoop's .N.crc), and the acquisition log's folder N.
BATCH_FILE = re.compile(r"^(?:offsets|commits)/\.?(\d+)(?:\.crc)?$|^sources/\d+/acquisitions/(\d+)/")


def bytes_per_batch(checkpoint: Path) -> dict[int, dict[str, int]]:
    """Per batch: bytes of Spark's offset and commit logs, bytes and files of the source's acquisition log."""
    sizes: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for f in checkpoint.rglob("*"):
        match = BATCH_FILE.match(f.relative_to(checkpoint).as_posix()) if f.is_file() else None
        if match and match.group(1):
            sizes[int(match.group(1))]["spark"] += f.stat().st_size
        elif match:
            sizes[int(match.group(2))]["acquisitions"] += f.stat().st_size
            sizes[int(match.group(2))]["acquisition files"] += 1
    return sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--batch-records", default="1000,10000")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--parallelism", type=int, default=4)
    parser.add_argument("--strategy", default="checkpoint-dedup")
    args = parser.parse_args()
    sizes = [int(s) for s in args.batch_records.split(",")]

    work = Path(tempfile.mkdtemp(prefix="kafka-share-cost-"))
    broker = Broker(broker_versions()[-1], work / "broker").start()
    try:
        rows = []
        for size in sizes:
            topic, records = f"cost-{size}-{args.strategy}", size * args.batches
            broker.create_topic(topic, args.partitions)
            broker.produce(topic, records, 100)
            checkpoint = work / f"chk-{size}-{args.strategy}"
            result = spark_read(
                {
                    "bootstrap": broker.bootstrap,
                    "topic": topic,
                    "records": records,
                    "source": "kafka-share",
                    "group": f"cost-{size}-{args.strategy}",
                    "parallelism": args.parallelism,
                    "strategy": args.strategy,
                    "checkpoint": str(checkpoint),
                    "master": f"local[{args.parallelism}]",
                    "measure_heap": True,
                    "options": {"maxRecordsPerTrigger": size},
                }
            )
            metrics: list[dict[str, str]] = result["source_metrics"]
            heap: dict[str, int] = result["heap"]
            per_batch = bytes_per_batch(checkpoint)
            steady = [b for b in per_batch if b > 0]

            def mean(key: str, per_batch: dict[int, dict[str, int]] = per_batch, steady: list[int] = steady) -> float:
                return sum(per_batch[b][key] for b in steady) / max(len(steady), 1)

            steady_bytes = mean("spark") + mean("acquisitions")
            created = [int(m.get("consumersCreatedTotal", "0")) for m in metrics]
            pinned_after_first = int(result["measured_records"])
            rows.append(
                {
                    "batch records": size,
                    "batches": len(metrics),
                    "records/s": result["records_per_s"],
                    "checkpoint bytes/batch": round(steady_bytes),
                    "of which Spark's offset+commit logs": round(mean("spark")),
                    "acquisition log files/batch": round(mean("acquisition files"), 1),
                    "checkpoint bytes/record": round(steady_bytes / size, 2),
                    "consumers created in batch 0": created[0] if created else 0,
                    "consumers created/batch after": round((created[-1] - created[0]) / max(len(created) - 1, 1), 2),
                    "heap MB after batch 0": round(heap["after_first_batch"] / 2**20, 1),
                    "heap MB at end": round(heap["at_end"] / 2**20, 1),
                    "heap bytes/pinned record": round(
                        (heap["at_end"] - heap["after_first_batch"]) / max(pinned_after_first, 1), 1
                    ),
                }
            )
            print(rows[-1], flush=True)
        print(f"\n{args.partitions} partitions, parallelism {args.parallelism}, {args.strategy}, {args.batches} batches each\n")
        print("| " + " | ".join(rows[0]) + " |\n|" + "---:|" * len(rows[0]))
        for row in rows:
            print("| " + " | ".join(f"{v:,}" if isinstance(v, int) else str(v) for v in row.values()) + " |")
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
