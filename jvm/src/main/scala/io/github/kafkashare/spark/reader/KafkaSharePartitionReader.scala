package io.github.kafkashare.spark.reader

import io.github.kafkashare.spark.ack.CommitWatcher
import io.github.kafkashare.spark.consumer.PooledShareConsumer
import io.github.kafkashare.spark.metrics.{ShareSourceMetrics => Metrics}
import io.github.kafkashare.spark.runtime.{JvmResources, TaskRuntime}
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.connector.metric.CustomTaskMetric
import org.apache.spark.sql.connector.read.{PartitionReader, PartitionReaderFactory}

/**
 * Reads one task of one batch:
 *  - the log already has this (batch, task): another attempt ran it. Seal the task (the other
 *    attempt, if alive, can pin nothing more) and replay exactly the records of its parts; acquire
 *    nothing;
 *  - otherwise acquire and pin, poll after poll ([[PinnedPolls]]).
 */
final class KafkaSharePartitionReader(partition: KafkaShareInputPartition, runtime: TaskRuntime) extends PartitionReader[InternalRow] {

  private type Record = PooledShareConsumer.Record

  private var acquisition: Option[PinnedPolls] = None
  // Held batches are acknowledged after the task that acquired them ended; the next task here reports it.
  private val late = runtime.commitWatcherIfStarted.fold(CommitWatcher.Counts(0, 0, 0))(_.takeCounts(partition.query.consumerKey))
  private val task = new ReadTaskBase(partition) // last but for what cannot fail: it counts the task as running
  task.counters.add(Metrics.Accepted, late.accepted); task.counters.add(Metrics.Released, late.released)
  task.counters.add(Metrics.Rejected, late.rejected)
  private lazy val rows: Iterator[InternalRow] = {
    def records =
      if (partition.query.log.read(partition.batch, partition.task).isDefined) replaySealed()
      else {
        val polls = new PinnedPolls(partition, task.counters, () => replaySealed(), new BatchBudget(partition.query.pollTimeoutMs), runtime)
        acquisition = Some(polls)
        polls
      }
    // What the real-time batch before pinned and did not emit (the query ran in real time before): first, in every attempt.
    val carried = if (task.carried.isEmpty) Iterator.empty else task.replayOf(task.carried)
    (carried ++ records).map { case (r, count) => task.row(r, count) }
  }
  private var current: InternalRow = _

  override def next(): Boolean =
    if (rows.hasNext) { current = rows.next(); true }
    else false

  override def get(): InternalRow = current

  override def currentMetricsValues(): Array[CustomTaskMetric] = task.counters.toTaskMetrics

  override def close(): Unit = task.close(acquisition.foreach(_.close()))

  private def replaySealed(): Iterator[(Record, Int)] = task.replayOf(partition.query.log.sealTask(partition.batch, partition.task))
}

object KafkaShareReaderFactory extends PartitionReaderFactory {
  override def createReader(partition: org.apache.spark.sql.connector.read.InputPartition): PartitionReader[InternalRow] =
    new KafkaSharePartitionReader(partition.asInstanceOf[KafkaShareInputPartition], JvmResources)
}
