package io.github.kafkashare.it.stream

import scala.collection.mutable

import io.github.kafkashare.spark.consumer.ConsumerKey
import io.github.kafkashare.spark.metrics.{QueryTotals, ShareSourceMetrics}
import io.github.kafkashare.spark.offsets.{AcquisitionEntry, AcquisitionLog, DecisionLog, SerializableHadoopConf, SourceMarkers}
import io.github.kafkashare.spark.offsets.TopicPartitionRanges
import io.github.kafkashare.spark.options.{ExactlyOnceStrategy, LockBudget, OptionDeclarations}
import io.github.kafkashare.spark.reader.{KafkaShareInputPartition, KafkaShareReaderFactory, ReadTaskQuery}
import io.github.kafkashare.spark.runtime.JvmResources
import io.github.kafkashare.testkit.ReceivedRecord
import org.apache.hadoop.conf.Configuration

/**
 * A read task drops the records a sibling task of the same batch pinned, whatever their delivery
 * count. The case that needs it: the sibling's consumer leaves the group still holding them; the
 * group hands them to the next member, and a 4.1 broker does not count a delivery that ended in a
 * release at close, so they come back with delivery count 1, as if never delivered. A check that
 * looked only at redeliveries (count above 1) would emit them a second time; only the 4.1 run can
 * tell (later brokers count the delivery), hence the first test.
 *
 * The sibling is played by the test with a share consumer of the group and the source's own log
 * (what task 1 does: acquire, pin in two parts, and here leave before acknowledging); task 0 is the
 * source's reader, as an executor runs it.
 */
class SiblingPinsSuite extends ShareStreamTest {

  test("the build fetches a Kafka 4.1 broker (the one that gives a departed member's records count 1)") {
    assert(SharedBrokers.versions.exists(_.startsWith("4.1.")), s"fetched: ${SharedBrokers.versions}")
  }

  for {
    version  <- SharedBrokers.floorAndNewest
    strategy <- Seq(ExactlyOnceStrategy.CheckpointDedup, ExactlyOnceStrategy.TwoPhaseCommit)
  } test(s"records pinned by a sibling task and released by its departing consumer are dropped (${strategy.name}, Kafka $version)") {
    val prepared = prepare(SharedBrokers.of(version), partitions = 1)
    import prepared.{group, kafka, topic}
    kafka.readFromEarliest(group)
    kafka.produce(topic, 100)
    val checkpoint = TestDirs.create("sibling-pins-").toString
    val conf       = new SerializableHadoopConf(new Configuration())
    val log        = new AcquisitionLog(checkpoint, conf)

    val pinnedBySibling = kafka.acquireHoldAndLeave(group, Seq(topic)) { held =>
      assert(held.nonEmpty && held.forall(_.deliveryCount == 1), s"the sibling's first delivery: $held")
      val (first, second) = held.sortBy(_.offset).splitAt(held.size / 2)
      log.writeIfAbsent(0, 1, entryOf(first), part = 0)
      log.writeIfAbsent(0, 1, entryOf(second), part = 1)
    }.map(_.offset).toSet

    val task0   = partition(0, strategy, prepared.broker.bootstrapServers, topic, group, checkpoint, log, conf)
    val reader  = KafkaShareReaderFactory.createReader(task0)
    val emitted = mutable.ArrayBuffer.empty[Long]
    val metrics =
      try {
        while (reader.next()) emitted += reader.get().getLong(4)
        reader.currentMetricsValues().map(m => m.name -> m.value).toMap
      } finally {
        reader.close()
        JvmResources.consumerPool.closeIdle(task0.query.consumerKey) // leave the group now, not when the pool's evictor gets to it
      }

    info(s"sibling pinned ${pinnedBySibling.size}; task 0 emitted ${emitted.size}, metrics $metrics")
    assert(emitted.toSet.intersect(pinnedBySibling).isEmpty, s"emitted again: ${emitted.toSet.intersect(pinnedBySibling).size}")
    assert(metrics(ShareSourceMetrics.Dropped.name) == pinnedBySibling.size, "every record the sibling pinned came back and was dropped")
    if (version.startsWith("4.1."))
      assert(
        metrics(ShareSourceMetrics.MaxDeliveryCount.name) == 1,
        "on 4.1 the departed consumer's records come back with delivery count 1"
      )
    assert(emitted.size + pinnedBySibling.size <= 100 && emitted.distinct.size == emitted.size)
  }

  private def entryOf(records: Seq[ReceivedRecord]): AcquisitionEntry =
    AcquisitionEntry.of(records.map(r => (r.topic, r.partition, r.offset, r.deliveryCount)))

  private def partition(
      task: Int,
      strategy: ExactlyOnceStrategy,
      bootstrap: String,
      topic: String,
      group: String,
      checkpoint: String,
      log: AcquisitionLog,
      conf: SerializableHadoopConf
  ): KafkaShareInputPartition = KafkaShareInputPartition(
    ReadTaskQuery(
      strategy = strategy,
      consumerKey = ConsumerKey(group, Map("bootstrap.servers" -> bootstrap), LockBudget(15000), topic, checkpoint),
      pollTimeoutMs = OptionDeclarations.DefaultPollTimeoutMs,
      readDurationMs = 2000,
      locks = LockBudget(15000),
      includeHeaders = false,
      failOnDataLoss = true,
      log = log,
      commitLogDir = s"$checkpoint/commits",
      hadoopConf = conf,
      holdUntilCommit = strategy.acceptsAfterCommit,
      renewLocks = false,
      explicitDefault = None,
      decisions = new DecisionLog(checkpoint, conf),
      markers = new SourceMarkers(checkpoint, conf),
      poison = None
    ),
    batch = 0,
    task = task,
    topics = Seq(topic),
    pinned = TopicPartitionRanges.empty,
    maxRecords = 1000,
    deliveryLimit = Int.MaxValue,
    totals = QueryTotals(spark.sparkContext).inTransit
  )
}
