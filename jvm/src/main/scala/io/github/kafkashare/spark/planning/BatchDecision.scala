package io.github.kafkashare.spark.planning

import io.github.kafkashare.spark.offsets.TopicPartitionRanges

/**
 * Whether the driver plans a batch at this trigger, decided without I/O from what the stream read of
 * the cluster and its checkpoint (BatchDecisionSuite tests it without a broker or Spark).
 *
 * A share group cannot be asked whether it has records for a member without a poll: so a batch runs
 * when one could find something, i.e. the first time, after a batch that got records, when an end
 * offset moved, when an idle consumer of an executor acquired records, and, now and then, to probe for
 * records that came back (released, or locks that ran out) below the ends, where the pinned set has holes.
 */
private[planning] object BatchDecision {

  /** The longest wait between probe batches that keep finding nothing. */
  val MaxProbeWaitMs: Long = 10 * 60 * 1000L

  /**
   * @param ends             each partition's end offset now
   * @param plannedEnds      the end offsets when the last batch was planned (empty before the first)
   * @param startOffsets     the group's start offset per partition (none: the group never read it)
   * @param pinned           the offsets pinned to batches still replayable
   * @param firstRun         no batch was planned by this stream yet
   * @param gotSome          the last batch read records
   * @param fetchedWhileIdle an executor's idle consumer acquired records since the last batch
   * @param sinceLastPlanMs  time since the last batch was planned
   * @param probeWaitMs      how long to wait between probes for records that came back
   * @param availableNow     Trigger.AvailableNow: the end offsets to read up to, and the empty batches in a row so far
   */
  final case class Inputs(
      ends: Map[(String, Int), Long],
      plannedEnds: Map[(String, Int), Long],
      startOffsets: Map[(String, Int), Long],
      pinned: TopicPartitionRanges,
      firstRun: Boolean,
      gotSome: Boolean,
      fetchedWhileIdle: Boolean,
      sinceLastPlanMs: Long,
      probeWaitMs: Long,
      availableNow: Option[(Map[(String, Int), Long], Int)]
  )

  sealed trait Decision
  case object Skip  extends Decision
  case object Run   extends Decision
  case object Probe extends Decision // runs, only to look for records that came back: the probe wait then doubles

  /**
   * Trigger.AvailableNow: how many batches in a row may find nothing while records below the ends are
   * neither pinned nor acknowledged (other members hold them, or transaction markers, which no one
   * acknowledges, leave gaps) before the query ends.
   */
  val AvailableNowEmptyBatches = 3

  def decide(in: Inputs): Decision = {
    // A partition the group has no start offset for was never read by it: from 0 where it must be
    // read to an end (AvailableNow), not at all where only records that came back are looked for.
    def holesBelow(limits: Map[(String, Int), Long], unread: Long => Option[Long]) = limits.exists { case ((t, p), end) =>
      in.startOffsets.get((t, p)).orElse(unread(end)).exists(s => in.pinned.hasHoles(t, p, s, end))
    }
    // An end offset never goes down, unless the topic was deleted and created again: new records too.
    def newData = in.ends.exists { case (tp, end) => end != in.plannedEnds.getOrElse(tp, 0L) }
    in.availableNow match {
      // Not "until a batch gets nothing": a busy topic always gives something, and a batch whose
      // records were all redeliveries to drop gets nothing while records below the ends remain.
      // Not on fetchedWhileIdle: while producers write, idle consumers always fetch something, and the
      // query would never end; records below the targets are holes, which run batches anyway.
      case Some((targets, emptyInARow)) =>
        if (in.firstRun || (holesBelow(targets, _ => Some(0L)) && emptyInARow < AvailableNowEmptyBatches)) Run else Skip
      case None =>
        if (in.firstRun || in.gotSome || newData || in.fetchedWhileIdle) Run
        else if (in.sinceLastPlanMs >= in.probeWaitMs && holesBelow(in.ends, _ => None)) Probe
        else Skip
    }
  }
}
