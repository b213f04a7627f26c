package io.github.kafkashare.spark.ack

import java.util.concurrent.atomic.AtomicLong
import java.util.concurrent.{ConcurrentHashMap, ConcurrentLinkedQueue, TimeUnit}

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import io.github.kafkashare.spark.ack.AcknowledgementPlan.AtCheck
import io.github.kafkashare.spark.consumer.{Clock, ConsumerKey, PooledShareConsumer, ShareConsumerPool, Uninterrupted}
import io.github.kafkashare.spark.offsets.{DecisionLog, SerializableHadoopConf, SourceMarkers}
import io.github.kafkashare.spark.options.{Decision, LockBudget}
import io.github.kafkashare.spark.offsets.store.CheckpointStore
import org.apache.hadoop.fs.Path
import org.apache.spark.internal.Logging

/**
 * Phase 2 of two-phase commit and of explicit acknowledgement, on the executor that holds the records.
 *
 * A read task pins its records (phase 1, the acquisition log) and hands its consumer, still holding
 * them, to this watcher. The watcher checks Spark's commit log: once `commits/<batch>` exists the
 * sink has the batch, and the consumer acknowledges (two-phase commit: ACCEPT; explicit mode: the
 * decisions foreachBatch gave, or the default) and goes back to the pool. It does not wait for the
 * next batch, which an idle stream or a stop may never bring.
 *
 * Where the cluster can renew a lock (RENEW, Kafka 4.2+, [[Renewal]]), the watcher renews the held
 * records' locks every half lock duration while the commit has not come, for as long as the batch
 * runs. A renewal the broker refuses ends the hold as below.
 *
 * A query that stops (Spark stops a query's sources whether it ends by a stop or by a failure) ends its
 * holds at once, as [[AcknowledgementPlan.atStop]] says, and their consumers are closed, so they leave
 * the group at once: where the driver runs read tasks, its stop calls [[endHoldsOf]]; on executors the
 * watcher sees the query's `stopped` marker within a second (looked up once a second per query, not per
 * hold). At the JVM's exit, [[endAll]] does the same for every hold.
 *
 * If the commit does not come before the locks near their end (and cannot be renewed), the batch has
 * failed or is too slow: two-phase commit ACCEPTs, explicit mode RELEASEs ([[AcknowledgementPlan]] says why).
 *
 * One watcher per JVM serves every query (held by [[io.github.kafkashare.spark.runtime.JvmResources]]); tests build their own
 * with a clock they move by hand and call [[checkHolds]] themselves.
 *
 * @param clock dates the holds' deadlines
 * @param pool  where a consumer goes back after phase 2
 */
final class CommitWatcher(clock: Clock, pool: ShareConsumerPool) extends Logging {
  import CommitWatcher._

  private final case class Hold(
      consumer: PooledShareConsumer,
      commitFile: Path,
      conf: SerializableHadoopConf,
      deadlineNanos: Long,
      renewal: Option[Renewal],
      explicit: Option[ExplicitDecisions],
      done: DoneMark,
      renewals: Int = 0
  ) {
    def query: String = consumer.key.query
  }

  private final class Counters { val accepted, released, rejected = new AtomicLong }

  private val holds  = new ConcurrentLinkedQueue[Hold]()
  private val counts = new ConcurrentHashMap[ConsumerKey, Counters]()
  // One thread at a time acts on holds: the watcher's rounds, a stop (endHoldsOf) and the exit (endAll)
  // would otherwise use one consumer from two threads, which Kafka's client refuses.
  private val acting = new java.util.concurrent.locks.ReentrantLock
  // Per query: when its stopped marker was last looked up, and what it said (read and written under `acting`).
  private val stopLookups = scala.collection.mutable.Map.empty[String, (Long, Boolean)]

  /**
   * Holds `consumer` (with its acquired records) until `commitFile` exists or `maxHoldMs` passes; with a
   * `renewal`, `maxHoldMs` is when the locks are first renewed, and the hold lasts until the commit comes
   * or the query stops.
   */
  def holdUntilCommitted(
      consumer: PooledShareConsumer,
      commitFile: Path,
      conf: SerializableHadoopConf,
      maxHoldMs: Long,
      renewal: Option[Renewal],
      explicit: Option[ExplicitDecisions],
      done: DoneMark
  ): Unit = {
    pool.expectBack(consumer)
    holds.add(Hold(consumer, commitFile, conf, clock.nanoTime() + TimeUnit.MILLISECONDS.toNanos(maxHoldMs), renewal, explicit, done))
  }

  /** Takes the acknowledgements made for `key` since the last call, for a read task to report. */
  def takeCounts(key: ConsumerKey): Counts = Option(counts.get(key)).fold(Counts(0, 0, 0)) { c =>
    Counts(c.accepted.getAndSet(0), c.released.getAndSet(0), c.rejected.getAndSet(0))
  }

  /** Batches held now, for tests and metrics. */
  def holding: Int = holds.size

