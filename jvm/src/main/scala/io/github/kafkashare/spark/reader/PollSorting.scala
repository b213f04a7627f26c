package io.github.kafkashare.spark.reader

import io.github.kafkashare.spark.consumer.PooledShareConsumer
import io.github.kafkashare.spark.metrics.{ShareSourceMetrics => Metrics, TaskCounters}
import io.github.kafkashare.spark.offsets.AcquisitionEntry
import io.github.kafkashare.spark.runtime.TaskRuntime

/**
 * Steps 2 of [[PinnedPolls]]: what becomes of each record of a poll before anything is pinned
 * ([[PollClassification]] decides), and the records not to pin acknowledged ([[UnpinnedRecords]]): locks too
 * far spent, redeliveries of records pinned elsewhere ([[PinnedElsewhere]]), poison records, the carry.
 */
private[reader] final class PollSorting(
    partition: KafkaShareInputPartition,
    counters: TaskCounters,
    clock: TaskClock,
    runtime: TaskRuntime
) {

  private type Record = PooledShareConsumer.Record

  private val unpinned        = new UnpinnedRecords(partition, counters, clock, runtime)
  private val pinnedElsewhere = new PinnedElsewhere(partition)

  /** Sorts the poll's records and acknowledges all but those to pin (`plan.keep`), which the consumer still holds. */
  def sort(
      consumer: PooledShareConsumer,
      poll: PooledShareConsumer.Polled,
      limits: PollClassification.Limits
  ): PollClassification.Plan[Record] = {
    val polledAt = poll.acquiredAtNanos
    val plan = PollClassification.plan[Record](
      poll.records,
      PooledShareConsumer.deliveryCountOf,
      lockSpent = clock.lockSpent(polledAt),
      fromCarry = poll.fromCarry,
      limits,
      budgetLeft = () => clock.budgetLeftMs > 0,
      pinnedElsewhere = pinnedElsewhere.split
    )
    counters.add(Metrics.MaxDeliveryCount, plan.maxCount)
    if (!poll.fromCarry && plan.someOnLastAttempt) unpinned.noteLastAttempts(poll.records)
    unpinned.giveBackSpent(consumer, plan.spent, polledAt, "(was this JVM paused?)")
    unpinned.rejectPoison(consumer, plan.poison)
    unpinned.dropRedelivered(consumer, plan.redelivered)
    consumer.carry(plan.carry, polledAt)
    plan
  }

  /**
   * The steps since the poll was sorted (sibling reads, a dead-letter send, a slow file system) may have
   * spent the lock: another member may hold these records by now. Gives those back; keeps the rest.
   */
  def recheckLocks(consumer: PooledShareConsumer, keep: Seq[Record], polledAt: Long): Seq[Record] =
    if (!clock.lockSpent(polledAt)) keep
    else {
      val (lastAttempt, giveBack) = PollClassification.pinnableWhenSpent(keep, PooledShareConsumer.deliveryCountOf, partition.deliveryLimit)
      unpinned.giveBackSpent(consumer, giveBack, polledAt, "after the checks before pinning")
      lastAttempt
    }

  /** A part this task pinned: its records are pinned elsewhere for the task's later polls. */
  def pinnedOwnPart(entry: AcquisitionEntry): Unit = pinnedElsewhere.addOwnPart(entry)
}
