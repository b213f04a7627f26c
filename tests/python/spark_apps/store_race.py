"""Races two attempts of each of many read tasks to pin part 0 of one batch, through the source's own
AcquisitionLog on the store that `dir` is on. The two attempts pin different records (the broker never
gives one record to two consumers at once). Prints one JSON line: per task, how many attempts were told the
part is theirs, and whether the log holds the records of the one that was told so.

Usage: store_race.py '<json config>'   keys: dir (the source's checkpoint folder, a URI), tasks, spark_conf
(settings to reach the store)
"""

import json
import sys
import threading

from pyspark.sql import SparkSession

import spark_kafka_share

config = json.loads(sys.argv[1])
builder = SparkSession.builder.master("local[2]").appName("store-race")
for key, value in config.get("spark_conf", {}).items():
    builder = builder.config(key, value)
spark = spark_kafka_share.configure(builder).getOrCreate()
jvm = spark._jvm
assert jvm is not None
conf = spark._jsc.hadoopConfiguration()
offsets = jvm.io.github.kafkashare.spark.offsets
log = offsets.AcquisitionLog(config["dir"], offsets.SerializableHadoopConf(conf))
store = offsets.store.CheckpointStore.of(jvm.org.apache.hadoop.fs.Path(config["dir"]), conf)


def pin(task: int, first: int, start: threading.Barrier, won: list[int]) -> None:
    """One attempt of `task` pins records first..first+99 of partition 0 as the task's part 0 of batch 0."""
    entry = offsets.AcquisitionEntry.parse(f"kafka-share acquisitions v1\norders 0 {first}-{first + 99}:1\n", "race")
    start.wait()
    if log.writeIfAbsent(0, task, entry, 0)._2():  # told that the part is its own
        won.append(first)


tasks: list[dict[str, object]] = []
for task in range(int(config["tasks"])):
    start = threading.Barrier(2)
    won: list[int] = []
    attempts = [threading.Thread(target=pin, args=(task, first, start, won)) for first in (task * 1000, task * 1000 + 500)]
    for t in attempts:
        t.start()
    for t in attempts:
        t.join()
    logged = log.read(0, task, 0).get().runs().head().first()
    tasks.append({"winners": len(won), "holds_winner": won == [logged]})

print(json.dumps({"atomic": store.createIfAbsentAtomic(), "by": store.createIfAbsentBy(), "tasks": tasks}))
spark.stop()
