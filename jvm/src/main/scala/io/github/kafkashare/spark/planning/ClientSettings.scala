package io.github.kafkashare.spark.planning

import io.github.kafkashare.spark.options.ShareSourceOptions

/**
 * The share consumers' client settings: the user's `kafka.*` settings, and two the source chooses where
 * the user did not, so that the broker acquires no record that no task reads.
 *
 * Why it matters: each time an acquired record goes back to the group unread (a carry aged, a consumer
 * closed, the driver crashed), the broker counts a delivery attempt, and past share.delivery.count.limit
 * it archives the record. So:
 *  - `max.poll.records` no larger than what a task takes. A task that may poll again takes its share of
 *    maxRecordsPerTrigger (above Kafka's default, the default stays: such tasks poll again). A task that
 *    holds its records until the commit (two-phase commit, explicit mode) polls once, so its one poll is
 *    its whole part of the batch: its share of maxRecordsPerTrigger, and of the group's record lock
 *    limit (share.partition.max.record.locks, per partition, split among the consumers that read one
 *    partition), where their locks are renewed (Kafka 4.2+; on 4.1 a batch must fit in one lock, and polls
 *    keep Kafka's default). Raising the group's lock limit raises such batches, and with them the throughput.
 *  - `share.acquire.mode=record_limit` where the cluster has it (Kafka 4.2+, KIP-1206) and a task takes
 *    a bounded part (maxRecordsPerTrigger, or one poll held until the commit): a fetch then acquires at
 *    most max.poll.records; otherwise the broker rounds up to whole record batches and the rest waits,
 *    acquired, in the client's buffer. Where tasks poll on while there is a backlog, the rest is read by
 *    the next poll, and what is left at a task's end the pool collects and renews (ShareConsumerPool).
 */
object ClientSettings {

  /** The settings the source may choose (the rest are the user's, untouched). */
  val Chosen: Seq[String] = Seq("max.poll.records", "share.acquire.mode")

  /** Kafka's default max.poll.records. */
  val KafkaMaxPollRecords = 500

  /**
   * @param parallelism the read tasks (consumers) of a batch
   * @param partitions  the subscription's partitions at start (0 when none is known yet)
   * @param lockLimit   the group's effective share.partition.max.record.locks, where readable
   * @param strictAcquisition whether the cluster acquires by record count ([[BrokerFeatures.strictAcquisition]])
   * @param renew       whether held records keep their locks by RENEW: where not (Kafka 4.1), a batch must fit in
   *                    one lock, and its polls keep the sizes they had
   */
  def of(
      options: ShareSourceOptions,
      parallelism: Int,
      partitions: Int,
      lockLimit: Option[Int],
      strictAcquisition: Boolean,
      renew: Boolean
  ): Map[String, String] = {
    val user = options.kafkaParams
    val pollRecords =
      if (user.contains("max.poll.records")) None
      else {
        val triggerShare = options.maxRecordsPerTrigger.map(shareOf(_, parallelism))
        if (options.holdsUntilCommit && renew) {
          val consumersPerPartition = if (partitions <= 0) parallelism else math.ceil(parallelism.toDouble / partitions).toInt
          val lockShare             = lockLimit.map(l => math.max(1L, l.toLong / math.max(1, consumersPerPartition)))
          (triggerShare ++ lockShare).minOption.filter(_ != KafkaMaxPollRecords)
        } else triggerShare.filter(_ < KafkaMaxPollRecords)
      }
    // Strict acquisition costs throughput (a plain share consumer read 2.3 to 2.6 times slower with it,
    // polls of 2,000, Kafka 4.4.0): only where a task takes a bounded part, and a fetch's rest would wait.
    val bounded     = options.maxRecordsPerTrigger.nonEmpty || options.holdsUntilCommit
    val acquireMode = if (strictAcquisition && bounded) Some("record_limit") else None
    user ++ pollRecords.map(n => "max.poll.records" -> math.min(n, Int.MaxValue.toLong).toString) ++
      acquireMode.map("share.acquire.mode" -> _)
  }

  /** A task's share of `max` records over `tasks` tasks, rounded up (without overflow near Long.MaxValue), at least 1. */
  def shareOf(max: Long, tasks: Int): Long = math.max(1L, max / tasks + (if (max % tasks == 0) 0 else 1))
}
