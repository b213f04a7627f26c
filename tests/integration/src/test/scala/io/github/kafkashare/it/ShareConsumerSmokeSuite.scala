package io.github.kafkashare.it

/** The harness broker serves share groups, and survives a SIGKILL with its data. */
class ShareConsumerSmokeSuite extends BrokerVersionsSuite {

  testEachBroker("a share consumer reads every produced record exactly once") { (_, kafka) =>
    val topic = fresh("smoke")
    val group = fresh("smoke-group")
    kafka.createTopic(topic, partitions = 3)
    kafka.readFromEarliest(group)
    kafka.produce(topic, count = 500)

    val records = kafka.shareConsume(group, Seq(topic), expected = 500)

    assert(records.map(_.key).sorted == (0 until 500).map(_.toString).sorted)
    assert(records.map(_.partition).toSet == Set(0, 1, 2))
    assert(records.forall(_.deliveryCount == 1), "a first delivery must have deliveryCount 1")
    // Everything was ACCEPTed: a second member of the group gets nothing.
    assert(kafka.shareConsume(group, Seq(topic), expected = 1, timeoutMs = 5000).isEmpty)
    val state = kafka.shareGroupState(group)
    assert(state.members == 0)
    assert(state.startOffsets.keySet.map(_.partition) == Set(0, 1, 2))
  }

  testEachBroker("records not acknowledged before the consumer leaves are delivered again") { (broker, kafka) =>
    val topic = fresh("redeliver")
    val group = fresh("redeliver-group")
    kafka.createTopic(topic, partitions = 1)
    kafka.readFromEarliest(group)
    kafka.produce(topic, count = 50)

    val released = kafka.acquireAndLeave(group, Seq(topic))
    assert(released.nonEmpty && released.forall(_.deliveryCount == 1))

    val all = kafka.shareConsume(group, Seq(topic), expected = 50)
    assert(all.map(_.offset).sorted == (0L until 50L), "nothing lost, nothing doubled")
    val again = all.filter(r => released.exists(_.offset == r.offset))
    // Observed, and relied on by the poison-record count: Kafka 4.1 does not count a delivery that
    // ended in a release at close (the record returns with deliveryCount 1); 4.2 and later do (2).
    val expectedCount = if (broker.version.startsWith("4.1.")) 1 else 2
    assert(
      again.size == released.size && again.forall(_.deliveryCount == expectedCount),
      s"a record released at close comes back with deliveryCount $expectedCount on Kafka ${broker.version}"
    )
  }

  testEachBroker("the broker restarts on its data dir after SIGKILL, with its records") { (broker, kafka) =>
    val topic = fresh("restart")
    val group = fresh("restart-group")
    kafka.createTopic(topic, partitions = 2)
    kafka.readFromEarliest(group)
    kafka.produce(topic, count = 200)
    val address = broker.bootstrapServers

    broker.kill()
    assert(!broker.isAlive)
    broker.start()

    assert(broker.bootstrapServers == address, "a restarted broker keeps its port, so clients reconnect")
    val records = kafka.shareConsume(group, Seq(topic), expected = 200)
    assert(records.map(_.key).toSet.size == 200)
  }
}
