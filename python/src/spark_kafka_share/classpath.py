"""Putting the bundled connector jar on Spark's class path."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from spark_kafka_share._version import __version__

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

JAR_NAME = f"spark-kafka-share_2.13-{__version__}.jar"


class JarNotLoadedError(RuntimeError):
    """A SparkSession is already running without the connector jar; it cannot be added any more."""


def jar_path() -> Path:
    """The connector jar carried inside this package (for ``spark.jars`` or ``spark-submit --jars``)."""
    path = Path(str(resources.files("spark_kafka_share").joinpath("jars", JAR_NAME)))
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} is missing: this installation of spark-kafka-share carries no connector jar. "
            "Install the wheel built by `make wheel`, not the source tree."
        )
    return path


def configure(builder: SparkSession.Builder) -> SparkSession.Builder:
    """Adds the connector jar to ``spark.jars`` of ``builder`` and returns the builder.

    Call it before the first session of the process starts: a running JVM takes no new jars,
    so a session that already runs without the jar raises :class:`JarNotLoadedError`.
    """
    from pyspark.sql import SparkSession

    if not isinstance(builder, SparkSession.Builder):
        raise TypeError(
            "spark_kafka_share.configure() expects a pyspark.sql.SparkSession.Builder "
            f"(for example SparkSession.builder), got {type(builder).__module__}.{type(builder).__qualname__}"
        )
    jar = str(jar_path())
    active = SparkSession.getActiveSession()
    if active is not None:
        loaded = active.conf.get("spark.jars", "") or ""
        if jar not in loaded.split(","):
            raise JarNotLoadedError(
                "A SparkSession is already running without the spark-kafka-share jar, and a running "
                "Spark cannot load it any more. Call spark_kafka_share.configure(SparkSession.builder) "
                "before the first getOrCreate() of the process, or start Spark with "
                f"--jars {jar} (or --packages io.github.kafkashare:spark-kafka-share_2.13:{__version__})."
            )
        return builder
    # The Builder has no public getter: read what was set so far to append rather than overwrite.
    options: dict[str, object] = getattr(builder, "_options", {})
    jars = [j for j in str(options.get("spark.jars", "")).split(",") if j]
    if jar not in jars:
        jars.append(jar)
    return builder.config("spark.jars", ",".join(jars))
