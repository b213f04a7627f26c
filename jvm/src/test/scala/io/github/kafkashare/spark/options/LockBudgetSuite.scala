package io.github.kafkashare.spark.options

import org.scalatest.funsuite.AnyFunSuite

/** The lock's shares keep the order the read path depends on, for short, default and long locks. */
class LockBudgetSuite extends AnyFunSuite {

  private val locks = Seq(1000L, 3001L, 15000L, 30000L, 600000L).map(LockBudget)

  test("a record pinned at the latest pinnable age still has lock left before the watcher acknowledges it") {
    for (l <- locks) {
      assert(l.pinnableAgeMs(holdUntilCommit = true) < l.unrenewedHoldMs, l)
      assert(l.pinnableAgeMs(holdUntilCommit = false) == l.unrenewedHoldMs, l)
      assert(l.unrenewedHoldMs < l.lockDurationMs, l)
    }
  }

  test("a renewal round fits in the half lock it leaves: its commit and its poll-back before the lock ends") {
    for (l <- locks) {
      assert(l.renewEveryMs * 2 <= l.lockDurationMs, l)
      assert(l.renewalCommitTimeoutMs + l.renewalPollBackMs < l.lockDurationMs - l.renewEveryMs, l)
    }
    assert(LockBudget(600000L).renewalCommitTimeoutMs == 30000L && LockBudget(600000L).renewalPollBackMs == 10000L)
  }

  test("the pool's spans: idle close at half a lock, a full buffer spent at one, last attempts kept for two") {
    val l = LockBudget(30000L)
    assert(l.idleCloseMs == 15000L && l.bufferSpentMs == 30000L && l.lastAttemptKeepMs == 60000L)
    assert(l.heldConsumerWaitMs == 3750L)
    for (l <- locks) assert(l.idleCloseMs < l.bufferSpentMs && l.bufferSpentMs < l.lastAttemptKeepMs, l)
  }

  test("the driver waits for phase two a lock from planning, or a renewal round from now, and a second more") {
    assert(LockBudget(30000L).phaseTwoWaitMs(renewing = false) == 31000L)
    assert(LockBudget(30000L).phaseTwoWaitMs(renewing = true) == 16000L)
  }
}
