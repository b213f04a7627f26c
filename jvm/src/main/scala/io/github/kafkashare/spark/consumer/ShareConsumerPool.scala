package io.github.kafkashare.spark.consumer

import java.util.concurrent.{ConcurrentHashMap, ConcurrentLinkedDeque, TimeUnit}
import java.util.concurrent.atomic.AtomicLong

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import io.github.kafkashare.spark.offsets.{AcquisitionLog, SourceMarkers}
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
 *    waits a moment for such a one rather than create a new one, and so for one the evictor has out.
 *  - Records a consumer acquired and no batch took (its carry, its client's buffer, what its client
 *    fetched while it waited here) stay locked to it, invisible to the rest of the group, until it
 *    polls again or closes; closing gives them back and spends a delivery attempt of each, so a record
 *    on its last attempt would be archived. Hence, each second (the evictor):
 *    - what an idle consumer's client fetched meanwhile (and, where the key renews, what its client's
 *      buffer holds past a full poll) is collected into its carry, and its query's driver told to run a batch ([[SourceMarkers.markFetchedWhileIdle]]): the driver runs none while
 *      it sees nothing new, and the broker does not say what is locked to whom;
 *    - a carry older than the key's `locks.idleCloseMs` (half a lock: too late for a batch to pin it) has its
 *      locks renewed where the cluster can (RENEW, Kafka 4.2+: the key's `renewIdle`), for up to
 *      [[ShareConsumerPool.MaxIdleRenewMs]], so that a stalled query spends no delivery attempt; else it is
 *      RELEASEd, and the consumer kept, with its membership; records on their last attempt stay for a
 *      batch (released, they would be archived) for up to two locks;
 *    - a consumer with an aged carry whose query ran two batches since its last borrower's (the first
 *      wholly without it) is closed, its carry RELEASEd (records on their last attempt kept for up to
 *      two locks first): the query's tasks run on other executors now, or on fewer consumers here, and
 *      while it stays a member the group may give it a partition that no read task then polls (a CI run
 *      saw 1,973 of 3,000 records held that way for minutes, renewed, after an executor's death moved a
 *      real-time query's tasks to its replacement);
 *    - a consumer idle longer than `locks.idleCloseMs` with no carry is closed.
 *    A borrower gets the idle consumer whose records are oldest, so that they reach a batch first.
 *  - A stopped query polls no more, so its consumers must go; `closeIdle` does it at once where the
 *    driver shares the JVM (local mode), and on executors the evictor does it within a second of the
 *    query's `stopped` marker appearing in its checkpoint ([[SourceMarkers]], registered by `watch`).
 * No capacity limit: the pool holds at most as many consumers as tasks ran at once on this executor.
 *
 * One pool per JVM serves every query (held by [[io.github.kafkashare.spark.runtime.JvmResources]],
 * which read tasks are given as their runtime); tests build their own with a
 * clock they move by hand and call [[evictIdle]] themselves.
 *
 * @param clock tells how long consumers have been idle (the pool dates them when they come back; a carry
 *              keeps the reader's System.nanoTime date); a borrower's wait for a held consumer is real time
 * @param open  creates a consumer for a key
 */
final class ShareConsumerPool(clock: Clock, open: ConsumerKey => PooledShareConsumer) extends Logging {
  import ShareConsumerPool.{MaxIdleRenewMs, MaxWaitForHeldMs}

  private val idle = new ConcurrentHashMap[ConsumerKey, ConcurrentLinkedDeque[PooledShareConsumer]]()

  def borrow(key: ConsumerKey): PooledShareConsumer = {
    var found = takeIdle(key)
    // A batch that holds records until its commit keeps its consumers with the commit watcher until
    // it sees the commit, a moment after the next batch's tasks start; the evictor has one out for a
    // moment while it collects what its client fetched or renews its carry. A new consumer would cost far
    // more (it joins the group and waits seconds for an assignment, while the one it replaces keeps its
    // partitions), so wait for one to come back.
    val waitUntil = System.nanoTime + TimeUnit.MILLISECONDS.toNanos(math.min(MaxWaitForHeldMs, key.locks.heldConsumerWaitMs))
    while (found == null && (count(held, key) > 0 || count(withEvictor, key) > 0) && System.nanoTime < waitUntil) {
      Thread.sleep(10)
      found = takeIdle(key)
    }
    if (found == null) found = open(key)
    found.borrows += 1
    found.lent = true
    countUp(lentOut, key)
    found
  }

  // Consumers out with a read task, per key (a consumer held for a commit stays counted until it is back).
  private val lentOut = new ConcurrentHashMap[ConsumerKey, AtomicLong]()

  // Idle consumers the evictor took out of their queue for a moment (to collect or renew), per key: counted
  // before they leave it and until they are back, so that a borrower who finds the queue empty waits for them.
  private val withEvictor = new ConcurrentHashMap[ConsumerKey, AtomicLong]()

  private def count(counts: ConcurrentHashMap[ConsumerKey, AtomicLong], key: ConsumerKey): Long =
    Option(counts.get(key)).fold(0L)(_.get)

  /** Takes `c` out of `queue` for the evictor, if no borrower took it first, and runs `f` on it meanwhile. */
  private def withEvictorHolding[A](queue: ConcurrentLinkedDeque[PooledShareConsumer], c: PooledShareConsumer)(f: => A): Option[A] = {
    countUp(withEvictor, c.key)
    try if (queue.remove(c)) Some(f) else None
    finally withEvictor.get(c.key).decrementAndGet()
  }

  // Counted inside compute: forgetUnused drops a counter only at 0, atomically with this.
  private def countUp(counts: ConcurrentHashMap[ConsumerKey, AtomicLong], key: ConsumerKey): Unit =
    counts.compute(key, (_, count) => { val c = if (count == null) new AtomicLong() else count; c.incrementAndGet(); c })

  private def notLent(consumer: PooledShareConsumer): Unit = if (consumer.lent) {
    consumer.lent = false
    lentOut.get(consumer.key).decrementAndGet()
  }

  private def takeIdle(key: ConsumerKey): PooledShareConsumer = {
    val queue                      = idle.get(key)
    var found: PooledShareConsumer = null
    while (found == null && queue != null && !queue.isEmpty) {
      val waiting = queue.asScala.toList.map(c => (c, c.pendingSinceNanos)) // read once: the evictor may change it
      // The one holding the oldest acquired records, else the one given back last (so extras age out).
      val pick = waiting.collect { case (c, Some(since)) => (c, since) }.minByOption(_._2).map(_._1).orElse(waiting.headOption.map(_._1))
      // remove() fails when another borrower or the evictor took it meanwhile: then look again.
      pick.filter(queue.remove).foreach(c => found = withFreshCarry(c))
    }
    found
  }

  /**
   * `c`, taken from the pool, with an aged carry renewed (where the key says the cluster can: no delivery
   * attempt spent, for up to [[MaxIdleRenewMs]]) or else released; null when that failed and `c` was closed.
   */
  private def withFreshCarry(c: PooledShareConsumer): PooledShareConsumer =
    if (!carryAged(c)) c
    else if (c.key.renewIdle && c.carriedFirstSinceNanos.forall(ageMs(_) <= MaxIdleRenewMs)) renewCarry(c)
    else
      try {
        // Records on their last attempt wait for a batch, but not forever: two locks on, the broker has
        // archived them long ago, and a query that runs under another key (new options) never takes them.
        val keepLastAttempts = c.carriedSinceNanos.forall(ageMs(_) <= c.key.locks.lastAttemptKeepMs)
        val released         = c.releaseCarry(keepLastAttempts)
        if (released > 0)
          logInfo(s"kafka-share: a pooled consumer of ${c.key} released $released carried record(s), acquired more " +
            s"than ${c.key.locks.idleCloseMs} ms ago: too late for a batch to pin them; the group delivers them again")
        c
      } catch {
        case NonFatal(e) =>
          logWarning("a pooled share consumer could not release its carry; closing it", e)
          discard(c)
          null
      }

  private def renewCarry(c: PooledShareConsumer): PooledShareConsumer = {
    val carried = c.carrying
    try {
      val refused = c.renewHeld(c.key.locks.renewalCommitTimeoutMs, c.key.locks.renewalPollBackMs)
      if (refused.isEmpty) {
        logDebug(s"kafka-share: a pooled consumer of ${c.key} renewed the locks of $carried carried record(s)")
        c
      } else {
        // What the broker refused, or the client did not hand back yet, cannot be dated any more: close it.
        logInfo(s"kafka-share: a pooled consumer of ${c.key} could not renew the locks of ${refused.size} carried " +
          s"partition(s) or record(s) (${refused.head._3.getMessage}); closing it, the group delivers them again")
        discard(c)
        null
      }
    } catch {
      case NonFatal(e) =>
        logWarning("a pooled share consumer could not renew its carry's locks; closing it", e)
        discard(c)
        null
    }
  }

  // Consumers a commit watcher holds, per key: they come back to the pool (or are discarded) soon.
  private val held = new ConcurrentHashMap[ConsumerKey, AtomicLong]()

  /** `consumer` is out with a commit watcher and will come back through giveBack or discard. */
  def expectBack(consumer: PooledShareConsumer): Unit = {
    consumer.expectedBack = true
    countUp(held, consumer.key)
  }

  private def cameBack(consumer: PooledShareConsumer): Unit = if (consumer.expectedBack) {
    consumer.expectedBack = false
    held.get(consumer.key).decrementAndGet()
  }

  private def ageMs(sinceNanos: Long): Long = TimeUnit.NANOSECONDS.toMillis(clock.nanoTime() - sinceNanos)

  private def carryAged(c: PooledShareConsumer): Boolean = c.carriedSinceNanos.exists(ageMs(_) > c.key.locks.idleCloseMs)

  /**
   * Idle past `locks.idleCloseMs`, carrying nothing, and holding nothing a batch could still take: a client
   * still fetching was just collected (what it fetched would be in the carry), and the rest of a full
   * poll in its buffer is left until its locks are spent anyway (`locks.bufferSpentMs`: a whole lock).
   */
  private def unused(c: PooledShareConsumer): Boolean =
    c.carrying == 0 && ageMs(c.idleSinceNanos) > c.key.locks.idleCloseMs &&
      (c.stillFetching || c.pendingSinceNanos.forall(ageMs(_) > c.key.locks.bufferSpentMs))

  // Set when the JVM exits: a consumer given back after that is closed, not kept for a borrower that never comes.
  @volatile private var closing = false

  def giveBack(consumer: PooledShareConsumer): Unit =
    if (closing) discard(consumer)
    else Uninterrupted(giveBackNow(consumer))

  private def giveBackNow(consumer: PooledShareConsumer): Unit =
    try {
      consumer.releaseHeld()
      consumer.idleSinceNanos = clock.nanoTime()
      val wasHeld = consumer.expectedBack
      consumer.expectedBack = false
      // Added inside compute: forgetUnused drops an empty queue atomically with this.
      idle.compute(
        consumer.key,
        (_, queue) => { val q = if (queue == null) new ConcurrentLinkedDeque[PooledShareConsumer]() else queue; q.addFirst(consumer); q }
      )
      // Counted back only now: a borrower that sees the count drop must find the consumer in the pool,
      // and the evictor forgets a key only when it finds no consumer of it counted out nor idle.
      if (wasHeld) held.get(consumer.key).decrementAndGet()
      notLent(consumer)
    } catch {
      case NonFatal(e) =>
        logWarning(s"a share consumer could not release what it held; closing it", e)
        discard(consumer)
    }

  // The close leaves the group; on an interrupted thread (a cancelled task, a stopping query) it would not.
  def discard(consumer: PooledShareConsumer): Unit =
    try { cameBack(consumer); notLent(consumer); Uninterrupted(consumer.close()) }
    catch { case NonFatal(e) => logWarning("closing a share consumer failed", e) }

  /** Closes the idle consumers of `key` (a query stopped): what they fetched ahead goes back to the group. */
  def closeIdle(key: ConsumerKey): Unit = Option(idle.get(key)).foreach(drain)

  /**
   * The JVM exits: closes every idle consumer (close RELEASEs what a consumer still holds), then waits up
   * to `waitForLentMs` for those out with read tasks to come back, and closes them as they do. One still
   * out after that is left to its session's end: closing it under its task would break the task's client.
   */
  def closeAll(waitForLentMs: Long = 0L): Unit = {
    closing = true
    idle.values.forEach(q => drain(q))
    val deadline = System.nanoTime + TimeUnit.MILLISECONDS.toNanos(waitForLentMs)
    while (lentOut.values.asScala.exists(_.get > 0) && System.nanoTime < deadline) Thread.sleep(50)
    idle.values.forEach(q => drain(q))
    val left = lentOut.values.asScala.map(_.get).sum
    if (left > 0) logWarning(s"kafka-share: $left share consumer(s) still out with read tasks as the JVM exits; " +
      "they leave their group when their session expires")
  }

  private def drain(queue: ConcurrentLinkedDeque[PooledShareConsumer]): Unit = {
    var c = queue.pollFirst()
    while (c != null) { discard(c); c = queue.pollFirst() }
  }

  // How each query (key) and this pool tell each other what they cannot see (it stopped; records came;
  // it ran batches without this executor).
  private val markersOf = new ConcurrentHashMap[ConsumerKey, ShareConsumerPool.Watched]()

  /**
   * Registers the markers and the acquisition log of the query of `key`: when it writes `stopped`, its
   * idle consumers are closed; when one of them fetched records while idle, the pool says so there; when
   * its log has two batches past the one an idle consumer served, that consumer's carry is not kept.
   */
  def watch(key: ConsumerKey, markers: SourceMarkers, acquisitions: AcquisitionLog): Unit =
    markersOf.putIfAbsent(key, ShareConsumerPool.Watched(markers, acquisitions))

  private def collectFetchedWhileIdle(): Unit = idle.asScala.foreach { case (key, queue) =>
    Option(markersOf.get(key)).map(_.markers).foreach { markers =>
      // Where the pool renews what it collects, also what the client's buffer may hold past a full poll.
      // Not where fetches acquire no more than a poll returns (strict acquisition: no rest is buffered),
      // and not on one idle past idleCloseMs: it is about to be closed. Where the buffer is empty after all,
      // the poll starts a fetch: up to a poll more is acquired, and renewed, for the next batch.
      val strict = key.params.get("share.acquire.mode").contains("record_limit")
      def buffered(c: PooledShareConsumer) =
        key.renewIdle && !strict && c.mayHoldBuffered && ageMs(c.idleSinceNanos) <= key.locks.idleCloseMs
      val fetching = queue.asScala.toList.filter(c => c.carrying == 0 && (c.stillFetching || buffered(c)))
      // remove() fails when a borrower took it meanwhile: then it is theirs, not ours.
      val collected = fetching.flatMap { c =>
        withEvictorHolding(queue, c) {
          try {
            val n = c.collectFetchedWhileIdle(alsoBuffered = buffered(c))
            queue.addFirst(c)
            n
          } catch {
            case NonFatal(e) =>
              logWarning("a pooled share consumer could not collect what it fetched while idle; closing it", e)
              discard(c)
              0
          }
        }
      }.sum
      if (collected > 0) logInfo(s"kafka-share: idle consumers of $key fetched $collected record(s) meanwhile; asking for a batch")
      // Said again each round until a task takes them: the batch asked for may run no task on this executor.
      if (queue.asScala.exists(_.carriesFetchedWhileIdle)) markers.markFetchedWhileIdle()
    }
  }

  private def closeStopped(): Unit = idle.asScala.foreach { case (key, queue) =>
    Option(markersOf.get(key)).map(_.markers).filter(_ => !queue.isEmpty).filter(stopped).foreach { _ =>
      logInfo(s"kafka-share: the query of $key stopped; closing its ${queue.size} idle consumer(s)")
      drain(queue)
    }
  }

  // A look-up that fails (a throttled object store) counts as not stopped: the next round asks again.
  private def stopped(markers: SourceMarkers): Boolean =
    try markers.stopped
    catch { case NonFatal(e) => logWarning("kafka-share: could not look up whether a query stopped", e); false }

  /**
   * Forgets the queries with no consumer idle here, out with a read task or held for a commit: a stopped
   * query's, or a running one whose consumers were all closed. A read task watches its query again right
   * after it borrows; if a borrow came while the markers were being removed, they are put back.
   */
  private def forgetUnused(): Unit = markersOf.asScala.toList.foreach { case (key, markers) =>
    // Counts first: a consumer given back is in its queue before it stops being counted.
    if (count(lentOut, key) == 0 && count(held, key) == 0 && idle.computeIfPresent(key, (_, q) => if (q.isEmpty) null else q) == null) {
      markersOf.remove(key, markers)
      lentOut.computeIfPresent(key, (_, count) => if (count.get == 0) null else count)
      held.computeIfPresent(key, (_, count) => if (count.get == 0) null else count)
      withEvictor.computeIfPresent(key, (_, count) => if (count.get == 0) null else count)
      if (count(lentOut, key) > 0) markersOf.putIfAbsent(key, markers)
    }
  }

  private def closeLongIdle(): Unit = idle.asScala.foreach { case (key, queue) =>
    // Decided for all at one moment, then done: closing a consumer takes a while.
    val waiting         = queue.asScala.toList
    val (aged, toClose) = (waiting.filter(carryAged), waiting.filter(c => !carryAged(c) && unused(c)))
    // Looked up once per round, before any consumer leaves the queue where borrowers find it.
    val ranSince = if (aged.exists(_.lastBatch >= 0)) batchesRanSince(key) else (_: Long) => 0
    // remove() fails when a borrower took it meanwhile: then it is theirs, not ours. One given back
    // since is looked at again: it may hold records now.
    // One at a time (a renewal takes a round trip or two): the others stay where borrowers find them.
    aged.foreach { c =>
      withEvictorHolding(queue, c) {
        val kept = if (c.lastBatch >= 0 && ranSince(c.lastBatch) >= 2) leftBehind(c) else withFreshCarry(c)
        Option(kept).foreach(queue.addLast)
      }
    }
    toClose.filter(queue.remove).foreach(c => if (unused(c)) discard(c) else queue.addLast(c))
  }

  /**
   * How many batches of the query of `key` ran after a given one, by its acquisition log (one listing); none
   * when the pool does not know the query or the look-up failed. Not while a batch stalls (a slow
   * foreachBatch): no later batch starts, and the carry is renewed.
   */
  private def batchesRanSince(key: ConsumerKey): Long => Int =
    Option(markersOf.get(key)).map(_.acquisitions).flatMap { log =>
      try {
        val ran = log.batches
        Some((batch: Long) => ran.count(_ > batch))
      } catch {
        case NonFatal(e) => logWarning("kafka-share: could not look up the batches a query ran", e); None
      }
    }.getOrElse((_: Long) => 0)

  /**
   * `c` carries aged records, and its query ran two batches since the one it last served: the first of them
   * wholly without it (its tasks run on other executors now, or on fewer consumers here). Kept a member, it
   * may be given partitions that no read task polls. So its carry goes back to the group and it is closed.
   * Records on their last delivery attempt (released, the broker archives them) stay with it for a batch
   * to take, for up to two locks since they were first acquired, as in any aged carry; then it is closed
   * with them. Returns `c` while it keeps them, else null.
   */
  private def leftBehind(c: PooledShareConsumer): PooledShareConsumer = {
    val carried = c.carrying
    try {
      val withinTwoLocks = c.carriedFirstSinceNanos.forall(ageMs(_) <= c.key.locks.lastAttemptKeepMs)
      c.releaseCarry(keepLastAttempts = withinTwoLocks)
      if (c.carrying == 0) {
        logInfo(s"kafka-share: the query of ${c.key} ran two batches since this executor's idle consumer last served one " +
          s"(batch ${c.lastBatch}); closing it: the $carried record(s) it carried, and its partitions, go back to the group")
        discard(c)
        null
      } else if (c.key.renewIdle) renewCarry(c)
      else c
    } catch {
      case NonFatal(e) =>
        logWarning("a pooled share consumer could not release its carry; closing it", e)
        discard(c)
        null
    }
  }

  /** How many queries the pool keeps entries for (for tests). */
  private[consumer] def queriesKnown: Int =
    (idle.keySet.asScala ++ held.keySet.asScala ++ lentOut.keySet.asScala ++ markersOf.keySet.asScala).size

  /** How many consumers of `key` wait in the pool (for tests). */
  private[consumer] def idleCount(key: ConsumerKey): Int = Option(idle.get(key)).fold(0)(_.size)

  /**
   * One round of the evictor: closes the idle consumers of stopped queries, collects what the other idle
   * consumers fetched, releases aged carries, closes unused consumers, forgets queries with no consumer here.
   */
  def evictIdle(): Unit = { closeStopped(); collectFetchedWhileIdle(); closeLongIdle(); forgetUnused() }
}

object ShareConsumerPool extends Logging {

  /** What the pool reads of a query it serves: its markers, and its acquisition log (the batches it ran). */
  final case class Watched(markers: SourceMarkers, acquisitions: AcquisitionLog)

  /** The longest a borrower waits for a consumer that a commit watcher is about to give back. */
  val MaxWaitForHeldMs = 1000L

  /**
   * How long an idle consumer keeps renewing what it carries for a batch to take (a batch that stalls,
   * a slow foreachBatch): past it, a query that takes nothing from this executor gives the records back.
   */
  val MaxIdleRenewMs: Long = 15 * 60 * 1000L
}
