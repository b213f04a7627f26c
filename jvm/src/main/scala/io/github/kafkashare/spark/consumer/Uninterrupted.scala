package io.github.kafkashare.spark.consumer

/**
 * Runs Kafka client calls that must happen on a thread whose interrupt flag may be set.
 *
 * Why: Spark interrupts a query's stream thread when it stops the query, and a task's thread when it
 * cancels the task (a stop cancels the query's jobs). Kafka's clients refuse to work on an interrupted
 * thread (they throw InterruptException at once), so an acknowledgement or a close made there would not
 * happen: the records would stay locked to a consumer that never leaves the group until its session
 * expires. The flag is cleared for the call and set again after it, so the interrupt still ends the work
 * the thread was doing.
 */
object Uninterrupted {
  def apply[T](body: => T): T = {
    val interrupted = Thread.interrupted()
    try body
    finally if (interrupted || Thread.interrupted()) Thread.currentThread.interrupt()
  }
}
