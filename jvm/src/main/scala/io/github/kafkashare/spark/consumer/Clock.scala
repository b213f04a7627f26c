package io.github.kafkashare.spark.consumer

/**
 * Time as the consumer pool and the commit watcher read it to date consumers and holds. Production
 * uses System.nanoTime; tests pass a clock they move by hand, so that an idle consumer's eviction or
 * a hold's deadline can be checked without waiting for it.
 */
trait Clock {
  def nanoTime(): Long
}

object Clock {
  val System: Clock = () => java.lang.System.nanoTime()
}
