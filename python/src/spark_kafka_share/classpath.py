"""Putting the bundled connector jar on Spark's class path, or finding that it is there already."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from spark_kafka_share._version import __version__

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

JAR_NAME = f"spark-kafka-share_2.13-{__version__}.jar"
# The Maven coordinates the connector is published under; any version of them loads the connector.
GROUP_AND_ARTIFACT = "io.github.kafkashare:spark-kafka-share_2.13"
COORDINATES = f"{GROUP_AND_ARTIFACT}:{__version__}"
# A jar of the connector, whatever its version or directory (the bundled one, a download, a copy).
_CONNECTOR_JAR = re.compile(r"spark-kafka-share_2\.13-[^/\\]*\.jar")
# The connector's Spark plugin: the source's figures in Spark's metrics system
# (https://github.com/kafkashare/spark-kafka-share/blob/main/docs/guide/observability.md).
PLUGIN = "io.github.kafkashare.spark.KafkaSharePlugin"
# Spark's answer when no jar on the class path registers the data source.
_NOT_FOUND = "DATA_SOURCE_NOT_FOUND"


class JarNotLoadedError(RuntimeError):
    """A SparkSession is already running and cannot load the connector; it cannot be added to it any more."""


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
    """Makes sure the session of ``builder`` can load the connector, and returns the builder.

    configure() asks Spark, where Spark can answer, whether it finds ``format("kafka-share")``: it defines
    (does not start) a stream of it, which reaches no broker and runs no job, on classic Spark and on Spark
    Connect alike. Whichever jar, path or repository provided the connector, a session that finds it is
    never refused. When Spark answers ``DATA_SOURCE_NOT_FOUND``, :class:`JarNotLoadedError` says how to
    start Spark with the connector (a running Spark takes no new jars). Any other error is raised as is.

    - **A session is active** (a notebook's or a Databricks cluster's ``spark``, a session that
      ``spark-submit --packages`` or ``--jars`` started, a Spark Connect client): that session is asked;
      the builder is returned unchanged.
    - **The class path is fixed, but no session is active yet**: Python runs under a JVM that already
      started (``spark-submit app.py``, whose ``--jars`` and ``--packages`` the builder cannot see), or the
      builder connects to a Spark Connect server (``remote("sc://...")``). configure() calls
      ``builder.getOrCreate()`` and asks that session.
    - **Spark has not started yet** (``python app.py``, ``remote("local[*]")``): the bundled jar is
      appended to the builder's ``spark.jars``, unless the builder's settings already bring the connector
      (``spark.jars.packages`` naming ``io.github.kafkashare:spark-kafka-share_2.13``, or ``spark.jars``
      naming a ``spark-kafka-share_2.13-*.jar``: two copies of its classes would clash). With the jar,
      the connector's plugin (:data:`PLUGIN`: the source's figures in Spark's metrics system) is appended
      to the builder's ``spark.plugins``, once.

    Spark loads plugins only when it starts: a session that runs already keeps the plugins it has, and
    configure() adds none to it. Nor where the builder brings the connector itself (that jar may predate the
    plugin): list it in ``spark.plugins`` yourself. The builder's ``spark.plugins`` replaces one from
    spark-defaults.conf; Spark adds ``spark.plugins.defaultList`` to it, for plugins every session has.

    Calling it twice is harmless.
    """
    from pyspark.sql import SparkSession

    if not isinstance(builder, SparkSession.Builder):
        raise TypeError(
            "spark_kafka_share.configure() expects a pyspark.sql.SparkSession.Builder "
            f"(for example SparkSession.builder), got {type(builder).__module__}.{type(builder).__qualname__}"
        )
    jar = str(jar_path())
    active = SparkSession.getActiveSession()
    # The Builder has no public getter: read what was set so far to append rather than overwrite.
    options: Mapping[str, object] = getattr(builder, "_options", {})
    if active is None and (_jvm_started() or _remote_server(options)):
        active = builder.getOrCreate()
    if active is not None:
        _check_the_connector_loads(active, jar)
        return builder
    if _brings_the_connector(options):
        return builder
    jars = [j for j in str(options.get("spark.jars", "")).split(",") if j]
    jars.append(jar)
    plugins = [p.strip() for p in str(options.get("spark.plugins", "")).split(",") if p.strip()]
    if PLUGIN not in plugins:
        plugins.append(PLUGIN)
    return builder.config("spark.jars", ",".join(jars)).config("spark.plugins", ",".join(plugins))


def _brings_the_connector(options: Mapping[str, object]) -> bool:
    """Whether the builder's settings already put a connector jar on the class path."""
    packages = str(options.get("spark.jars.packages", "")).split(",")
    if any(p.strip().startswith(f"{GROUP_AND_ARTIFACT}:") for p in packages):
        return True
    jars = str(options.get("spark.jars", "")).split(",")
    return any(_CONNECTOR_JAR.fullmatch(re.split(r"[/\\]", j.strip())[-1]) for j in jars if j.strip())


