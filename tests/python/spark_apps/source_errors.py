"""Starts kafka-share queries that must fail, and reports each failure's message and how long it took.

Usage: source_errors.py '<json: {"cases": {name: {options...}}, "speculation": bool}>'
Prints one JSON line: {name: {"message": ..., "seconds": ...}}.
"""

import json
import sys
import tempfile
import time

from pyspark.sql import SparkSession

import spark_kafka_share

config = json.loads(sys.argv[1])
spark = (
    spark_kafka_share.configure(SparkSession.builder)
    .master("local[2]")
    .config("spark.ui.enabled", "false")
    .config("spark.speculation", str(config.get("speculation", False)).lower())
    .getOrCreate()
)
spark.sparkContext.setLogLevel("OFF")
results = {}
for name, options in config["cases"].items():
    started = time.time()
    try:
        query = (
            spark.readStream.format("kafka-share")
            .options(**options)
            .load()
            .writeStream.format("noop")
            .option("checkpointLocation", tempfile.mkdtemp())
            .start()
        )
        query.awaitTermination(120)
        error = query.exception()
        message = str(error) if error is not None else ""
        query.stop()
    except Exception as e:
        message = str(e)
    results[name] = {"message": message, "seconds": round(time.time() - started, 1)}
print(json.dumps(results))
spark.stop()
