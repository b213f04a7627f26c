package io.github.kafkashare.spark.options

/**
 * Every span the source times by its records' lock, in one place: a lock starts when a fetch acquires
 * records and lasts the group's `share.record.lock.duration.ms` (or `kafka.share.lock.timeout.ms`); when
 * it ends, the broker gives the records back to the group, and a delivery attempt is spent. Each span
 * says what it is for and why it is that share of the lock.
 */
final case class LockBudget(lockDurationMs: Long) {

  /**
   * A read task pins (and emits) polled records only while their lock is younger than this. Acknowledging
   * right away needs little of the lock; holding until the batch commits needs the rest of the batch, and
   * without renewal the commit watcher acknowledges at [[unrenewedHoldMs]].
   */
  def pinnableAgeMs(holdUntilCommit: Boolean): Long = (lockDurationMs * (if (holdUntilCommit) 0.6 else 0.8)).toLong

  /**
   * Without RENEW, held records are acknowledged (ACCEPT) when their lock is this old, committed or not:
   * past it the broker would deliver them again. A batch that holds records longer is warned about.
   */
  def unrenewedHoldMs: Long = (lockDurationMs * 0.8).toLong

  /**
   * With RENEW, held locks are renewed every half lock: the broker restarts a lock when it takes the
   * renewal, so half a lock is left for a renewal that is slow to arrive.
   */
  def renewEveryMs: Long = lockDurationMs / 2

  /** One watcher renews every hold of the JVM in turn: a slow broker must not hold up the others past their margin. */
  def renewalCommitTimeoutMs: Long = math.min(30000L, renewEveryMs / 2)
  def renewalPollBackMs: Long      = math.min(10000L, renewEveryMs / 4)

  /**
   * A pooled consumer idle this long is closed, and what an idle one carries is given back (or renewed):
   * what it fetched ahead is locked to it until then, too late for a batch to pin after.
   */
  def idleCloseMs: Long = lockDurationMs / 2

  /** How long a borrower waits, at most, for a consumer the commit watcher still holds (it comes back at the commit). */
  def heldConsumerWaitMs: Long = idleCloseMs / 4

  /** The rest of a full poll left in an idle client's buffer is spent after a whole lock. */
  def bufferSpentMs: Long = 2 * idleCloseMs

  /** Records on their last delivery attempt wait for a batch for up to two locks since they were acquired. */
  def lastAttemptKeepMs: Long = 4 * idleCloseMs

  /**
   * How long the driver waits for a committed batch's acknowledgements before it plans the next: the
   * watcher acknowledges within a lock of the batch's polls, or, renewing, sees the commit at its next
   * renewal round; a second more for the round itself.
   */
  def phaseTwoWaitMs(renewing: Boolean): Long = (if (renewing) renewEveryMs else lockDurationMs) + 1000L
}
