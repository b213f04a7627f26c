package io.github.kafkashare.spark.reader

import io.github.kafkashare.spark.consumer.PooledShareConsumer
import io.github.kafkashare.spark.metrics.{ShareSourceMetrics => Metrics, TaskCounters}
import io.github.kafkashare.spark.offsets.{AcquiredRun, AcquisitionEntry}
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
final class RealTimeRecords(partition: KafkaShareInputPartition) extends Logging {

  private type Record = PooledShareConsumer.Record

  require(partition.realTime, s"$partition is no real-time task")
  private val work                    = partition.handedOver
  private val counters                = new TaskCounters
  private val totals                  = partition.totals.open()
  @volatile private var deadlineNanos = Long.MaxValue

  private var replay: Option[ReplayFetcher] = None
  private lazy val handedOver: Iterator[(Record, Int)] = {
    val earlier = work.earlierRunTasks.flatMap(task => partition.log.sealTask(partition.batch, task))
    val parts   = (if (work.carried.isEmpty) Nil else Seq(AcquisitionEntry(work.carried))) ++ earlier
    if (parts.isEmpty) Iterator.empty
    else {
      val fetcher = new ReplayFetcher(parts, partition.consumerKey.params, partition.failOnDataLoss)
      replay = Some(fetcher)
      fetcher.map { record => counters.add(Metrics.Replayed, 1); record }
    }
  }
  private lazy val polls                     = new PinnedPolls(partition, counters, () => ownPartsSealed(), Some(() => deadlineNanos))
  private var pollsStarted                   = false
  private var current: InternalRow           = _
  private var ended: Option[RealTimeTaskEnd] = None

  /**
   * The next row, waiting up to `timeoutMs` for one; false when the time is up. Spark ends the task at the
   * first false.
   */
  private var rowsEmitted = 0L

  def next(timeoutMs: Long): Boolean = {
    deadlineNanos = System.nanoTime + math.max(0L, timeoutMs) * 1000000L
    val source: Iterator[(Record, Int)] =
      if (handedOver.hasNext) handedOver
      else { pollsStarted = true; polls }
    if (source.hasNext) {
      val (record, count) = source.next()
      current = RecordRows.toRow(record, count, partition.includeHeaders)
      rowsEmitted += 1
      true
    } else false
  }

  def get: InternalRow = current

  /** Where the task ended: what it pinned, and what it did not emit. Asked once, when Spark ends the task. */
  def end: RealTimeTaskEnd = ended.getOrElse {
    val left = handedOver.toVector ++ (if (pollsStarted) polls.unemitted else Nil)
    val runs = AcquisitionEntry.of(left.map { case (r, count) => (r.topic, r.partition, r.offset, count) }).runs
    val taskEnd = RealTimeTaskEnd(
      partition.task,
      pinned = (if (pollsStarted) polls.pinnedRecords else 0L) + counters(Metrics.Replayed),
      unemitted = runs
    )
    ended = Some(taskEnd)
    logInfo(s"kafka-share: real-time batch ${partition.batch} task ${partition.task}: emitted $rowsEmitted row(s), " +
      s"pinned ${taskEnd.pinned}, left ${left.size} unemitted for the next batch")
    taskEnd
  }

  def currentMetricsValues: Array[CustomTaskMetric] = counters.toTaskMetrics

  def close(): Unit =
    try if (pollsStarted) polls.close()
    finally
      try replay.foreach(_.close())
      finally counters.addTo(totals)

  /** Another attempt of this very task pinned its part 0 first (Spark retried it): its parts are the task's. */
  private def ownPartsSealed(): Iterator[(Record, Int)] = {
    val fetcher =
      new ReplayFetcher(partition.log.sealTask(partition.batch, partition.task), partition.consumerKey.params, partition.failOnDataLoss)
    replay.foreach(_.close())
    replay = Some(fetcher)
    fetcher.map { record => counters.add(Metrics.Replayed, 1); record }
  }
}

/**
 * The end of a real-time read task, as Spark passes it to the driver (SupportsRealTimeMode.mergeOffsets).
 *
 * @param task      the task's index in the acquisition log
 * @param pinned    records it emitted or pinned (0: the batch had nothing from this task)
 * @param unemitted records pinned, and ACCEPTed, that Spark's end of the batch left unemitted
 */
final case class RealTimeTaskEnd(task: Int, pinned: Long, unemitted: Seq[AcquiredRun]) extends PartitionOffset