  /**
   * One round: every hold whose commit came, or whose deadline passed, gets its phase 2; a hold with a
   * renewal is renewed at its deadline instead, and ends early when its query stopped
   * ([[AcknowledgementPlan.atCheck]] decides which).
   */
  def checkHolds(): Unit = whileActing {
    val queries = holds.asScala.map(_.query).toSet
    stopLookups.keys.filterNot(queries).toList.foreach(stopLookups.remove)
    holds.asScala.toList.foreach(check)
  }

  /**
   * Ends every hold of the query whose checkpoint location is `query` (it stopped), now, on the calling
   * thread: the records are acknowledged as [[AcknowledgementPlan.atStop]] says, unless their batch
   * committed (then as at a commit), and the consumers are closed. Returns how many holds it ended.
   */
  def endHoldsOf(query: String): Int = whileActing {
    val ending = holds.asScala.toList.filter(_.query == query)
    ending.foreach(endAtStop(_, "the query stopped"))
    ending.size
  }

  /**
   * The JVM exits: every hold ends as a stopped query's would. A round that renews locks against a slow
   * broker may hold the watcher for a while: after `waitMs` the holds are left to their sessions' end.
   */
  def endAll(waitMs: Long = 5000L): Unit =
    if (acting.tryLock(waitMs, TimeUnit.MILLISECONDS))
      try holds.asScala.toList.foreach(endAtStop(_, "the JVM is exiting"))
      finally acting.unlock()
    else logWarning(s"kafka-share: the commit watcher was busy for $waitMs ms as the JVM exits; its ${holds.size} held " +
      "batch(es) go back to the group when their consumers' sessions expire")

  private def whileActing[T](body: => T): T = {
    acting.lock()
    try body
    finally acting.unlock()
  }

  private def endAtStop(hold: Hold, why: String): Unit = Uninterrupted {
    try {
      val committed = CheckpointStore.of(hold.commitFile, hold.conf.value).exists(hold.commitFile)
      if (committed) applyDecisions(hold) else stopped(hold, why)
    } catch {
      case NonFatal(e) =>
        logWarning(s"kafka-share: ending the hold of ${hold.commitFile} as $why failed; closing its consumer", e)
        if (holds.remove(hold)) pool.discard(hold.consumer)
    }
  }

  private def check(hold: Hold): Unit =
    try {
      val committed = CheckpointStore.of(hold.commitFile, hold.conf.value).exists(hold.commitFile)
      val now       = clock.nanoTime()
      val explicit  = hold.explicit.nonEmpty
      AcknowledgementPlan.atCheck(
        committed,
        late = now > hold.deadlineNanos,
        stopped = !committed && queryStopped(hold, now),
        renewable = hold.renewal.nonEmpty,
        explicit
      ) match {
        case AtCheck.Wait           => ()
        case AtCheck.ApplyDecisions => applyDecisions(hold)
        case AtCheck.QueryStopped   => stopped(hold, "the query stopped")
        case AtCheck.Renew          => if (!renew(hold)) giveUp(hold, AcknowledgementPlan.renewalFailed(explicit))
        case giving: AtCheck.GiveUp => giveUp(hold, giving)
      }
    } catch {
      case NonFatal(e) => logWarning(s"checking ${hold.commitFile} failed; will retry", e)
    }

  private def applyDecisions(hold: Hold): Unit = {
    // The decisions are read before the hold is let go: if that read fails, the next check retries.
    val decide = hold.explicit.map(decider).getOrElse((_: (String, Int, Long)) => Decision.Accept)
    if (holds.remove(hold)) {
      acknowledge(hold, decide, keep = true)
      markDone(hold)
    }
  }

  /** The query stopped before the batch committed: [[AcknowledgementPlan.atStop]], then the consumer is closed. */
  private def stopped(hold: Hold, why: String): Unit = {
    val explicit = hold.explicit
    // Stored decisions that cannot be read count as none: RELEASE, the group delivers the records again.
    def stored =
      explicit.flatMap(e =>
        try e.log.decisions(e.batch)
        catch { case NonFatal(err) => logWarning(s"kafka-share: reading batch ${e.batch}'s decisions failed; RELEASEing", err); None }
      )
    val decide = AcknowledgementPlan.atStop(explicit.nonEmpty, stored)
    if (holds.remove(hold)) {
      val what = if (explicit.isEmpty) "RELEASEing" else "applying the decisions stored for them, RELEASEing the rest of"
      logInfo(s"kafka-share: batch commit ${hold.commitFile} did not come: $why; $what its ${hold.consumer.holding} " +
        "held records now for the group's next reader (a run of this checkpoint replays the batch), and closing their consumer")
      acknowledge(hold, decide, keep = false, commitTimeoutMs = StopCommitTimeoutMs)
      markDone(hold)
    }
  }

  private def giveUp(hold: Hold, giving: AtCheck.GiveUp): Unit = if (holds.remove(hold)) {
    logWarning(
      s"batch commit ${hold.commitFile}: ${giving.why}; ${giving.instead.name.toUpperCase}ing its ${hold.consumer.holding} held records now."
    )
    acknowledge(hold, _ => giving.instead, keep = giving.poolConsumer)
    markDone(hold)
  }

