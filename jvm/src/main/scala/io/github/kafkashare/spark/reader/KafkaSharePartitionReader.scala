package io.github.kafkashare.spark.reader

import scala.util.control.NonFatal

import io.github.kafkashare.spark.ack.CommitWatcher
import io.github.kafkashare.spark.consumer.{PooledShareConsumer, ShareConsumerPool}
import io.github.kafkashare.spark.metrics.TaskCounters
import io.github.kafkashare.spark.offsets.{AcquisitionEntry, TopicPartitionRanges}
import org.apache.hadoop.fs.Path
import org.apache.kafka.clients.consumer.{AcknowledgeType, ConsumerRecord}
import org.apache.spark.internal.Logging
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.connector.metric.CustomTaskMetric
import org.apache.spark.sql.connector.read.{PartitionReader, PartitionReaderFactory}

/**
 * Reads one task of one batch. The order of steps is the delivery contract:
 *  1. the log already has this (batch, task): replay exactly those records, acquire nothing;
 *  2. otherwise poll once; give back records whose locks are too far spent to pin (a pause came
 *     between the fetch and now: another member may have them already); drop redeliveries of
 *     records pinned to an earlier batch or to a sibling task of this batch (exactly-once strategies),
 *  3. pin what is left: write the log entry (atomic, create-if-absent),
 *  4. only then acknowledge: ACCEPT now, or, for two-phase commit, hand the consumer to the
 *     commit watcher, which ACCEPTs once Spark's commit log has the batch;
 *  5. emit the pinned records.
 * A failure before step 3 RELEASEs what was acquired. After step 3 nothing is RELEASEd: the
 * records belong to this batch, and a retry replays them.
 */
