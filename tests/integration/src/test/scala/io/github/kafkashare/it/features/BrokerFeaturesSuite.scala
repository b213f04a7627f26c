package io.github.kafkashare.it.features

import io.github.kafkashare.it.stream.{ShareStreamTest, SharedBrokers}
import io.github.kafkashare.spark.metrics.Backlog
import io.github.kafkashare.spark.offsets.TopicPartitionRanges
import io.github.kafkashare.spark.options.ShareSourceOptions
import io.github.kafkashare.spark.planning.{BrokerFeatures, ClusterAccess}
import io.github.kafkashare.testkit.KafkaBroker

/** What the source detects on each broker line the build fetches, read off the real brokers. */
class BrokerFeaturesSuite extends ShareStreamTest {

  private def cluster(broker: KafkaBroker, group: String, topic: String): ClusterAccess =
    new ClusterAccess(
      ShareSourceOptions.parse(Map(
        "kafka.bootstrap.servers" -> broker.bootstrapServers,
        "kafka.share.group.id"    -> group,
        "subscribe"               -> topic
      ))
    )

  private def featuresOf(version: String, groupSettings: Map[String, String] = Map.empty): BrokerFeatures = {
    val prepared = prepare(SharedBrokers.of(version))
    if (groupSettings.nonEmpty) prepared.kafka.setGroupConfig(prepared.group, groupSettings)
    val access = cluster(prepared.broker, prepared.group, prepared.topic)
    try { access.checkShareGroupsServed(); access.features() }
    finally access.close()
  }

  for (version <- SharedBrokers.versions)
    test(s"the broker's line and what it offers are read off the broker [Kafka $version]") {
      val features = featuresOf(version)
      val line     = version.split('.').take(2).mkString(".")
      info(features.describe)
      assert(features.line == line, features.describe)
      val since42 = line >= "4.2"
      assert(features.renew.available == since42, features.describe)
      assert(features.brokerLag.available == since42, features.describe)
      assert(features.strictAcquisition.available == since42, features.describe)
      assert(features.groupLimits.available == (line >= "4.3"), features.describe)
      // A newly formatted 4.4 cluster has share.version 2, the broker's dead-letter queue.
      assert(features.brokerDeadLetters.available == (line >= "4.4"), features.describe)
      if (!since42) assert(features.renew.why.contains("KIP-1222"), features.describe)
    }

  for (version <- SharedBrokers.since("4.3"))
    test(s"a group that turns RENEW off is told apart, naming the setting [Kafka $version]") {
      val features = featuresOf(version, Map("share.renew.acknowledge.enable" -> "false"))
      assert(!features.renew.available && features.renew.why.contains("share.renew.acknowledge.enable=false"), features.describe)
    }

  for (version <- SharedBrokers.since("4.2"))
    test(s"the backlog from the broker's lag is exact on a real backlog, and the source's own computation no lower [Kafka $version]") {
      val prepared = prepare(SharedBrokers.of(version))
      import prepared.{group, kafka, topic}
      kafka.readFromEarliest(group)
      kafka.produce(topic, 1000)
      // Every record acknowledged, by a plain share consumer that then leaves; then 700 more wait. The
      // broker knows exactly what was acknowledged; the source's computation counts from the start offset,
      // which trails the acknowledgements (docs/internals/kafka-facts.md): it may count more, never fewer.
      assert(kafka.shareConsume(group, Seq(topic), expected = 1000).size == 1000)
      kafka.produce(topic, 700, firstKey = 1000)
      val access = cluster(prepared.broker, group, topic)
      try {
        var (ours, brokers) = (-1L, -2L)
        eventually(scala.concurrent.duration.DurationInt(60).seconds, s"the source's backlog ($ours) and the broker's ($brokers) agree") {
          val ends    = access.endOffsets(Seq(topic))
          val offsets = access.groupOffsets()
          ours = Backlog.of(ends, offsets.map { case (tp, o) => tp -> o.start }, TopicPartitionRanges.empty).total
          brokers = Backlog.fromBroker(ends, offsets.map { case (tp, o) => tp -> o.brokerLag }).total
          offsets.values.forall(_.brokerLag.nonEmpty) && brokers == 700
        }
        info(s"backlog of 700 records: the broker's lag $brokers, the source's own computation $ours")
        assert(ours >= brokers && ours <= 1700)
      } finally access.close()
    }

  test(s"a Kafka 4.1 broker reports no lag, and the source keeps its own computation [Kafka ${SharedBrokers.versions.head}]") {
    val prepared = prepare(SharedBrokers.of(SharedBrokers.versions.head))
    import prepared.{group, kafka, topic}
    kafka.readFromEarliest(group)
    kafka.produce(topic, 100)
    assert(kafka.shareConsume(group, Seq(topic), expected = 100).size == 100)
    val access = cluster(prepared.broker, group, topic)
    try {
      val offsets = access.groupOffsets()
      assert(offsets.nonEmpty && offsets.values.forall(_.brokerLag.isEmpty), offsets.toString)
      access.checkShareGroupsServed()
      assert(!access.features().brokerLag.available)
    } finally access.close()
  }
}
