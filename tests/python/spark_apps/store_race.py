"""Races two writers for each of many checkpoint log files on one store, as two attempts of one read task
pinning the same part do, through the source's own CheckpointStore. Prints one JSON line: per file, how
many writers were told they wrote it, and whether the file holds the winner's text.

Usage: store_race.py '<json config>'   keys: dir (a folder URI), files, spark_conf (settings to reach the store)
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
folder = jvm.org.apache.hadoop.fs.Path(config["dir"])
store = jvm.io.github.kafkashare.spark.offsets.store.CheckpointStore.of(folder, conf)


def write(path: object, text: str, start: threading.Barrier, won: list[str]) -> None:
    start.wait()
    if store.createIfAbsent(path, text).isEmpty():  # None: this writer put the file there
        won.append(text)


files: list[dict[str, object]] = []
for i in range(int(config["files"])):
    path = jvm.org.apache.hadoop.fs.Path(folder, str(i))
    start = threading.Barrier(2)
    won: list[str] = []
    writers = [threading.Thread(target=write, args=(path, f"attempt {w} of file {i}", start, won)) for w in ("a", "b")]
    for t in writers:
        t.start()
    for t in writers:
        t.join()
    there = store.read(path).get()
    files.append({"winners": len(won), "holds_winner": won == [there]})

print(json.dumps({"atomic": store.createIfAbsentAtomic(), "by": store.createIfAbsentBy(), "files": files}))
spark.stop()
