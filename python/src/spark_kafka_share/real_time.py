"""Spark's real-time mode: the trigger, and a clear error on a pyspark without it."""

from __future__ import annotations

import inspect


class RealTimeNeedsSparkError(RuntimeError):
    """Spark's real-time mode was asked for on a pyspark without it: Spark 4.1 has it in Scala only, Python from 4.2."""

    condition = "KAFKA_SHARE_UNSUPPORTED_USE.REAL_TIME_NEEDS_NEWER_SPARK"


def real_time(duration: str = "5 seconds") -> dict[str, str]:
    """The trigger keywords of a real-time query: ``.writeStream.trigger(**real_time("5 seconds"))``.

    The same as ``trigger(realTime="5 seconds")`` where pyspark has it (4.2 and later). On an older pyspark,
    where ``trigger`` has no ``realTime`` (a TypeError would say only that), it raises
    :class:`RealTimeNeedsSparkError`, which names the Spark needed. The duration is how often the query
    checkpoints (5 seconds at least); records are emitted as they come:
    https://github.com/kafkashare/spark-kafka-share/blob/main/docs/guide/real-time.md
    """
    import pyspark
    from pyspark.sql.streaming.readwriter import DataStreamWriter

    if "realTime" not in inspect.signature(DataStreamWriter.trigger).parameters:
        raise RealTimeNeedsSparkError(
            f"[{RealTimeNeedsSparkError.condition}] Spark's real-time mode needs pyspark 4.2 or newer from Python "
            f"(Spark 4.1 has it in Scala only, Trigger.RealTime); this is pyspark {pyspark.__version__}. Use a "
            "micro-batch trigger (processingTime=...), or pyspark 4.2+ "
            "(https://github.com/kafkashare/spark-kafka-share/blob/main/docs/guide/real-time.md)."
        )
    return {"realTime": duration}