  /**
   * Whether the query of a hold stopped (its `stopped` marker), looked up once a second per query: a
   * stopped query's held records go back at once, and its consumers leave the group. A look-up that fails
   * counts as not stopped (the hold goes on; the next look-up asks again).
   */
  private def queryStopped(hold: Hold, now: Long): Boolean = {
    val known = stopLookups.get(hold.query).filter { case (at, _) => now - at < StopCheckNanos }
    known.map(_._2).getOrElse {
      val stopped =
        try hold.done.markers.stopped
        catch { case NonFatal(_) => false }
      stopLookups(hold.query) = (now, stopped)
      stopped
    }
  }

  /**
   * Renews the locks of a hold whose commit has not come and holds it for another half lock. Failed when
   * the broker refused a partition's renewal (the records of such a partition are no longer this
   * consumer's to acknowledge) or the renewal did not complete: false.
   */
  private def renew(hold: Hold): Boolean = {
    val renewal = hold.renewal.get
    val refused =
      try hold.consumer.renewHeld(renewal.commitTimeoutMs, renewal.pollBackMs)
      catch { case NonFatal(e) => Seq(("-", -1, e)) }
    if (refused.nonEmpty) {
      refused.foreach { case (t, p, e) =>
        logWarning(s"kafka-share: renewing the locks of ${hold.commitFile.getName}'s held records of $t-$p failed " +
          s"(${e.getMessage}); their locks run out within a lock duration")
      }
      false
    } else {
      if (hold.renewals == 0)
        logInfo(s"kafka-share: batch commit ${hold.commitFile} is not there yet; renewing the locks of its " +
          s"${hold.consumer.holding} held records every ${renewal.everyMs} ms until it is")
      if (holds.remove(hold)) holds.add(hold.copy(
        deadlineNanos = clock.nanoTime() + TimeUnit.MILLISECONDS.toNanos(renewal.everyMs),
        renewals = hold.renewals + 1
      ))
      true
    }
  }

  // After phase 2, whether the broker took it or not: the driver waits for it, not for success.
  private def markDone(hold: Hold): Unit =
    try hold.done.markers.markAcknowledged(hold.done.batch, hold.done.task)
    catch { case NonFatal(e) => logWarning(s"could not mark batch ${hold.done.batch} task ${hold.done.task} acknowledged", e) }

  private def decider(explicit: ExplicitDecisions): ((String, Int, Long)) => Decision = {
    val decided = explicit.log.decisions(explicit.batch).getOrElse(Map.empty)
    AcknowledgementPlan.decisionOf(decided, explicit.default)
  }

  private def acknowledge(
      hold: Hold,
      decide: ((String, Int, Long)) => Decision,
      keep: Boolean,
      commitTimeoutMs: Long = 30000L
  ): Unit = {
    val consumer = hold.consumer
    try {
      val (made, refused) = consumer.decideHeld(decide, commitTimeoutMs)
      refused.foreach { case (t, p, e) =>
        logWarning(s"the broker refused the acknowledgements of ${hold.commitFile.getName}'s held records of $t-$p " +
          s"(${e.getMessage}): their locks ran out first; they will be delivered again and, pinned, dropped by this query")
      }
      val c = counts.computeIfAbsent(consumer.key, _ => new Counters)
      c.accepted.addAndGet(made.getOrElse(Decision.Accept, 0).toLong)
      c.released.addAndGet(made.getOrElse(Decision.Release, 0).toLong)
      c.rejected.addAndGet(made.getOrElse(Decision.Reject, 0).toLong)
      if (keep) pool.giveBack(consumer) else pool.discard(consumer)
    } catch {
      case NonFatal(e) =>
        // The records are pinned: if the broker did not take the acknowledgement, they come back and
        // the exactly-once strategies drop them; otherwise they are emitted again (at least once).
        logWarning("acknowledging a held batch failed; its records will be delivered again", e)
        pool.discard(consumer)
    }
  }
}

object CommitWatcher {

  /** Held records' locks are renewed (RENEW) as [[LockBudget]] times it. */
  final case class Renewal(locks: LockBudget) {
    def everyMs: Long         = locks.renewEveryMs
    def commitTimeoutMs: Long = locks.renewalCommitTimeoutMs
    def pollBackMs: Long      = locks.renewalPollBackMs
  }

  private val StopCheckNanos = TimeUnit.SECONDS.toNanos(1)

  // A stop acknowledges against the broker it has: one that does not answer must not hold the stop for long.
  private val StopCommitTimeoutMs = 5000L

  /** What an explicit-mode hold applies at commit. */
  final case class ExplicitDecisions(log: DecisionLog, batch: Long, default: Decision)

  /** Where phase 2 of task `task` of `batch` is said to be done (the driver waits for it at the end). */
  final case class DoneMark(markers: SourceMarkers, batch: Long, task: Int)

  /** Acknowledgements made here, per query (consumer key), that no read task of it has reported yet. */
  final case class Counts(accepted: Long, released: Long, rejected: Long)
}
