package io.github.kafkashare.spark.consumer

import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.atomic.AtomicLong

import scala.util.control.NonFatal

import org.apache.spark.internal.Logging

/**
 * Share consumers of this executor JVM, reused across batches so that a steady stream creates none.
 *
 * Contract:
 *  - `borrow` hands out an idle consumer of that key, or a new one; the borrower has it alone.
 *  - `giveBack` takes it back; it must hold no acquired record (the pool RELEASEs leftovers, so a
 *    borrower's bug cannot make another task acknowledge its records).
 *  - `discard` closes it (after an error that may have left it in an unknown state).
 *  - A consumer that holds records for a two-phase commit is with the [[io.github.kafkashare.spark.ack.CommitWatcher]],
 *    not in the pool, until its batch commits.
 * No capacity limit: the pool holds at most as many consumers as tasks ran at once on this executor.
 */
object ShareConsumerPool extends Logging {

  private val idle    = new ConcurrentHashMap[ConsumerKey, java.util.concurrent.ConcurrentLinkedDeque[PooledShareConsumer]]()
  private val created = new AtomicLong()

  /** How many consumers this JVM created so far (a steady stream should stop increasing it). */
  def consumersCreated: Long = created.get

  def borrow(key: ConsumerKey): PooledShareConsumer = {
    val pooled = Option(idle.get(key)).flatMap(q => Option(q.pollFirst()))
    pooled.getOrElse {
      created.incrementAndGet()
      new PooledShareConsumer(key)
    }
  }

  def giveBack(consumer: PooledShareConsumer): Unit =
    try {
      consumer.releaseHeld()
      idle.computeIfAbsent(consumer.key, _ => new java.util.concurrent.ConcurrentLinkedDeque()).addFirst(consumer)
    } catch {
      case NonFatal(e) =>
        logWarning(s"a share consumer could not release what it held; closing it", e)
        discard(consumer)
    }

  def discard(consumer: PooledShareConsumer): Unit =
    try consumer.close() catch { case NonFatal(e) => logWarning("closing a share consumer failed", e) }

  /** Closes every idle consumer (close RELEASEs what a consumer still holds). */
  def closeAll(): Unit = idle.forEach((_, q) => { var c = q.pollFirst(); while (c != null) { discard(c); c = q.pollFirst() } })

  sys.addShutdownHook(closeAll())
}
