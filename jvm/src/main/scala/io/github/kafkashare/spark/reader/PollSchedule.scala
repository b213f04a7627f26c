package io.github.kafkashare.spark.reader

/**
 * When a read task polls again and how long each poll waits: the one thing a micro-batch's task and a
 * real-time one do differently. [[PinnedPolls]] runs the same loop for both and asks its schedule.
 */
private[reader] sealed trait PollSchedule {

  /** Whether the task polls on after a poll with nothing to pin, and while the stream is quiet. */
  def pollsUntilTheEnd: Boolean

  /** Whether the task's time for polls is up. */
  def timeIsUp: Boolean

  /** How long the next poll waits: `first` is the task's first poll, nothing emitted yet. */
  def pollTimeoutMs(first: Boolean, readBudgetLeftMs: => Long): Long

  /** Whether a consumer that has not joined the group yet waits for its assignment in its first poll. */
  def waitsForJoin: Boolean
}

/**
 * A micro-batch's task: the first poll waits kafka.share.poll.timeout.ms for records, later ones briefly,
 * within kafka.share.read.duration.ms. A poll that brings nothing to pin ends the task.
 */
private[reader] final class BatchBudget(firstPollTimeoutMs: Long) extends PollSchedule {
  val pollsUntilTheEnd = false
  def timeIsUp         = false
  val waitsForJoin     = true

  def pollTimeoutMs(first: Boolean, readBudgetLeftMs: => Long): Long =
    if (first) firstPollTimeoutMs else math.max(1L, math.min(PollSchedule.LaterPollTimeoutMs, readBudgetLeftMs))
}

/**
 * Spark's real-time mode: the task polls, briefly each time, until a little before Spark's end of the batch
 * (`deadline`, System.nanoTime, asked before each poll): neither an empty poll nor a quiet stream ends it.
 * A consumer that has not joined yet polls again rather than wait past the batch.
 */
private[reader] final class RealTimeDeadline(deadline: () => Long) extends PollSchedule {
  val pollsUntilTheEnd = true
  val waitsForJoin     = false

  // The last poll comes a little before Spark's end, so that its rows are emitted within the batch.
  private def lastPollBy: Long = deadline() - PollSchedule.RealTimeLastPollNanos

  def timeIsUp: Boolean = System.nanoTime >= lastPollBy

  def pollTimeoutMs(first: Boolean, readBudgetLeftMs: => Long): Long =
    math.max(1L, math.min(PollSchedule.RealTimePollTimeoutMs, (lastPollBy - System.nanoTime) / 1000000L))
}

private[reader] object PollSchedule {

  /** How long a poll after the first waits: a backlog answers at once, and an empty wait ends the task. */
  val LaterPollTimeoutMs = 200L

  /**
   * Real time: how long one poll waits. A poll returns as soon as records come; this only bounds how late
   * a task sees that Spark's end of the batch passed, and how often an idle task sends acknowledgements.
   */
  val RealTimePollTimeoutMs = 100L

  /**
   * Real time: how long before Spark's end of the batch the task stops polling. Spark ends a task between two
   * rows when the time is up; the rows of a poll come out in well under this, so none is left to the next batch
   * (which emits them by reading them back, slower), bar a pause.
   */
  val RealTimeLastPollNanos: Long = 50L * 1000000L
}