def _jvm_started() -> bool:
    """Whether this Python process talks to a JVM that already runs (spark-submit started Python, or an
    earlier session started it): its class path no longer takes the builder's ``spark.jars``, and its own
    ``--jars`` and ``--packages`` are not among the builder's settings."""
    if "PYSPARK_GATEWAY_PORT" in os.environ:
        return True
    try:
        from pyspark import SparkContext
    except ImportError:  # pyspark-client: Spark Connect only, no JVM of its own
        return False
    return getattr(SparkContext, "_gateway", None) is not None


def _remote_server(options: Mapping[str, object]) -> bool:
    """Whether the builder connects to a Spark Connect server that runs elsewhere (``sc://``): that server's
    class path is set where it starts; a local one (``remote("local[*]")``) takes the builder's jars."""
    remote = str(options.get("spark.remote", os.environ.get("SPARK_REMOTE", "")))
    return remote.startswith("sc://")


def _check_the_connector_loads(spark: SparkSession, jar: str) -> None:
    """Asks Spark to resolve ``format("kafka-share")``: defining a stream and reading its schema (which the
    connector gives) looks the data source up and validates the options, and neither reaches a broker nor
    runs a job. On Spark Connect the server does the same when the client asks for the schema."""
    stream = (
        spark.readStream.format("kafka-share")
        .option("kafka.bootstrap.servers", "spark-kafka-share-configure.invalid:9092")
        .option("kafka.share.group.id", "spark-kafka-share-configure")
        .option("subscribe", "spark-kafka-share-configure")
    )
    try:
        stream.load().schema.fieldNames()
    except Exception as e:  # classic Spark raises py4j's error for this one, Connect its own: read the condition
        condition = str(getattr(e, "getCondition", lambda: None)())
        if condition == _NOT_FOUND or f"[{_NOT_FOUND}]" in str(e):
            raise JarNotLoadedError(_not_loaded_message(spark, jar)) from e
        if condition.startswith("KAFKA_SHARE_") or "[KAFKA_SHARE_" in str(e):
            return  # the connector itself answered, so it is loaded (it validates these options otherwise)
        raise


def _not_loaded_message(spark: SparkSession, jar: str) -> str:
    found = (
        f'Spark answered {_NOT_FOUND} for format("kafka-share"): no jar on its class path registers the '
        "spark-kafka-share connector."
    )
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        return (
            f"This Spark Connect session's server cannot load the connector. {found} The client cannot add "
            "jars to a running server: start the Connect server with the connector, for example "
            f"`start-connect-server.sh --packages {COORDINATES}` (or --jars <a copy of {jar}>), or on "
            "Databricks install the jar or those Maven coordinates as a cluster library; then connect again."
        )
    return (
        f"A SparkSession is already running and cannot load the connector. {found} A running Spark cannot "
        "take new jars, so start it with the connector, in one of these ways: call "
        "spark_kafka_share.configure(SparkSession.builder) before the first getOrCreate() of the Python "
        "process (in a new process: stopping this session is not enough); or spark-submit --packages "
        f"{COORDINATES} (with --repositories <your repository> until it is on Maven Central), or --jars {jar}; "
        "or on Databricks install the jar or those Maven coordinates as a cluster library."
    )
