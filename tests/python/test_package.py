"""The installed wheel: its jar, its version, and the classpath helper's errors."""

import zipfile

import pytest
from pyspark.sql import SparkSession

import spark_kafka_share
from harness import pins
from spark_kafka_share.classpath import PLUGIN
from spark_runs import run_spark


def test_version_comes_from_the_one_project_version() -> None:
    assert spark_kafka_share.__version__ == pins()["project.version"]


def test_jar_path_is_the_bundled_connector_jar() -> None:
    jar = spark_kafka_share.jar_path()
    assert jar.is_file() and "site-packages" in str(jar), "the jar must come from the installed wheel"
    with zipfile.ZipFile(jar) as z:
        names = set(z.namelist())
        services = z.read("META-INF/services/org.apache.spark.sql.sources.DataSourceRegister").decode()
        version = z.read("io/github/kafkashare/spark/version.properties").decode()
    assert "io.github.kafkashare.spark.KafkaShareSourceProvider" in services
    assert f"version={spark_kafka_share.__version__}" in version
    # kafka-clients is inside, relocated; neither Spark nor an unshaded Kafka class is.
    assert any(n.startswith("io/github/kafkashare/shaded/kafka/clients/consumer/KafkaShareConsumer") for n in names)
    assert not any(n.startswith(("org/apache/kafka/", "org/apache/spark/", "scala/")) for n in names)


@pytest.mark.parametrize(
    "setting",
    [
        ("spark.jars.packages", "org.example:other:1.0,io.github.kafkashare:spark-kafka-share_2.13:0.0.9"),
        ("spark.jars", "/opt/other.jar,/opt/libs/spark-kafka-share_2.13-0.0.9.jar"),
    ],
    ids=["packages", "jar-elsewhere"],
)
def test_configure_adds_no_second_copy_when_the_builder_brings_the_connector(setting: tuple[str, str]) -> None:
    key, value = setting
    builder = SparkSession.builder.config(key, value)
    try:
        assert spark_kafka_share.configure(builder) is builder
        assert builder._options.get(key) == value
        assert key == "spark.jars" or "spark.jars" not in builder._options
        assert "spark.plugins" not in builder._options, "that jar may be one without the plugin"
    finally:
        builder._options.pop(key)  # the Builder's options are shared by every builder


def test_configure_adds_the_jar_and_keeps_other_jars() -> None:
    builder = SparkSession.builder.config("spark.jars", "/opt/other.jar")
    configured = spark_kafka_share.configure(builder)
    assert configured is builder
    jars = builder._options["spark.jars"].split(",")
    assert jars == ["/opt/other.jar", str(spark_kafka_share.jar_path())]
    spark_kafka_share.configure(builder)  # twice is harmless
    assert builder._options["spark.jars"].split(",") == jars
    builder._options.pop("spark.jars")  # the Builder's options are shared by every builder
    builder._options.pop("spark.plugins")


@pytest.mark.parametrize(
    "plugins",
    ["", "com.example.OtherPlugin", f"com.example.OtherPlugin, {PLUGIN}"],
    ids=["none", "another", "already"],
)
def test_configure_adds_the_plugin_once_and_keeps_other_plugins(plugins: str) -> None:
    builder = SparkSession.builder.config("spark.plugins", plugins) if plugins else SparkSession.builder
    try:
        spark_kafka_share.configure(builder)
        expected = ["com.example.OtherPlugin", PLUGIN] if plugins else [PLUGIN]
        assert builder._options["spark.plugins"].split(",") == expected
        builder._options.pop("spark.jars")
        spark_kafka_share.configure(builder)  # twice: the plugin is not listed again
        assert builder._options["spark.plugins"].split(",") == expected
    finally:
        builder._options.pop("spark.jars", None)  # the Builder's options are shared by every builder
        builder._options.pop("spark.plugins", None)


def test_a_session_configure_starts_loads_the_plugin() -> None:
    """Spark starts the plugin configure() lists: the driver's metrics system serves its metrics (the figures it
    registers when it starts; Spark registers a plugin's metrics only if there are some then)."""
    outcome = run_spark("session_with_plugin.py")
    assert PLUGIN in outcome["plugins"].split(","), outcome
    names = outcome["metrics"]
    assert any(n.endswith(".driver.queriesPublished") for n in names), outcome
    assert any(n.endswith(".jvm.shareConsumers") for n in names), outcome  # local mode: the executor's plugin too


@pytest.mark.parametrize("wrong", ["local[2]", None, SparkSession])
def test_configure_rejects_what_is_not_a_builder(wrong: object) -> None:
    with pytest.raises(TypeError, match=r"expects a pyspark\.sql\.SparkSession\.Builder .*got "):
        spark_kafka_share.configure(wrong)  # type: ignore[arg-type]


def test_configure_after_a_session_started_without_the_jar_says_what_to_do() -> None:
    """configure() asks the session, which cannot find the data source: the error says so and names the fixes."""
    outcome = run_spark("session_without_jar.py", "classic")
    assert outcome["error_type"] == "JarNotLoadedError", outcome
    message = str(outcome["message"])
    assert 'Spark answered DATA_SOURCE_NOT_FOUND for format("kafka-share")' in message, message
    assert "before the first getOrCreate() of the Python process" in message, message
    coordinates = f"io.github.kafkashare:spark-kafka-share_2.13:{spark_kafka_share.__version__}"
    assert f"--packages {coordinates}" in message and f"--jars {spark_kafka_share.jar_path()}" in message, message
    assert "cluster library" in message, message


def test_real_time_trigger_names_the_spark_it_needs() -> None:
    """Where pyspark's trigger() has realTime (4.2+), its keywords; on an older one (make test-compat's 4.0),
    an error naming the pyspark needed."""
    import pyspark

    major, minor = (int(p) for p in pyspark.__version__.split(".")[:2])
    if (major, minor) >= (4, 2):
        assert spark_kafka_share.real_time("7 seconds") == {"realTime": "7 seconds"}
    else:
        needs = r"REAL_TIME_NEEDS_NEWER_SPARK.*needs pyspark 4.2 or newer"
        with pytest.raises(spark_kafka_share.RealTimeNeedsSparkError, match=needs):
            spark_kafka_share.real_time("7 seconds")
