"""The Python option builder: plain Python, a dict of strings the source understands."""

import dataclasses
import typing

import pytest

from spark_kafka_share import KafkaShareOptions
from spark_kafka_share import options as options_module


def test_to_dict_gives_the_source_option_names() -> None:
    opts = KafkaShareOptions(
        bootstrap_servers="b:9092",
        group_id="g",
        subscribe=["a", "b"],
        strategy="two-phase-commit",
        parallelism=4,
        max_records_per_trigger=1000,
        starting_offsets="earliest",
        include_headers=True,
        kafka={"security.protocol": "SASL_SSL"},
    )
    assert opts.to_dict() == {
        "kafka.bootstrap.servers": "b:9092",
        "kafka.share.group.id": "g",
        "subscribe": "a,b",
        "kafka.share.exactly.once.strategy": "two-phase-commit",
        "kafka.share.parallelism": "4",
        "maxRecordsPerTrigger": "1000",
        "startingOffsets": "earliest",
        "includeHeaders": "true",
        "kafka.security.protocol": "SASL_SSL",
    }
    assert all(isinstance(v, str) for v in opts.to_dict().values())


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"subscribe": None}, "exactly one of subscribe"),
        ({"subscribe_pattern": "o.*"}, "exactly one of subscribe"),
        ({"subscribe": "orders"}, "list of topic names"),
        ({"strategy": "exactly-once"}, "strategy must be one of 'none', 'idempotent'"),
        ({"parallelism": 0}, "parallelism must be 'auto' or a whole number"),
        ({"parallelism": True}, "parallelism must be 'auto' or a whole number"),
        ({"parallelism": "automatic"}, "parallelism must be 'auto' or a whole number"),
        ({"max_parallelism": 8}, "max_parallelism applies only with parallelism='auto'"),
        ({"parallelism": 4, "backlog_drain_ms": 5000}, "backlog_drain_ms applies only with parallelism='auto'"),
        ({"parallelism": "auto", "min_parallelism": 8, "max_parallelism": 4}, "max_parallelism must be at least min_parallelism"),
        ({"parallelism": "auto", "backlog_drain_ms": 10}, "backlog_drain_ms must be a whole number from 1000"),
        ({"starting_offsets": "beginning"}, "'earliest', 'latest'"),
        ({"group_id": ""}, "group_id"),
        ({"acknowledgment_mode": "auto"}, "'implicit', 'explicit'"),
        ({"acknowledgment_default": "release"}, "only with acknowledgment_mode='explicit'"),
        ({"acknowledgment_mode": "explicit", "acknowledgment_default": "reject"}, "'accept', 'release'"),
        ({"dead_letter_topic": "dlt"}, "only with max_deliveries"),
        ({"max_deliveries": 0}, "max_deliveries must be a whole number"),
        ({"read_duration_ms": -1}, "read_duration_ms must be a whole number from 0 to 600000"),
        # Bounds and topic names come from the connector's declarations (options_spec.json), as in Scala.
        ({"parallelism": 100001}, "parallelism must be 'auto' or a whole number from 1 to 100000"),
        ({"max_deliveries": 1001}, "max_deliveries must be a whole number from 1 to 1000"),
        ({"subscribe": ["orders", "bad topic"]}, "'bad topic' is not a Kafka topic name"),
        ({"max_deliveries": 3, "dead_letter_topic": "dl/t"}, "'dl/t' is not a Kafka topic name"),
        ({"include_headers": "yes"}, "include_headers takes True or False"),
        ({"read_duration_ms": 1.5}, "read_duration_ms must be a whole number"),
    ],
)
def test_invalid_options_fail_before_spark_sees_them(kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"bootstrap_servers": "b:9092", "group_id": "g", "subscribe": ["t"]}
    args.update(kwargs)
    with pytest.raises((ValueError, TypeError), match=message):
        KafkaShareOptions(**args)  # type: ignore[arg-type]


def test_explicit_mode_and_poison_options() -> None:
    opts = KafkaShareOptions(
        bootstrap_servers="b:9092",
        group_id="g",
        subscribe=["a"],
        acknowledgment_mode="explicit",
        acknowledgment_default="release",
        max_deliveries=3,
        dead_letter_topic="dlt",
    )
    d = opts.to_dict()
    assert d["kafka.share.acknowledgment.mode"] == "explicit"
    assert d["kafka.share.acknowledgment.default"] == "release"
    assert d["kafka.share.maxDeliveries"] == "3" and d["kafka.share.deadLetterTopic"] == "dlt"


