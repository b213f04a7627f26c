package io.github.kafkashare.spark.reader

import io.github.kafkashare.spark.reader.PollClassification.{Limits, Plan}
import org.scalatest.funsuite.AnyFunSuite

class PollClassificationSuite extends AnyFunSuite {

  /** A record: its offset and delivery count. */
  private final case class Rec(offset: Long, count: Int = 1)

  private val limits =
    Limits(deliveryLimit = 5, maxDeliveries = None, dropsRedeliveries = true, shareLeft = 100, holdUntilCommit = false, maxPollRecords = 10)

  private def plan(
      records: Seq[Rec],
      limits: Limits = limits,
      lockSpent: Boolean = false,
      fromCarry: Boolean = false,
      budgetLeft: Boolean = true,
      pinned: Set[Long] = Set.empty
  ): Plan[Rec] =
    PollClassification.plan[Rec](records, _.count, lockSpent, fromCarry, limits, () => budgetLeft, _.partition(r => pinned(r.offset)))

  private def offsets(rs: Seq[Rec]): Seq[Long] = rs.map(_.offset)

  test("a fresh poll is kept whole; a full one asks for another poll, a small one ends the task") {
    val full = plan((0L until 10L).map(Rec(_)))
    assert(offsets(full.keep) == (0L until 10L) && full.pollAgain && full.maxCount == 1)
    assert(Seq(full.spent, full.redelivered, full.poison, full.carry).forall(_.isEmpty))
    val small = plan(Seq(Rec(0), Rec(1)))
    assert(offsets(small.keep) == Seq(0L, 1L) && !small.pollAgain)
    assert(plan(Seq(Rec(0)), fromCarry = true).pollAgain, "the carry may hide a backlog")
    assert(!plan((0L until 10L).map(Rec(_)), budgetLeft = false).pollAgain, "the read duration is over")
    assert(plan(Nil) == Plan[Rec](Nil, Nil, Nil, Nil, Nil, pollAgain = false, maxCount = 0, someOnLastAttempt = false))
  }

  test("two-phase-commit and explicit mode poll once, whatever the poll") {
    val once = plan((0L until 10L).map(Rec(_)), limits.copy(holdUntilCommit = true))
    assert(once.keep.size == 10 && !once.pollAgain)
  }

  test("a poll beyond the task's share carries the rest; records on their last attempt are kept past the share, never carried") {
    val records = Seq(Rec(0), Rec(1), Rec(2, count = 5), Rec(3), Rec(4))
    val p       = plan(records, limits.copy(shareLeft = 2))
    assert(offsets(p.keep) == Seq(2L, 0L) && offsets(p.carry) == Seq(1L, 3L, 4L) && !p.pollAgain)
    assert(p.someOnLastAttempt)
    // A share already used up: only the last-attempt record is kept.
    val none = plan(records, limits.copy(shareLeft = 0))
    assert(offsets(none.keep) == Seq(2L) && offsets(none.carry) == Seq(0L, 1L, 3L, 4L))
  }

  test("a lock too far spent gives the poll back, but for the records on their last attempt") {
    val p = plan(Seq(Rec(0), Rec(1, count = 5), Rec(2, count = 2)), lockSpent = true)
    assert(offsets(p.spent) == Seq(0L, 2L) && offsets(p.keep) == Seq(1L))
    // Where the limit is unknown or records go to a dead-letter topic (Int.MaxValue) nothing is kept.
    val unknown = plan(Seq(Rec(0, count = 9)), limits.copy(deliveryLimit = Int.MaxValue), lockSpent = true)
    assert(offsets(unknown.spent) == Seq(0L) && unknown.keep.isEmpty)
  }

  test("a lock that aged during the pin write: the second check keeps only the records on their last attempt") {
    val (pinned, giveBack) = PollClassification.pinnableWhenSpent[Rec](Seq(Rec(0), Rec(1, count = 3)), _.count, 3)
    assert(offsets(pinned) == Seq(1L) && offsets(giveBack) == Seq(0L))
  }

  test("sibling pins at delivery count 1 (Kafka 4.1 gives a departed member's records back uncounted) are dropped, not emitted") {
    val p = plan(Seq(Rec(0), Rec(1), Rec(2)), pinned = Set(1L))
    assert(offsets(p.redelivered) == Seq(1L) && offsets(p.keep) == Seq(0L, 2L))
    // At least once: nothing is looked up, a redelivery is emitted again.
    val atLeastOnce = plan(Seq(Rec(0), Rec(1)), limits.copy(dropsRedeliveries = false), pinned = Set(1L))
    assert(atLeastOnce.redelivered.isEmpty && atLeastOnce.keep.size == 2)
  }

  test("a poll of only redeliveries pins nothing, and polls again: brokers hand redeliveries out a few at a time") {
    val p = plan(Seq(Rec(7, count = 3), Rec(8, count = 3)), pinned = Set(7L, 8L))
    assert(p.keep.isEmpty && offsets(p.redelivered) == Seq(7L, 8L))
    assert(p.pollAgain, "a small poll of throttled redeliveries is no sign of a quiet stream")
    assert(!plan(Seq(Rec(7), Rec(8)), pinned = Set(7L, 8L)).pollAgain, "first deliveries that few mean a quiet stream")
  }

  test("poison records (delivered more than maxDeliveries times) are rejected, not emitted nor carried") {
    val p = plan(Seq(Rec(0), Rec(1, count = 4), Rec(2, count = 2)), limits.copy(maxDeliveries = Some(3), shareLeft = 1))
    assert(offsets(p.poison) == Seq(1L) && offsets(p.keep) == Seq(0L) && offsets(p.carry) == Seq(2L))
    // A record pinned elsewhere is dropped as a redelivery before it can count as poison.
    val pinnedPoison = plan(Seq(Rec(1, count = 4)), limits.copy(maxDeliveries = Some(3)), pinned = Set(1L))
    assert(pinnedPoison.poison.isEmpty && offsets(pinnedPoison.redelivered) == Seq(1L))
  }
}
