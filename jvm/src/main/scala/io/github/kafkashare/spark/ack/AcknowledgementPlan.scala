package io.github.kafkashare.spark.ack

import io.github.kafkashare.spark.options.Decision

/**
 * What a consumer sends for the records it acquired, decided from where their batch stands. Pure: the
 * read task ([[io.github.kafkashare.spark.reader.PinnedPolls]]) and the commit watcher ([[CommitWatcher]])
 * do the sending, and `AcknowledgementPlanSuite` tests each rule without a broker.
 *
 * The rules, from docs/internals/delivery-semantics.md: nothing is ACCEPTed before it is pinned; a record pinned
 * to a batch is never RELEASEd by a failure (the batch replays it, and another member must not emit it
 * meanwhile); records held until the commit get the batch's decisions once the commit is there, and
 * only then, unless their locks are about to run out or their query stopped ([[atStop]]).
 */
object AcknowledgementPlan {

  /** What a read task does with a part of its records once it tried to pin them. */
  sealed trait ForPart
  object ForPart {

    /** Another attempt of the task pinned this part first: the records are not ours to emit; RELEASE them. */
    case object GiveBack extends ForPart

    /** Two-phase commit and explicit mode: keep the records acquired, for the commit watcher. */
    case object HoldUntilCommit extends ForPart

    /** ACCEPT at once (sent without waiting): the part is pinned, a retry replays it. */
    case object Accept extends ForPart
  }

  def forPart(pinnedByUs: Boolean, holdUntilCommit: Boolean, anyRecords: Boolean): ForPart =
    if (!pinnedByUs) ForPart.GiveBack
    else if (holdUntilCommit && anyRecords) ForPart.HoldUntilCommit
    else ForPart.Accept

  /**
   * A read task failed while it held records: those of a pinned part belong to the batch, which replays
   * them (ACCEPT); those not pinned yet will be emitted by no one (RELEASE, for the group to deliver again).
   */
  def onFailure(pinned: Boolean): Decision = if (pinned) Decision.Accept else Decision.Release

  /** What the commit watcher does with a hold at one of its checks. */
  sealed trait AtCheck
  object AtCheck {

    /** The commit has not come, the locks have time left, the query runs. */
    case object Wait extends AtCheck

    /** The batch committed: its decisions (explicit mode) or ACCEPT (two-phase commit). */
    case object ApplyDecisions extends AtCheck

    /** The locks near their end and the cluster renews them: RENEW, and wait another half lock. */
    case object Renew extends AtCheck

    /**
     * The commit will not come in time: acknowledge everything with `instead` and let the hold go.
     * `poolConsumer` is false after a renewal that failed midway: the client's state is not known.
     */
    final case class GiveUp(instead: Decision, why: String, poolConsumer: Boolean) extends AtCheck

    /** The query stopped before the commit came: acknowledge as [[atStop]] says, and close the consumer. */
    case object QueryStopped extends AtCheck
  }

  /**
   * @param committed the batch's commit file exists
   * @param late      the hold's deadline passed (80% of the lock, or half a lock since the last renewal)
   * @param stopped   the query's stopped marker is there
   * @param renewable the cluster renews locks (RENEW, Kafka 4.2+) and the query asked for it
   * @param explicit  explicit mode (else two-phase commit)
   */
  def atCheck(committed: Boolean, late: Boolean, stopped: Boolean, renewable: Boolean, explicit: Boolean): AtCheck =
    if (committed) AtCheck.ApplyDecisions
    else if (stopped) AtCheck.QueryStopped
    else if (late && renewable) AtCheck.Renew
    else if (late) giveUp(explicit, TooLate, poolConsumer = true)
    else AtCheck.Wait

  /**
   * What a stopped query's held records get when their batch did not commit: the sink may not have them
   * (Spark's stop cuts the writes of a foreachBatch that goes on), so they go back to the group, as after
   * a crash but at once. Two-phase commit RELEASEs them all: a run of the same checkpoint replays the
   * batch and drops their redeliveries (they are pinned), and a new checkpoint's query gets them.
   * Explicit mode applies the decisions foreachBatch already stored for the batch and RELEASEs the
   * records it gave none (not the default: foreachBatch may have stopped before it processed them).
   * The consumer is closed after, so it leaves the group at once.
   */
  def atStop(explicit: Boolean, stored: => Option[Map[(String, Int, Long), Decision]]): ((String, Int, Long)) => Decision =
    if (!explicit) _ => Decision.Release
    else stored.fold((_: (String, Int, Long)) => Decision.Release: Decision)(decided => decisionOf(decided, Decision.Release))

  /** A renewal the broker refused or that did not complete ends the hold. */
  def renewalFailed(explicit: Boolean): AtCheck.GiveUp = giveUp(explicit, "its locks could not be renewed", poolConsumer = false)

  /**
   * Without the commit, two-phase commit ACCEPTs: the records are pinned, so the batch replays them from
   * the topic whenever it runs again, and letting the locks expire would hand them to another member.
   * Explicit mode RELEASEs: the user decides when the batch runs again, and a record whose decision then
   * is ACCEPT or REJECT is acknowledged quietly when it comes back (its redelivery is dropped).
   */
  private def giveUp(explicit: Boolean, why: String, poolConsumer: Boolean) =
    AtCheck.GiveUp(if (explicit) Decision.Release else Decision.Accept, why, poolConsumer)

  private val TooLate =
    "it did not come within the lock duration. Raise the group's share.record.lock.duration.ms or shorten batches"

  /** Explicit mode at the commit: a record's decision, or the default where foreachBatch gave none. */
  def decisionOf(decided: Map[(String, Int, Long), Decision], default: Decision)(record: (String, Int, Long)): Decision =
    decided.getOrElse(record, default)
}
