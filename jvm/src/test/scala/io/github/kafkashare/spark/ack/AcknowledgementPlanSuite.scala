package io.github.kafkashare.spark.ack

import io.github.kafkashare.spark.ack.AcknowledgementPlan._
import io.github.kafkashare.spark.options.Decision
import org.scalatest.funsuite.AnyFunSuite

class AcknowledgementPlanSuite extends AnyFunSuite {

  /** A hold whose commit has not come, with time left, in a running query, on a cluster that renews. */
  private def check(
      committed: Boolean = false,
      late: Boolean = false,
      stopped: Boolean = false,
      renewable: Boolean = true,
      explicit: Boolean = false
  ) = atCheck(committed, late, stopped, renewable, explicit)

  test("a part is acknowledged only once it is pinned, and held when the strategy holds until the commit") {
    assert(forPart(pinnedByUs = false, holdUntilCommit = true, anyRecords = true) == ForPart.GiveBack)
    assert(forPart(pinnedByUs = false, holdUntilCommit = false, anyRecords = true) == ForPart.GiveBack)
    assert(forPart(pinnedByUs = true, holdUntilCommit = true, anyRecords = true) == ForPart.HoldUntilCommit)
    assert(forPart(pinnedByUs = true, holdUntilCommit = false, anyRecords = true) == ForPart.Accept)
    // Nothing to hold (every record of the poll was dropped or given back): the consumer goes back at once.
    assert(forPart(pinnedByUs = true, holdUntilCommit = true, anyRecords = false) == ForPart.Accept)
  }

  test("a failed read task never RELEASEs a pinned record, and never keeps an unpinned one") {
    assert(onFailure(pinned = true) == Decision.Accept, "pinned: the batch replays it; another member must not emit it too")
    assert(onFailure(pinned = false) == Decision.Release, "not pinned: nobody will emit it")
  }

  test("the commit applies the decisions, whatever else is true at that check") {
    assert(check(committed = true) == AtCheck.ApplyDecisions)
    assert(check(committed = true, late = true, stopped = true, renewable = false) == AtCheck.ApplyDecisions)
    assert(check(committed = true, explicit = true, stopped = true) == AtCheck.ApplyDecisions)
  }

  test("before the commit a hold waits while its locks have time left and its query runs") {
    assert(check() == AtCheck.Wait)
    assert(check(renewable = false, explicit = true) == AtCheck.Wait)
  }

  test("late locks are renewed where the cluster can, and given up where it cannot: two-phase commit ACCEPTs, explicit mode RELEASEs") {
    assert(check(late = true) == AtCheck.Renew)
    assert(check(late = true, explicit = true) == AtCheck.Renew)
    val accept = check(late = true, renewable = false)
    assert(accept.isInstanceOf[AtCheck.GiveUp])
    val acceptGiveUp = accept.asInstanceOf[AtCheck.GiveUp]
    assert(acceptGiveUp.instead == Decision.Accept && acceptGiveUp.poolConsumer)
    assert(acceptGiveUp.why.contains("share.record.lock.duration.ms"), "the advice names the setting")
    val release = check(late = true, renewable = false, explicit = true).asInstanceOf[AtCheck.GiveUp]
    assert(release.instead == Decision.Release && release.poolConsumer)
  }

  test("a stopped query's holds end at once, renewed or not, unless their batch committed") {
    assert(check(stopped = true) == AtCheck.QueryStopped)
    assert(check(stopped = true, renewable = false) == AtCheck.QueryStopped)
    assert(check(stopped = true, late = true, explicit = true) == AtCheck.QueryStopped)
    assert(check(stopped = true, committed = true, explicit = true) == AtCheck.ApplyDecisions)
  }

  test("at a stop, held records go back to the group: RELEASE, but for the decisions explicit mode stored") {
    val record = ("t", 0, 5L)
    assert(atStop(explicit = false, stored = None)(record) == Decision.Release)
    assert(atStop(explicit = true, stored = None)(record) == Decision.Release)
    val stored = Some(Map(record -> Decision.Reject))
    assert(atStop(explicit = true, stored)(record) == Decision.Reject)
    assert(atStop(explicit = true, stored)(("t", 0, 6L)) == Decision.Release, "undecided: RELEASE, not the default")
  }

  test("a failed renewal gives up and closes the consumer, whose state is then unknown") {
    val twoPhase = renewalFailed(explicit = false)
    assert(twoPhase.instead == Decision.Accept && !twoPhase.poolConsumer)
    assert(renewalFailed(explicit = true).instead == Decision.Release)
  }

  test("explicit decisions apply per record, the default where foreachBatch gave none") {
    val decide = decisionOf(Map(("t", 0, 1L) -> Decision.Reject, ("t", 1, 1L) -> Decision.Release), Decision.Accept) _
    assert(decide(("t", 0, 1L)) == Decision.Reject)
    assert(decide(("t", 1, 1L)) == Decision.Release)
    assert(decide(("t", 0, 2L)) == Decision.Accept)
  }
}
