package io.github.kafkashare.spark.reader

/**
 * A read task's clock: how old a poll's locks are and whether its records can still be pinned, how
 * much of kafka.share.read.duration.ms is left, and where the task's time went (logged at DEBUG when it
 * ends): polling, pinning, acknowledging, and outside, in Spark, between returning a part and asking
 * for the next one.
 */
private[reader] final class TaskClock(partition: KafkaShareInputPartition) {

  private val startedAt = System.nanoTime

  var pollNanos, pinNanos, ackNanos, outsideNanos = 0L
  var polls                                       = 0
  // When the task last returned a part to Spark (0: not yet).
  var lastReturn = 0L

  def lockAgeMs(acquiredAt: Long): Long = (System.nanoTime - acquiredAt) / 1000000L

  def lockUsedPercent(polledAt: Long): Long = lockAgeMs(polledAt) * 100 / partition.query.locks.lockDurationMs

  /** The oldest acquisition this task still pins ([[io.github.kafkashare.spark.options.LockBudget]]). */
  val pinnableLockAgeMs: Long = partition.query.locks.pinnableAgeMs(partition.query.holdUntilCommit)

  def lockSpent(polledAt: Long): Boolean = lockAgeMs(polledAt) > pinnableLockAgeMs

  def budgetLeftMs: Long = partition.query.readDurationMs - (System.nanoTime - startedAt) / 1000000L

  // make bench-profile (tests/bench/profile_read.py) reads this line: keep the two in step.
  def summary(emitted: Long): String =
    s"kafka-share: batch ${partition.batch} task ${partition.task}: $polls polls, $emitted records in " +
      s"${(System.nanoTime - startedAt) / 1000000} ms: polling ${pollNanos / 1000000} ms, pinning ${pinNanos / 1000000} ms, " +
      s"acknowledging ${ackNanos / 1000000} ms, in Spark ${outsideNanos / 1000000} ms"
}
