package io.github.kafkashare.spark.consumer

import java.util.concurrent.{ConcurrentHashMap, ConcurrentLinkedDeque, Executors, TimeUnit}
import java.util.concurrent.atomic.AtomicLong

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import io.github.kafkashare.spark.offsets.SourceMarkers
import org.apache.spark.internal.Logging

/**
 * Share consumers of this executor JVM, reused across batches so that a steady stream creates none.
 *
 * Contract:
 *  - `borrow` hands out an idle consumer of that key, or a new one; the borrower has it alone.
 *  - `giveBack` takes it back; it must hold no acquired record but its carry (the pool RELEASEs
 *    leftovers, so a borrower's bug cannot make another task acknowledge its records).
 *  - `discard` closes it (after an error that may have left it in an unknown state).
 *  - A consumer that holds records for a two-phase commit is with the [[io.github.kafkashare.spark.ack.CommitWatcher]],
 *    not in the pool, until its batch commits (`expectBack`); a borrower finding no idle consumer
 *    waits a moment for such a one rather than create a new one.
 *  - A consumer idle for longer than its key's `idleCloseMs`, or whose carry is older than that, is
 *    closed, and never handed out. Why: records a consumer fetched but a poll did not return yet, and
 *    its carry, stay acquired by it, invisible to the rest of the group, until it polls again or
 *    closes; past half a lock they are too close to expiry to be given to a batch. A stopped query
 *    polls no more, so its consumers must go; `closeIdle` does it at once where the driver shares
 *    the JVM (local mode), and on executors the evictor does it within a second of the query's
 *    `stopped` marker appearing in its checkpoint ([[SourceMarkers]], registered by `watchStop`).
 * No capacity limit: the pool holds at most as many consumers as tasks ran at once on this executor.
 *
 * One pool per JVM serves every query ([[ShareConsumerPool.shared]]); tests build their own with a
 * clock they move by hand and call [[evictIdle]] themselves.
 *
 * @param clock tells how long consumers have been idle (the pool dates them when they come back; a carry
 *              keeps the reader's System.nanoTime date); a borrower's wait for a held consumer is real time
 * @param open  creates a consumer for a key
 */
final class ShareConsumerPool(clock: Clock, open: ConsumerKey => PooledShareConsumer) extends Logging {
  import ShareConsumerPool.MaxWaitForHeldMs

  private val idle    = new ConcurrentHashMap[ConsumerKey, ConcurrentLinkedDeque[PooledShareConsumer]]()
  private val created = new AtomicLong()

  /** How many consumers this JVM created so far (a steady stream should stop increasing it). */
  def consumersCreated: Long = created.get

  def borrow(key: ConsumerKey): PooledShareConsumer = {
    var found = takeIdle(key)
    // A batch that holds records until its commit keeps its consumers with the commit watcher until
    // it sees the commit, a moment after the next batch's tasks start. A new consumer would cost far
    // more (it joins the group and waits seconds for an assignment), so wait for one to come back.
    val waitUntil = System.nanoTime + TimeUnit.MILLISECONDS.toNanos(math.min(MaxWaitForHeldMs, key.idleCloseMs / 4))
    while (found == null && heldCount(key) > 0 && System.nanoTime < waitUntil) {
      Thread.sleep(10)
      found = takeIdle(key)
    }
    if (found == null) {
      created.incrementAndGet()
      found = open(key)
    }
    found.borrows += 1
    found
  }

  private def takeIdle(key: ConsumerKey): PooledShareConsumer = {
    val queue                      = idle.get(key)
    var found: PooledShareConsumer = null
    while (found == null && queue != null && !queue.isEmpty) {
      val c = queue.pollFirst()
      if (c != null) { if (tooLongLocked(c)) discard(c) else found = c }
    }
    found
  }

  // Consumers a commit watcher holds, per key: they come back to the pool (or are discarded) soon.
  private val held = new ConcurrentHashMap[ConsumerKey, AtomicLong]()

  private def heldCount(key: ConsumerKey): Long = Option(held.get(key)).fold(0L)(_.get)

  /** `consumer` is out with a commit watcher and will come back through giveBack or discard. */
  def expectBack(consumer: PooledShareConsumer): Unit = {
    consumer.expectedBack = true
    held.computeIfAbsent(consumer.key, _ => new AtomicLong()).incrementAndGet()
  }

  private def cameBack(consumer: PooledShareConsumer): Unit = if (consumer.expectedBack) {
    consumer.expectedBack = false
    held.get(consumer.key).decrementAndGet()
  }

