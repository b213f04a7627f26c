package io.github.kafkashare.spark.reader

import io.github.kafkashare.spark.consumer.PooledShareConsumer
import io.github.kafkashare.spark.metrics.{ShareSourceMetrics => Metrics}
import io.github.kafkashare.spark.offsets.{AcquiredRun, AcquisitionEntry}
import io.github.kafkashare.spark.runtime.TaskRuntime
import org.apache.spark.internal.Logging
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.connector.metric.CustomTaskMetric
import org.apache.spark.sql.connector.read.streaming.PartitionOffset

/**
 * One read task of a batch in Spark's real-time mode, without Spark 4.1's types (the reader in
 * jvm/realtime/ wraps it): Spark asks for the next row with the time left until the batch's end, and the
 * task polls until a record comes or the time is up. Its order:
 *  1. the records handed over to it ([[HandedOver]]): records the batch before pinned and did not emit, and the
 *     parts of an earlier run of this batch (sealed first, so that a task of that run still alive can pin
 *     nothing more), read back by offset;
 *  2. then poll after poll, each pinned before it is ACCEPTed and emitted ([[PinnedPolls]]), as in a
 *     micro-batch.
 * Spark ends the task at the batch's end without asking the reader, also between two rows of a poll. So
 * what was pinned and not emitted is named in the task's end ([[RealTimeTaskEnd]]), which Spark hands the
 * driver, and the next batch emits it first.
 */
final class RealTimeRecords(partition: KafkaShareInputPartition, runtime: TaskRuntime) extends Logging {

  private type Record = PooledShareConsumer.Record

  require(partition.realTime, s"$partition is no real-time task")
  private val work                    = partition.handedOver
  @volatile private var deadlineNanos = Long.MaxValue

  // What is emitted before polling: None until the first row is asked for.
  private var handedOver = Option.empty[Iterator[(Record, Int)]]
  // Another attempt of this task pinned part 0 before (Spark retried the task): its parts are the task's,
  // emitted from the log, and this attempt polls nothing (it can pin nothing under the sealed task).
  private var retried = false
  // This attempt emitted the task's parts another attempt pinned (when it found part 0 taken).
  private var ownPartsReplayed     = false
  private var pollsStarted         = false
  private var current: InternalRow = _
  private var rowsEmitted          = 0L
  private val task                 = new ReadTaskBase(partition)
  private lazy val polls =
    new PinnedPolls(partition, task.counters, () => ownPartsSealed(), new RealTimeDeadline(() => deadlineNanos), runtime)

  /**
   * The next row, waiting up to `timeoutMs` for one; false when the time is up. Spark ends the task at the
   * first false.
   */
  def next(timeoutMs: Long): Boolean = {
    deadlineNanos = System.nanoTime + math.max(0L, timeoutMs) * 1000000L
    val first = handedOver.getOrElse(startHandedOver())
    val source: Iterator[(Record, Int)] =
      if (first.hasNext || retried) first
      else { pollsStarted = true; polls }
    if (source.hasNext) {
      val (record, count) = source.next()
      current = task.row(record, count)
      rowsEmitted += 1
      true
    } else false
  }

  def get: InternalRow = current

  /**
   * Where the task ended: what it pinned, and what it did not emit. Spark asks once, when it ends the task
   * (Spark 4.1 to 4.3), also without asking for another row first. The rows not emitted stay readable, but the
   * task is sealed when it has no part of its own: this is for the task's end, not for a look in between.
   */
  def end: RealTimeTaskEnd = {
    val left = handedOver match {
      case Some(rows) =>
        val rest = rows.toVector
        handedOver = Some(rest.iterator)
        rest.map(row => runOf(row)) ++ (if (pollsStarted) polls.unemitted.map(runOf) else Nil) ++ lostToAnotherAttempt
      // Spark's time was up before this task asked for a row (a retry that started late): all of it is left.
      case None => handedOverParts(withOwn = true).flatMap(_.runs)
    }
    val runs = AcquisitionEntry.of(left.flatMap(r => (r.first to r.last).map(o => (r.topic, r.partition, o, r.deliveryCount)))).runs
    val taskEnd =
      RealTimeTaskEnd(partition.task, pinned = (if (pollsStarted) polls.pinnedRecords else 0L) + task.counters(Metrics.Replayed), runs)
    logInfo(s"kafka-share: real-time batch ${partition.batch} task ${partition.task}: emitted $rowsEmitted row(s), " +
      s"pinned ${taskEnd.pinned}, left ${runs.map(_.size).sum} unemitted for the next batch")
    taskEnd
  }

  def currentMetricsValues: Array[CustomTaskMetric] = task.counters.toTaskMetrics

  def close(): Unit = task.close(if (pollsStarted) polls.close())

  private def runOf(row: (Record, Int)): AcquiredRun = AcquiredRun(row._1.topic, row._1.partition, row._1.offset, row._1.offset, row._2)

  private def startHandedOver(): Iterator[(Record, Int)] = {
    retried = partition.query.log.read(partition.batch, partition.task).isDefined
    val parts = handedOverParts(withOwn = retried)
    val rows  = if (parts.isEmpty) Iterator.empty else task.replayOf(parts)
    handedOver = Some(rows)
    rows
  }

  /**
   * What the task emits before it polls, in this order: what the batch before left unemitted, the parts of
   * an earlier run's tasks and, `withOwn`, this task's own parts (a retry's start; the end of a task that
   * asked for no row, which leaves all of them to the next batch); each task sealed as it is read.
   */
  private def handedOverParts(withOwn: Boolean): Seq[AcquisitionEntry] = {
    val earlier = work.earlierRunTasks.flatMap(t => partition.query.log.sealTask(partition.batch, t))
    task.carried ++ earlier ++ (if (withOwn) ownParts else Nil)
  }

  /** This task's parts in the log, sealed: no attempt can pin more under it. */
  private def ownParts: Seq[AcquisitionEntry] = { ownPartsReplayed = true; partition.query.log.sealTask(partition.batch, partition.task) }

  /**
   * The polls ended without part 0 of their own, and without emitting another attempt's (the empty part 0 a
   * quiet task writes at its end lost to an attempt that pinned records): those are left to the next batch.
   */
  private def lostToAnotherAttempt: Seq[AcquiredRun] =
    if (!pollsStarted || ownPartsReplayed || polls.wrotePart0) Nil else ownParts.flatMap(_.runs)

  /** Another attempt of this very task pinned its part 0 first (Spark retried it): its parts are the task's. */
  private def ownPartsSealed(): Iterator[(Record, Int)] = task.replayOf(ownParts)
}

/**
 * The end of a real-time read task, as Spark passes it to the driver (SupportsRealTimeMode.mergeOffsets).
 *
 * @param task      the task's index in the acquisition log
 * @param pinned    records it emitted or pinned (0: the batch had nothing from this task)
 * @param unemitted records pinned, and ACCEPTed, that Spark's end of the batch left unemitted
 */
final case class RealTimeTaskEnd(task: Int, pinned: Long, unemitted: Seq[AcquiredRun]) extends PartitionOffset