def test_acknowledge_refuses_what_is_not_a_dataframe() -> None:
    from spark_kafka_share import acknowledge

    with pytest.raises(TypeError, match="takes a pyspark DataFrame"):
        acknowledge([("t", 0, 1, "accept")], 0, "g")  # type: ignore[arg-type]


def test_read_duration_zero_means_one_poll_and_is_passed_on() -> None:
    opts = KafkaShareOptions(bootstrap_servers="b:9092", group_id="g", subscribe=["a"], read_duration_ms=0)
    assert opts.to_dict()["kafka.share.read.duration.ms"] == "0"
    assert (
        "kafka.share.read.duration.ms"
        not in KafkaShareOptions(bootstrap_servers="b:9092", group_id="g", subscribe=["a"]).to_dict()
    )


def test_parallelism_auto_and_its_bounds_are_passed_as_the_source_names_them() -> None:
    options = KafkaShareOptions(
        bootstrap_servers="b:9092",
        group_id="g",
        subscribe=["t"],
        parallelism="auto",
        min_parallelism=2,
        max_parallelism=16,
        backlog_drain_ms=30000,
    ).to_dict()
    assert options["kafka.share.parallelism"] == "auto"
    assert options["kafka.share.minParallelism"] == "2"
    assert options["kafka.share.maxParallelism"] == "16"
    assert options["kafka.share.backlog.drain.ms"] == "30000"
    # As the source, in any letter case.
    upper = KafkaShareOptions(bootstrap_servers="b:9092", group_id="g", subscribe=["t"], parallelism="AUTO", max_parallelism=4)  # type: ignore[arg-type]
    assert upper.to_dict()["kafka.share.parallelism"] == "AUTO"


def test_the_builder_has_a_field_for_every_declared_option_and_no_other() -> None:
    """options_spec.json is generated from the connector's OptionDeclarations.scala (OptionsDocSuite fails if it
    is stale): a new option declared there fails here until the builder has its field."""
    fields = {f.name for f in dataclasses.fields(KafkaShareOptions)}
    declared = {o["python"] for o in options_module.SPEC}
    assert fields == declared, f"only in the builder: {fields - declared}; only declared: {declared - fields}"


@pytest.mark.parametrize(
    "field,literal",
    [
        ("strategy", options_module.Strategy),
        ("starting_offsets", options_module.StartingOffsets),
        ("acknowledgment_mode", options_module.AcknowledgmentMode),
        ("acknowledgment_default", options_module.DefaultDecision),
    ],
)
def test_the_type_hints_list_the_declared_choices(field: str, literal: object) -> None:
    spec = next(o for o in options_module.SPEC if o["python"] == field)
    assert list(typing.get_args(literal)) == spec["values"]


def test_starting_offsets_is_passed_only_when_set() -> None:
    """Unset, the source leaves the group's share.auto.offset.reset alone, so the builder must not pass a default."""
    unset = KafkaShareOptions(bootstrap_servers="b:9092", group_id="g", subscribe=["a"]).to_dict()
    assert "startingOffsets" not in unset
    earliest = KafkaShareOptions(bootstrap_servers="b:9092", group_id="g", subscribe=["a"], starting_offsets="earliest")
    assert earliest.to_dict()["startingOffsets"] == "earliest"


def test_only_the_options_set_are_sent_so_the_source_keeps_its_defaults() -> None:
    """A default lives in the connector's declaration only: the builder has no default of its own (every
    optional field is None), and sends nothing it was not given. False and 0 are values, and are sent."""
    required = {"bootstrap_servers", "group_id"}
    for f in dataclasses.fields(KafkaShareOptions):
        if f.name not in required and f.name != "kafka":
            assert f.default is None, f"{f.name} has a default of its own ({f.default!r}), not the connector's"
    minimal = KafkaShareOptions(bootstrap_servers="b:9092", group_id="g", subscribe=["a"]).to_dict()
    assert minimal == {"kafka.bootstrap.servers": "b:9092", "kafka.share.group.id": "g", "subscribe": "a"}
    explicit_defaults = KafkaShareOptions(
        bootstrap_servers="b:9092", group_id="g", subscribe=["a"], include_headers=False, fail_on_data_loss=True, strategy="none"
    ).to_dict()
    assert explicit_defaults["includeHeaders"] == "false" and explicit_defaults["failOnDataLoss"] == "true"
    assert explicit_defaults["kafka.share.exactly.once.strategy"] == "none"
