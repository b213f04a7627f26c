package io.github.kafkashare.spark.reader

/**
 * What becomes of each record of one poll, decided without I/O: the delivery contract's rules of a
 * read task in one place, with a suite of its own (PollClassificationSuite) that needs no broker.
 * [[PinnedPolls]] does the I/O around it: the poll, the sibling reads behind `pinnedElsewhere`, the
 * acknowledgements and the pin write.
 *
 * Generic in the record, so that the tests can use plain values; `count` gives a record's delivery
 * count.
 */
private[reader] object PollClassification {

  /**
   * The limits one poll is judged by.
   *
   * @param deliveryLimit     the group's delivery count limit; Int.MaxValue where no record is lost at
   *                          the limit (a dead-letter topic) or it is unknown: then none is on its last attempt
   * @param maxDeliveries     kafka.share.maxDeliveries: records delivered more often are poison
   * @param dropsRedeliveries the strategy drops records pinned elsewhere (the exactly-once ones)
   * @param shareLeft         records this task may still emit (its share of maxRecordsPerTrigger, less what it emitted)
   * @param holdUntilCommit   two-phase-commit or explicit mode: the task polls once
   * @param maxPollRecords    the consumer's max.poll.records
   */
  final case class Limits(
      deliveryLimit: Int,
      maxDeliveries: Option[Int],
      dropsRedeliveries: Boolean,
      shareLeft: Long,
      holdUntilCommit: Boolean,
      maxPollRecords: Int
  )

  /**
   * @param spent       RELEASE now: their locks are too far spent to pin (another member may have them)
   * @param redelivered ACCEPT quietly, not emitted: pinned to an earlier batch, a sibling task or an earlier part
   * @param poison      REJECT (after the dead-letter topic), never emitted
   * @param carry       beyond the task's share: kept acquired for the next task of the pool
   * @param keep        to pin and emit: within the share, and every record on its last attempt
   * @param pollAgain   the task should poll once more (a backlog, or throttled redeliveries)
   * @param maxCount    the poll's highest delivery count (0 for an empty poll)
   * @param someOnLastAttempt some record of the poll is on its last delivery attempt
   */
  final case class Plan[R](
      spent: Seq[R],
      redelivered: Seq[R],
      poison: Seq[R],
      carry: Seq[R],
      keep: Seq[R],
      pollAgain: Boolean,
      maxCount: Int,
      someOnLastAttempt: Boolean
  )

  /** A record delivered `count` times is on its last attempt: one more failure and the broker archives it. */
  def onLastAttempt(count: Int, deliveryLimit: Int): Boolean = count >= deliveryLimit

  /**
   * Classifies one poll.
   *
   * @param lockSpent       the poll's locks are older than a record may be pinned with (a pause between fetch and now)
   * @param fromCarry       the records came from the pool's carry, not from the broker
   * @param budgetLeft      whether the task is still within kafka.share.read.duration.ms (asked last, as before a poll)
   * @param pinnedElsewhere splits records into (pinned elsewhere, the others)
   */
  def plan[R](
      records: Seq[R],
      count: R => Int,
      lockSpent: Boolean,
      fromCarry: Boolean,
      limits: Limits,
      budgetLeft: () => Boolean,
      pinnedElsewhere: Seq[R] => (Seq[R], Seq[R])
  ): Plan[R] = {
    val maxCount                   = records.iterator.map(count).maxOption.getOrElse(0)
    val someOnLastAttempt          = PollClassification.onLastAttempt(maxCount, limits.deliveryLimit)
    def lastAttempt(r: R): Boolean = PollClassification.onLastAttempt(count(r), limits.deliveryLimit)

    val (polled, spent) = if (lockSpent) pinnableWhenSpent(records, count, limits.deliveryLimit) else (records, Seq.empty[R])
    val (redelivered, unpinned) =
      if (limits.dropsRedeliveries) pinnedElsewhere(polled) else (Seq.empty[R], polled)
    val (poison, fresh) = limits.maxDeliveries match {
      case Some(max) if maxCount > max => unpinned.partition(r => count(r) > max)
      case _                           => (Seq.empty[R], unpinned)
    }
    // A poll returns whole record batches, often more than this task's share: the rest is carried,
    // not RELEASEd. Records on their last attempt are never carried, even past the share: a carry that
    // ages out or a crash hands them back to the group, which archives them.
    val (lastChance, others) = if (someOnLastAttempt) fresh.partition(lastAttempt) else (Seq.empty[R], fresh)
    val (withinShare, carry) = others.splitAt((limits.shareLeft - lastChance.size).max(0L).min(Int.MaxValue).toInt)
    val keep                 = lastChance ++ withinShare
    // A small poll of redelivered records is no sign of a quiet stream: brokers after 4.1 hand out
    // records past half the delivery count limit in ever smaller batches, and those on their last
    // attempt one per fetch (to isolate a poison record), whatever the backlog behind them.
    val throttled = maxCount > 1
    val pollAgain = !limits.holdUntilCommit && carry.isEmpty && keep.size < limits.shareLeft && budgetLeft() &&
      (fromCarry || records.size * 2 >= limits.maxPollRecords || throttled)
    Plan(spent, redelivered, poison, carry, keep, pollAgain, maxCount, someOnLastAttempt)
  }

  /**
   * Records whose locks are too far spent: (those still pinned, those to give back). A record on its
   * last delivery attempt is pinned whatever its lock's age: back with the group it would be archived,
   * lost, and the broker gives it to nobody else, so no other member can emit it too.
   */
  def pinnableWhenSpent[R](records: Seq[R], count: R => Int, deliveryLimit: Int): (Seq[R], Seq[R]) =
    records.partition(r => onLastAttempt(count(r), deliveryLimit))
}