final class KafkaSharePartitionReader(partition: KafkaShareInputPartition)
    extends PartitionReader[InternalRow] with Logging {

  private type Record = ConsumerRecord[Array[Byte], Array[Byte]]

  private val counters = new TaskCounters
  private val totals   = partition.totals.open() // here, inside the task, so that the task's updates count
  // Held batches are acknowledged after the task that acquired them ended; the next task here reports it.
  locally {
    val late = CommitWatcher.takeCounts(partition.consumerKey.groupId)
    counters.accepted += late.accepted; counters.released += late.released; counters.rejected += late.rejected
  }
  private lazy val rows: Iterator[InternalRow] = {
    val records = partition.log.read(partition.batch, partition.task) match {
      case Some(entry) => replay(entry)
      case None        => acquireAndPin()
    }
    records.iterator.map { case (r, count) => RecordRows.toRow(r, count, partition.includeHeaders) }
  }
  private var current: InternalRow = _

  override def next(): Boolean =
    if (rows.hasNext) { current = rows.next(); true } else false

  override def get(): InternalRow = current

  override def currentMetricsValues(): Array[CustomTaskMetric] = counters.toTaskMetrics

  override def close(): Unit = counters.addTo(totals)

  private def replay(entry: AcquisitionEntry): Seq[(Record, Int)] = {
    val records = ReplayFetcher.fetch(entry.runs, partition.consumerKey.params, partition.failOnDataLoss)
    counters.replayed += records.size
    records
  }

  private def acquireAndPin(): Seq[(Record, Int)] = {
    val consumer = ShareConsumerPool.borrow(partition.consumerKey)
    var pinned   = false
    try {
      val poll     = consumer.poll(partition.topics, partition.pollTimeoutMs)
      val polledAt = poll.acquiredAtNanos
      if (!poll.fromCarry) counters.acquired += poll.records.size
      poll.records.foreach(r => counters.maxDeliveryCount = math.max(counters.maxDeliveryCount, RecordRows.deliveryCountOf(r)))

      val polled = if (lockAgeMs(polledAt) <= pinnableLockAgeMs) poll.records else {
        logWarning(s"kafka-share: batch ${partition.batch} task ${partition.task}: ${poll.records.size} record(s) were " +
          s"acquired ${lockAgeMs(polledAt)} ms ago, too close to the end of their ${partition.lockDurationMs} ms lock to " +
          "pin (was this JVM paused?); giving them back to the group")
        consumer.acknowledge(poll.records, AcknowledgeType.RELEASE)
        counters.released += poll.records.size
        Seq.empty[Record]
      }
      val (redelivered, unpinned) =
        if (partition.strategy.dropsRedeliveries) polled.partition(pinnedElsewhere)
        else (Seq.empty[Record], polled)
      val (poison, fresh) = partition.poison match {
        case Some(policy) => unpinned.partition(r => RecordRows.deliveryCountOf(r) > policy.maxDeliveries)
        case None         => (Seq.empty[Record], unpinned)
      }
      rejectPoison(consumer, poison)
      // A poll returns whole record batches, often more than this task's share of maxRecordsPerTrigger:
      // the rest stays acquired for the next task (PooledShareConsumer's carry), not RELEASEd.
      val (kept, overLimit) = fresh.splitAt(partition.maxRecords)

      val entry          = AcquisitionEntry.of(kept.map(r => (r.topic, r.partition, r.offset, RecordRows.deliveryCountOf(r))))
      val (winner, ours) = partition.log.writeIfAbsent(partition.batch, partition.task, entry)
      pinned = ours

      consumer.acknowledge(redelivered, AcknowledgeType.ACCEPT)
      consumer.carry(overLimit, polledAt)
      counters.dropped += redelivered.size
      if (!ours) {
        // Another attempt of this task pinned first: its entry is the batch's truth, ours goes back.
        consumer.acknowledge(kept, AcknowledgeType.RELEASE)
        counters.released += kept.size
        finish(consumer, polledAt)
        replay(winner)
      } else if (partition.holdUntilCommit && kept.nonEmpty) {
        consumer.commit() // the dropped and poison records; the kept ones stay held
        counters.lockUsedPercent = lockUsedPercent(polledAt)
        // The locks started at the fetch, which for a carry or the client's buffer was some time ago.
        val lockLeftMs = (partition.lockDurationMs * 0.8).toLong - lockAgeMs(polledAt)
        CommitWatcher.holdUntilCommitted(consumer, new Path(partition.commitFile), partition.hadoopConf,
          math.max(lockLeftMs, 0L),
          partition.explicitDefault.map(CommitWatcher.ExplicitDecisions(partition.decisions, partition.batch, _)))
        kept.map(r => r -> RecordRows.deliveryCountOf(r))
      } else {
        consumer.acknowledge(kept, AcknowledgeType.ACCEPT)
        counters.accepted += kept.size + redelivered.size
        finish(consumer, polledAt)
        kept.map(r => r -> RecordRows.deliveryCountOf(r))
      }
    } catch {
      case NonFatal(e) =>
        if (!pinned) {
          counters.released += consumer.holding
          try { consumer.releaseHeld(); ShareConsumerPool.giveBack(consumer) }
          catch { case NonFatal(_) => ShareConsumerPool.discard(consumer) }
        } else {
          // Pinned: the retry replays these records; accept them so nobody else gets them.
          try { consumer.acceptHeld(); ShareConsumerPool.giveBack(consumer) }
          catch { case NonFatal(_) => ShareConsumerPool.discard(consumer) }
        }
        throw e
    }
  }

  /**
   * Records delivered more often than kafka.share.maxDeliveries: to the dead-letter topic (confirmed),
   * then REJECTed, never emitted. The REJECT goes out with the task's next commit.
   */
  private def rejectPoison(consumer: PooledShareConsumer, poison: Seq[Record]): Unit = if (poison.nonEmpty) {
    val policy = partition.poison.get
    policy.deadLetterTopic.foreach(DeadLetters.send(poison, _, partition.consumerKey.groupId, partition.consumerKey.params))
    consumer.acknowledge(poison, AcknowledgeType.REJECT)
    counters.rejected += poison.size
    logWarning(s"kafka-share: ${poison.size} record(s) delivered more than ${policy.maxDeliveries} times rejected" +
      policy.deadLetterTopic.fold("")(t => s" after writing them to '$t'") + ": " +
      poison.take(5).map(r => s"${r.topic}-${r.partition}@${r.offset}").mkString(", "))
  }

  private def finish(consumer: PooledShareConsumer, polledAt: Long): Unit = {
    val refused = consumer.commit()
    refused.foreach { case (t, p, e) =>
      logWarning(s"the broker refused acknowledgements for $t-$p (${e.getMessage}); pinned records will be " +
        "redelivered and, with an exactly-once strategy, dropped")
    }
    counters.lockUsedPercent = lockUsedPercent(polledAt)
    ShareConsumerPool.giveBack(consumer)
  }

  private def lockUsedPercent(polledAt: Long): Long = lockAgeMs(polledAt) * 100 / partition.lockDurationMs

  private def lockAgeMs(acquiredAt: Long): Long = (System.nanoTime - acquiredAt) / 1000000L

  /**
   * The oldest acquisition this task still pins. Acknowledging right away needs little of the lock;
   * holding until the batch commits needs the rest of the batch, and the commit watcher ACCEPTs at 80%.
   */
  private def pinnableLockAgeMs: Long =
    (partition.lockDurationMs * (if (partition.holdUntilCommit) 0.6 else 0.8)).toLong

  /**
   * Whether a record is pinned already: to an earlier batch (the pinned set), or to a sibling task of
   * this batch. Only a redelivered record (delivery count above 1) can be pinned by a sibling, so the
   * siblings' entries are read only when one comes.
   */
  private def pinnedElsewhere: Record => Boolean = {
    lazy val bySiblings = partition.log.siblingsOf(partition.batch, partition.task)
      .foldLeft(TopicPartitionRanges.empty)((acc, e) => acc.union(e.offsets))
    r => partition.pinned.contains(r.topic, r.partition, r.offset) ||
      (RecordRows.deliveryCountOf(r) > 1 && bySiblings.contains(r.topic, r.partition, r.offset))
  }
}

object KafkaShareReaderFactory extends PartitionReaderFactory {
  override def createReader(partition: org.apache.spark.sql.connector.read.InputPartition): PartitionReader[InternalRow] =
    new KafkaSharePartitionReader(partition.asInstanceOf[KafkaShareInputPartition])
}
