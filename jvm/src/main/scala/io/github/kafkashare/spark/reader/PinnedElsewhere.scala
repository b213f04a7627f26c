package io.github.kafkashare.spark.reader

import scala.collection.mutable

import io.github.kafkashare.spark.consumer.PooledShareConsumer.Record
import io.github.kafkashare.spark.offsets.{AcquisitionEntry, TopicPartitionRanges}

/**
 * Which records of a poll one read task finds pinned already: to an earlier batch (the pinned set the
 * offsets carry), to a sibling task of this batch, or to an earlier part of this task. Not only
 * redeliveries (delivery count above 1) are looked up: on Kafka 4.1 a record released by a departing
 * member comes back with delivery count 1; and after a pause longer than a lock a record one task
 * pinned can come back to a sibling of the same batch.
 *
 * The siblings' parts are listed once per poll, and each part is read once (a part never changes after
 * it is written). Records are looked up one by one only in the partitions where the poll's offsets reach
 * into a pinned range: a backlog's polls are new offsets, and a lookup per record was a tenth of a read
 * task's CPU (docs/internals/performance.md).
 */
private[reader] final class PinnedElsewhere(partition: KafkaShareInputPartition) {

  private var ownParts         = TopicPartitionRanges.empty
  private val siblingPartsRead = mutable.Set.empty[(Int, Int)]
  private var siblingsPinned   = TopicPartitionRanges.empty

  /** A part this task pinned: its records are pinned elsewhere for the task's later polls. */
  def addOwnPart(entry: AcquisitionEntry): Unit = ownParts = ownParts.union(entry.offsets)

  /** (the records pinned elsewhere, the others). */
  def split(records: Seq[Record]): (Seq[Record], Seq[Record]) =
    if (records.isEmpty) (Seq.empty, records)
    else {
      refreshSiblings()
      val pins    = Seq(partition.pinned, ownParts, siblingsPinned)
      val suspect = PinnedElsewhere.partitionsReachingPins(records, pins)
      if (suspect.isEmpty) (Seq.empty, records)
      else records.partition(r => suspect((r.topic, r.partition)) && pins.exists(_.contains(r.topic, r.partition, r.offset)))
    }

  private def refreshSiblings(): Unit =
    partition.query.log.partNames(partition.batch).filter(n => n._1 != partition.task && !siblingPartsRead(n)).foreach {
      case name @ (t, p) =>
        partition.query.log.read(partition.batch, t, p).foreach(e => siblingsPinned = siblingsPinned.union(e.offsets))
        siblingPartsRead += name
    }
}

private[reader] object PinnedElsewhere {

  /** The partitions whose offsets in `records` (from lowest to highest) overlap a pinned range. */
  def partitionsReachingPins(records: Seq[Record], pins: Seq[TopicPartitionRanges]): Set[(String, Int)] = {
    val found           = mutable.Set.empty[(String, Int)]
    var topic: String   = null
    var kafkaPartition  = -1
    var lowest, highest = 0L
    def check(): Unit =
      if (
        topic != null && !found((topic, kafkaPartition)) &&
        pins.exists(_.overlaps(topic, kafkaPartition, lowest, highest))
      ) found += ((topic, kafkaPartition))
    // A poll's records come partition after partition: one span per run of a partition.
    records.foreach { r =>
      if (r.partition != kafkaPartition || r.topic != topic) {
        check(); topic = r.topic; kafkaPartition = r.partition; lowest = r.offset; highest = r.offset
      } else { lowest = math.min(lowest, r.offset); highest = math.max(highest, r.offset) }
    }
    check()
    found.toSet
  }
}
