package io.github.kafkashare.spark.consumer

import java.util.concurrent.TimeUnit

/** A clock that moves only when a test says so. */
final class ManualClock extends Clock {
  @volatile private var now     = 0L
  override def nanoTime(): Long = now
  def advanceMs(ms: Long): Unit = now += TimeUnit.MILLISECONDS.toNanos(ms)
}
