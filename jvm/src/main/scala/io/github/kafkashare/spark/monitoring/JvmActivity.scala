package io.github.kafkashare.spark.monitoring

import java.util.concurrent.atomic.LongAdder

import com.codahale.metrics.Counter

/**
 * What this JVM's part of the source is doing now, for Spark's metrics system (the executor plugin
 * publishes it; in local mode the executor plugin runs in the driver's JVM, where the read tasks run).
 * Counted on hot paths (every task, every consumer, every renewal round): adders, no lock, no allocation.
 */
object JvmActivity {
  private val consumers = new LongAdder
  private val tasks     = new LongAdder

  /** RENEW acknowledgements sent since the JVM started: a Dropwizard counter (a LongAdder inside), registered as it is. */
  val recordsRenewed = new Counter

  /** Share consumers open in this JVM (the pool's, lent out or idle, and those the commit watcher holds). */
  def shareConsumers: Long = consumers.sum

  /** Read tasks running now. */
  def readTasks: Long = tasks.sum

  def consumerOpened(): Unit       = consumers.increment()
  def consumerClosed(): Unit       = consumers.decrement()
  def taskStarted(): Unit          = tasks.increment()
  def taskEnded(): Unit            = tasks.decrement()
  def renewedRecords(n: Int): Unit = if (n > 0) recordsRenewed.inc(n.toLong)
}