  private def tooLongLocked(c: PooledShareConsumer): Boolean =
    TimeUnit.NANOSECONDS.toMillis(clock.nanoTime() - c.lockedSinceNanos) > c.key.idleCloseMs

  def giveBack(consumer: PooledShareConsumer): Unit =
    try {
      cameBack(consumer)
      consumer.releaseHeld()
      consumer.idleSinceNanos = clock.nanoTime()
      idle.computeIfAbsent(consumer.key, _ => new ConcurrentLinkedDeque()).addFirst(consumer)
    } catch {
      case NonFatal(e) =>
        logWarning(s"a share consumer could not release what it held; closing it", e)
        discard(consumer)
    }

  def discard(consumer: PooledShareConsumer): Unit =
    try { cameBack(consumer); consumer.close() }
    catch { case NonFatal(e) => logWarning("closing a share consumer failed", e) }

  /** Closes the idle consumers of `key` (a query stopped): what they fetched ahead goes back to the group. */
  def closeIdle(key: ConsumerKey): Unit = Option(idle.get(key)).foreach(drain)

  /** Closes every idle consumer (close RELEASEs what a consumer still holds). */
  def closeAll(): Unit = idle.values.forEach(q => drain(q))

  private def drain(queue: ConcurrentLinkedDeque[PooledShareConsumer]): Unit = {
    var c = queue.pollFirst()
    while (c != null) { discard(c); c = queue.pollFirst() }
  }

  // Where each query (key) says that it stopped: looked at only while the key has idle consumers.
  private val stopMarkers = new ConcurrentHashMap[ConsumerKey, SourceMarkers]()

  /** The query of `key` writes `markers.stopped` when it stops: then its idle consumers are closed. */
  def watchStop(key: ConsumerKey, markers: SourceMarkers): Unit = stopMarkers.putIfAbsent(key, markers)

  private def closeStopped(): Unit = idle.asScala.foreach { case (key, queue) =>
    Option(stopMarkers.get(key)).filter(_ => !queue.isEmpty).filter(_.stopped).foreach { _ =>
      logInfo(s"kafka-share: the query of $key stopped; closing its ${queue.size} idle consumer(s)")
      drain(queue)
    }
  }

  private def closeLongIdle(): Unit = idle.values.asScala.foreach { queue =>
    queue.asScala.toList.foreach { c =>
      // remove() fails when a borrower took it meanwhile: then it is theirs, not ours to close.
      if (tooLongLocked(c) && queue.remove(c)) discard(c)
    }
  }

  /** How many consumers of `key` wait in the pool (for tests). */
  private[consumer] def idleCount(key: ConsumerKey): Int = Option(idle.get(key)).fold(0)(_.size)

  /** One round of the evictor: closes consumers locked too long, and the idle ones of stopped queries. */
  def evictIdle(): Unit = { closeLongIdle(); closeStopped() }
}

object ShareConsumerPool extends Logging {

  /** The longest a borrower waits for a consumer that a commit watcher is about to give back. */
  val MaxWaitForHeldMs = 1000L

  /**
   * This JVM's pool. Nothing runs before a read task first uses it: then its evictor starts (a daemon
   * thread, a round every second) and a shutdown hook that closes what is idle.
   */
  lazy val shared: ShareConsumerPool = {
    val pool = new ShareConsumerPool(Clock.System, new PooledShareConsumer(_))
    val evictor = Executors.newSingleThreadScheduledExecutor { r =>
      val t = new Thread(r, "kafka-share-consumer-evictor"); t.setDaemon(true); t
    }
    evictor.scheduleWithFixedDelay(
      () =>
        try pool.evictIdle()
        catch {
          case NonFatal(e) => logWarning("closing idle share consumers failed", e)
        },
      1,
      1,
      TimeUnit.SECONDS
    )
    sys.addShutdownHook(pool.closeAll())
    pool
  }

  def borrow(key: ConsumerKey): PooledShareConsumer             = shared.borrow(key)
  def giveBack(consumer: PooledShareConsumer): Unit             = shared.giveBack(consumer)
  def discard(consumer: PooledShareConsumer): Unit              = shared.discard(consumer)
  def expectBack(consumer: PooledShareConsumer): Unit           = shared.expectBack(consumer)
  def closeIdle(key: ConsumerKey): Unit                         = shared.closeIdle(key)
  def watchStop(key: ConsumerKey, markers: SourceMarkers): Unit = shared.watchStop(key, markers)
  def consumersCreated: Long                                    = shared.consumersCreated
}
