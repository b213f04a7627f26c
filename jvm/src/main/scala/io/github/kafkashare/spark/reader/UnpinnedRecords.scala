package io.github.kafkashare.spark.reader

import io.github.kafkashare.spark.consumer.PooledShareConsumer
import io.github.kafkashare.spark.errors.ShareSourceErrors
import io.github.kafkashare.spark.metrics.{ShareSourceMetrics => Metrics, TaskCounters}
import io.github.kafkashare.spark.runtime.TaskRuntime
import org.apache.kafka.clients.consumer.AcknowledgeType
import org.apache.spark.internal.Logging

/**
 * The records of a poll that a read task does not pin ([[PollClassification]] tells which), acknowledged
 * and counted: locks too far spent RELEASEd, poison records REJECTed after the dead-letter topic has them,
 * redeliveries of pinned records ACCEPTed quietly. Records on their last delivery attempt are counted and
 * said, whatever becomes of them.
 */
private[reader] final class UnpinnedRecords(
    partition: KafkaShareInputPartition,
    counters: TaskCounters,
    clock: TaskClock,
    runtime: TaskRuntime
) extends Logging {

  private type Record = PooledShareConsumer.Record

  /** RELEASEs records whose locks are too far spent to pin (those on their last attempt are kept by the caller). */
  def giveBackSpent(consumer: PooledShareConsumer, records: Seq[Record], polledAt: Long, when: String): Unit = if (records.nonEmpty) {
    logWarning(s"kafka-share: batch ${partition.batch} task ${partition.task}: ${records.size} record(s) acquired " +
      s"${clock.lockAgeMs(polledAt)} ms ago are too close to the end of their ${partition.query.locks.lockDurationMs} ms lock to pin " +
      s"$when; giving them back to the group (those on their last delivery attempt are kept)")
    consumer.acknowledge(records, AcknowledgeType.RELEASE)
    counters.add(Metrics.Released, records.size)
  }

  /**
   * Records delivered more than kafka.share.maxDeliveries times: to the dead-letter topic (confirmed),
   * then REJECTed, never emitted. The REJECT goes out with the task's next acknowledgements.
   */
  def rejectPoison(consumer: PooledShareConsumer, poison: Seq[Record]): Unit = if (poison.nonEmpty) {
    val policy = partition.query.poison.get
    policy.deadLetterTopic.foreach(DeadLetters.send(
      poison,
      _,
      partition.query.consumerKey.groupId,
      partition.query.consumerKey.params,
      runtime
    ))
    consumer.acknowledge(poison, AcknowledgeType.REJECT)
    counters.add(Metrics.Rejected, poison.size)
    logWarning(s"kafka-share: ${poison.size} record(s) delivered more than ${policy.maxDeliveries} times rejected" +
      policy.deadLetterTopic.fold("")(t => s" after writing them to '$t'") + ": " +
      poison.take(5).map(r => s"${r.topic}-${r.partition}@${r.offset}").mkString(", "))
  }

  /** Redeliveries of records pinned to a batch (exactly-once strategies): ACCEPTed, never emitted again. */
  def dropRedelivered(consumer: PooledShareConsumer, redelivered: Seq[Record]): Unit = {
    consumer.acknowledge(redelivered, AcknowledgeType.ACCEPT)
    counters.add(Metrics.Dropped, redelivered.size)
    counters.add(Metrics.Accepted, redelivered.size)
  }

  /** Counts and says the records of a poll that are on their last delivery attempt. */
  def noteLastAttempts(records: Seq[Record]): Unit = {
    val last = records.count(r => PollClassification.onLastAttempt(PooledShareConsumer.deliveryCountOf(r), partition.deliveryLimit))
    if (last > 0) {
      counters.add(Metrics.AtLastDelivery, last)
      logWarning(s"kafka-share: batch ${partition.batch} task ${partition.task}: $last record(s) are on their last " +
        s"delivery attempt (delivered ${partition.deliveryLimit} times, the group's limit): ${ShareSourceErrors.LastAttemptAdvice}")
    }
  }
}
