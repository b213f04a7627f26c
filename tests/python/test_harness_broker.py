"""The Python side of the test harness against a real broker of each version."""

from typing import Callable

from harness import Broker


def test_share_group_reads_what_was_produced(broker: Broker, fresh_name: Callable[[str], str]) -> None:
    topic, group = fresh_name("py-smoke"), fresh_name("py-group")
    broker.create_topic(topic, partitions=2)
    broker.read_from_earliest(group)
    broker.produce(topic, 300)

    assert broker.share_consume(group, topic, expected=300) == 300
    # All ACCEPTed: another member of the group receives nothing.
    assert broker.share_consume(group, topic, expected=1, timeout_ms=4000) == 0
    state = broker.group_state(group)
    assert state["groupId"] == group and state["members"] == 0
    assert sorted(p["partition"] for p in state["startOffsets"]) == [0, 1]


def test_a_new_group_starts_at_the_end_unless_told_otherwise(broker: Broker, fresh_name: Callable[[str], str]) -> None:
    topic = fresh_name("py-latest")
    broker.create_topic(topic, partitions=1)
    broker.produce(topic, 20)
    # share.auto.offset.reset defaults to latest: records produced before the group exists are skipped.
    assert broker.share_consume(fresh_name("py-latest-group"), topic, expected=1, timeout_ms=4000) == 0
