package io.github.kafkashare.it.stream

import scala.collection.mutable

import io.github.kafkashare.spark.consumer.ConsumerKey
import io.github.kafkashare.spark.metrics.{QueryTotals, ShareSourceMetrics}
import io.github.kafkashare.spark.offsets.{AcquisitionEntry, AcquisitionLog, DecisionLog, SerializableHadoopConf, SourceMarkers}
import io.github.kafkashare.spark.offsets.TopicPartitionRanges
import io.github.kafkashare.spark.options.{ExactlyOnceStrategy, OptionDeclarations}
import io.github.kafkashare.spark.reader.{KafkaShareInputPartition, KafkaShareReaderFactory}
import org.apache.hadoop.conf.Configuration

/**
 * A read task drops the records a sibling task of the same batch pinned, whatever their delivery
 * count. The case that needs it: the sibling's member departs (its executor is lost) still holding
 * them; the group hands them to the next member, and a 4.1 broker does not count a delivery that
 * ended in a departure, so they come back with delivery count 1, as if never delivered. A check that
 * looked only at redeliveries (count above 1) would emit them a second time.
 *
 * The sibling is played by the test with a share consumer of the group and the source's own log
 * (what task 1 does: acquire, pin, and here depart before acknowledging); task 0 is the source's
 * reader, as an executor runs it.
 */
class SiblingPinsSuite extends ShareStreamTest {

  for (version <- SharedBrokers.versions)
    test(s"records pinned by a sibling task and released by its departing member are dropped (Kafka $version)") {
      val prepared = prepare(SharedBrokers.of(version), partitions = 1)
      import prepared.{group, kafka, topic}
      kafka.readFromEarliest(group)
      kafka.produce(topic, 100)
      val checkpoint = TestDirs.create("sibling-pins-").toString
      val conf       = new SerializableHadoopConf(new Configuration())
      val log        = new AcquisitionLog(checkpoint, conf)

      val pinnedBySibling = kafka.acquireHoldAndLeave(group, Seq(topic)) { held =>
        assert(held.nonEmpty && held.forall(_.deliveryCount == 1), s"the sibling's first delivery: $held")
        log.writeIfAbsent(0, 1, AcquisitionEntry.of(held.map(r => (r.topic, r.partition, r.offset, r.deliveryCount))))
      }.map(_.offset).toSet

      val reader  = KafkaShareReaderFactory.createReader(task0(prepared.broker.bootstrapServers, topic, group, checkpoint, log, conf))
      val emitted = mutable.ArrayBuffer.empty[Long]
      val metrics =
        try {
          while (reader.next()) emitted += reader.get().getLong(4)
          reader.currentMetricsValues().map(m => m.name -> m.value).toMap
        } finally reader.close()

      info(s"sibling pinned ${pinnedBySibling.size}; task 0 emitted ${emitted.size}, metrics $metrics")
      assert(emitted.toSet.intersect(pinnedBySibling).isEmpty, s"emitted again: ${emitted.toSet.intersect(pinnedBySibling).size}")
      assert(metrics(ShareSourceMetrics.Dropped) == pinnedBySibling.size, "every record the sibling pinned came back and was dropped")
      if (version.startsWith("4.1."))
        assert(metrics(ShareSourceMetrics.MaxDeliveryCount) == 1, "on 4.1 the departed member's records come back with delivery count 1")
      assert(emitted.size + pinnedBySibling.size <= 100 && emitted.distinct.size == emitted.size)
    }

  private def task0(
      bootstrap: String,
      topic: String,
      group: String,
      checkpoint: String,
      log: AcquisitionLog,
      conf: SerializableHadoopConf
  ): KafkaShareInputPartition = KafkaShareInputPartition(
    batch = 0,
    task = 0,
    topics = Seq(topic),
    pinned = TopicPartitionRanges.empty,
    maxRecords = 1000,
    strategy = ExactlyOnceStrategy.CheckpointDedup,
    consumerKey = ConsumerKey(group, Map("bootstrap.servers" -> bootstrap), 7500, topic, checkpoint),
    pollTimeoutMs = OptionDeclarations.DefaultPollTimeoutMs,
    readDurationMs = 2000,
    lockDurationMs = 15000,
    deliveryLimit = Int.MaxValue,
    includeHeaders = false,
    failOnDataLoss = true,
    log = log,
    commitFile = s"$checkpoint/commits/0",
    hadoopConf = conf,
    totals = new QueryTotals(spark.sparkContext).inTransit,
    holdUntilCommit = false,
    explicitDefault = None,
    decisions = new DecisionLog(checkpoint, conf),
    markers = new SourceMarkers(checkpoint, conf),
    poison = None
  )
}
