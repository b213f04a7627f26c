"""Spark's real-time mode (Spark 4.1 and later): the trigger, and a clear error on an older Spark."""

from __future__ import annotations

import re


class RealTimeNeedsSparkError(RuntimeError):
    """Spark's real-time mode was asked for on a Spark without it (before 4.1)."""

    condition = "KAFKA_SHARE_UNSUPPORTED_USE.REAL_TIME_NEEDS_SPARK_4_1"


def real_time(duration: str = "5 seconds") -> dict[str, str]:
    """The trigger keywords of a real-time query: ``.writeStream.trigger(**real_time("5 seconds"))``.

    The same as ``trigger(realTime="5 seconds")`` on pyspark 4.1 and later. On an older pyspark, where
    ``trigger`` has no ``realTime`` (a TypeError would say only that), it raises
    :class:`RealTimeNeedsSparkError`, which names the Spark needed. The duration is how often the query
    checkpoints (5 seconds at least); records are emitted as they come (docs/real-time-mode.md).
    """
    import pyspark

    found = re.match(r"(\d+)\.(\d+)", pyspark.__version__)
    if found is None or (int(found.group(1)), int(found.group(2))) < (4, 1):
        raise RealTimeNeedsSparkError(
            f"[{RealTimeNeedsSparkError.condition}] Spark's real-time mode needs Spark 4.1 or newer; this is "
            f"pyspark {pyspark.__version__}. Use a micro-batch trigger (processingTime=...), or Spark 4.1+ "
            "(docs/real-time-mode.md)."
        )
    return {"realTime": duration}
