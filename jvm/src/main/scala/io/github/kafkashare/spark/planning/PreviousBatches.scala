package io.github.kafkashare.spark.planning

import io.github.kafkashare.spark.offsets.{AcquisitionEntry, AcquisitionLog, DecisionLog, ShareSourceOffset, TopicPartitionRanges}
import io.github.kafkashare.spark.options.AcknowledgmentMode

/**
 * The log entries of the batch a trigger starts from, and the records of it that explicit-mode
 * decisions RELEASEd: they come back and must be emitted again, so they are not pinned. Final once the
 * batch committed, which it did before Spark asks for offsets after it: read once, not at every trigger.
 */
private[planning] final class PreviousBatches(acquisitions: AcquisitionLog, decisions: DecisionLog, mode: AcknowledgmentMode) {

  private var previous = Option.empty[(Long, Seq[AcquisitionEntry], TopicPartitionRanges)]

  /** The entries of the batch that ended at `start`, and what its decisions released. */
  def of(start: ShareSourceOffset): (Seq[AcquisitionEntry], TopicPartitionRanges) = synchronized { // real time reads ahead
    if (start.batch < 0) (Nil, TopicPartitionRanges.empty)
    else previous match {
      case Some((batch, entries, released)) if batch == start.batch => (entries, released)
      case _ =>
        val entries  = acquisitions.readBatch(start.batch, start.tasks)
        val released = releasedBy(start.batch, entries)
        previous = Some((start.batch, entries, released))
        (entries, released)
    }
  }

  /** Explicit mode: the records of `batch` that its decisions, or the default for records that got none, RELEASEd. */
  private def releasedBy(batch: Long, entries: Seq[AcquisitionEntry]): TopicPartitionRanges = mode match {
    case AcknowledgmentMode.Implicit          => TopicPartitionRanges.empty
    case AcknowledgmentMode.Explicit(default) => decisions.released(batch, AcquisitionEntry.offsetsOf(entries), default)
  }
}

/** What the previous batch pinned, from its log entries. */
final case class BatchStats(batch: Long, records: Long, maxDeliveryCount: Int)
