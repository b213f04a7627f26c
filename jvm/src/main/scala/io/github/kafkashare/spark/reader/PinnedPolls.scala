package io.github.kafkashare.spark.reader

import scala.util.control.NonFatal

import io.github.kafkashare.spark.ack.CommitWatcher
import io.github.kafkashare.spark.consumer.{PooledShareConsumer, ShareConsumerPool}
import io.github.kafkashare.spark.errors.ShareSourceErrors
import io.github.kafkashare.spark.metrics.{ShareSourceMetrics => Metrics, TaskCounters}
import io.github.kafkashare.spark.offsets.AcquisitionEntry
import org.apache.hadoop.fs.Path
import org.apache.kafka.clients.consumer.AcknowledgeType
import org.apache.spark.internal.Logging

/**
 * The records a fresh attempt of a read task acquires, one part per poll. For each poll, in the
 * order the delivery contract needs:
 *  1. poll (the first waits up to kafka.share.poll.timeout.ms for records, later ones briefly);
 *  2. give back records whose locks are too far spent to pin (a pause came between the fetch and
 *     now: another member may have them already); drop redeliveries of records pinned to an earlier
 *     batch, to a sibling task of this batch or to an earlier part of this task (exactly-once
 *     strategies); reject poison records;
 *  3. pin what is left: write it as the task's next part in the acquisition log (atomic,
 *     create-if-absent);
 *  4. only then acknowledge: ACCEPT (sent at once, without waiting for the answer), or, for two-phase
 *     commit and explicit mode, hand the consumer to the commit watcher, which ACCEPTs (or applies the
 *     decisions) once Spark's commit log has the batch;
 *  5. yield the part's records, by topic, partition and offset: the order a replay of the part has.
 * It polls again while the task is within kafka.share.read.duration.ms and the last poll suggests a
 * backlog (at least half of max.poll.records, or redeliveries, which brokers hand out few at a time):
 * a batch then pays Spark's per-batch cost once for
 * many polls' records, while a quiet stream's tasks still end after one poll. A consumer that holds
 * records until the commit cannot poll again (Kafka wants every record of a poll acknowledged first),
 * so those tasks poll once.
 * A failure before a part is pinned RELEASEs what that poll acquired. After, nothing is RELEASEd: the
 * records belong to this batch, and a retry replays them.
 *
 * A record on its last delivery attempt (delivered share.delivery.count.limit times) is never given
 * back for its lock's age: back with the group it would be archived, lost. Pinning it is safe even if
 * its lock ran out meanwhile, for the same reason: the broker archives it and gives it to nobody else,
 * so no other member can emit it too. Each such record is counted (metric recordsAtLastDelivery).
 *
 * @param replay what to yield when another attempt of this task pinned part 0 first: its records
 */
private[reader] final class PinnedPolls(
    partition: KafkaShareInputPartition,
    counters: TaskCounters,
    replay: () => Iterator[(PooledShareConsumer.Record, Int)]
) extends Iterator[(PooledShareConsumer.Record, Int)] with Logging {
  import PinnedPolls._

  private type Record = PooledShareConsumer.Record

  private val startedAt = System.nanoTime
  // Borrowed until the task's last part is acknowledged; then null (back in the pool, or held).
  private var consumer: PooledShareConsumer = ShareConsumerPool.borrow(partition.consumerKey)
  ShareConsumerPool.watch(partition.consumerKey, partition.markers)
  consumer.lastDeliveryAttempt = partition.deliveryLimit
  if (consumer.newlyCreated) counters.add(Metrics.ConsumersCreated, 1)
  private var part            = 0
  private var emitted         = 0L
  private val pinnedElsewhere = new PinnedElsewhere(partition)
  private var current         = Iterator.empty[(Record, Int)]

  override def hasNext: Boolean = {
    while (!current.hasNext && consumer != null) current = nextPart()
    current.hasNext
  }

  override def next(): (Record, Int) = if (hasNext) current.next() else Iterator.empty.next()

  /** The task ends before its last part (Spark stopped reading, or a failure downstream). */
  def close(): Unit = if (consumer != null) {
    try finish(System.nanoTime)
    catch {
      case NonFatal(e) =>
        logWarning("kafka-share: ending a read task failed; closing its consumer", e)
        val failed = consumer
        consumer = null
        if (failed != null) ShareConsumerPool.discard(failed)
    }
  }

  // Where the task's time went (logged at DEBUG when it ends): polling, pinning, acknowledging, and
  // outside, in Spark, between returning a part and asking for the next one.
  private var pollNanos, pinNanos, ackNanos, outsideNanos = 0L
  private var polls                                       = 0
  private var lastReturn                                  = 0L

  private def nextPart(): Iterator[(Record, Int)] = {
    var pinned = false
    if (lastReturn != 0) outsideNanos += System.nanoTime - lastReturn
    try {
      val poll     = pollOnce()
      val polledAt = poll.acquiredAtNanos
      val plan     = classify(poll)
      if (plan.keep.isEmpty && (plan.pollAgain || part > 0)) {
        // Nothing to pin from this poll. Part 0 is written, even empty, only when the task ends, so
        // that a retry replays the same (empty) task instead of polling anew.
        if (plan.pollAgain) consumer.send() else finish(polledAt)
        return Iterator.empty
      }
      val kept = recheckLocks(plan.keep, polledAt)
      if (kept.isEmpty && plan.keep.nonEmpty) {
        finish(polledAt)
        return Iterator.empty
      }
      val pinStart       = System.nanoTime
      val ordered        = inReplayOrder(kept)
      val entry          = AcquisitionEntry.of(ordered.map(r => (r.topic, r.partition, r.offset, PooledShareConsumer.deliveryCountOf(r))))
      val (winner, ours) = partition.log.writeIfAbsent(partition.batch, partition.task, entry, part)
      pinNanos += System.nanoTime - pinStart
      pinned = ours
      if (!ours) partTakenByAnother(kept, winner, polledAt)
      else if (partition.holdUntilCommit && kept.nonEmpty) holdUntilCommit(ordered, polledAt)
      else acceptPart(ordered, entry, plan.pollAgain, polledAt)
    } catch {
      case NonFatal(e) =>
        abandon(pinned)
        throw e
    }
  }

  private def pollOnce(): PooledShareConsumer.Polled = {
    val pollStart = System.nanoTime
    val timeoutMs = if (part == 0 && emitted == 0) partition.pollTimeoutMs else math.max(1L, math.min(LaterPollTimeoutMs, budgetLeftMs))
    val poll      = consumer.poll(partition.topics, timeoutMs)
    polls += 1; pollNanos += System.nanoTime - pollStart
    if (!poll.fromCarry) counters.add(Metrics.Acquired, poll.records.size)
    poll
  }

  /** Decides what becomes of each record of the poll (PollClassification) and acknowledges all but those to pin. */
  private def classify(poll: PooledShareConsumer.Polled): PollClassification.Plan[Record] = {
    val polledAt = poll.acquiredAtNanos
    val plan = PollClassification.plan[Record](
      poll.records,
      PooledShareConsumer.deliveryCountOf,
      lockSpent = lockAgeMs(polledAt) > pinnableLockAgeMs,
      fromCarry = poll.fromCarry,
      limits,
      budgetLeft = () => budgetLeftMs > 0,
      pinnedElsewhere = pinnedElsewhere.split
    )
    counters.add(Metrics.MaxDeliveryCount, plan.maxCount)
    if (!poll.fromCarry && plan.someOnLastAttempt(partition.deliveryLimit)) noteLastAttempts(poll.records)
    giveBackSpent(plan.spent, polledAt, "(was this JVM paused?)")
    rejectPoison(plan.poison)
    consumer.acknowledge(plan.redelivered, AcknowledgeType.ACCEPT)
    counters.add(Metrics.Dropped, plan.redelivered.size)
    counters.add(Metrics.Accepted, plan.redelivered.size)
    consumer.carry(plan.carry, polledAt)
    plan
  }

  /**
   * The steps since the poll was classified (sibling reads, a dead-letter send, a slow file system) may
   * have spent the lock: another member may hold these records by now. Gives those back.
   */
  private def recheckLocks(keep: Seq[Record], polledAt: Long): Seq[Record] =
    if (lockAgeMs(polledAt) <= pinnableLockAgeMs) keep
    else {
      val (lastAttempt, giveBack) = PollClassification.pinnableWhenSpent(keep, PooledShareConsumer.deliveryCountOf, partition.deliveryLimit)
      giveBackSpent(giveBack, polledAt, "after the checks before pinning")
      lastAttempt
    }

  /**
   * Another attempt pinned part 0 first, or a retry sealed the task: their parts are the task's. This
   * attempt is usually a zombie on an executor the driver gave up: carried, its records would wait for
   * a borrower that never comes, so they go back now.
   */
  private def partTakenByAnother(kept: Seq[Record], winner: AcquisitionEntry, polledAt: Long): Iterator[(Record, Int)] = {
    consumer.acknowledge(kept, AcknowledgeType.RELEASE)
    counters.add(Metrics.Released, kept.size)
    finish(polledAt)
    if (part == 0) replay()
    else {
      logInfo(s"kafka-share: batch ${partition.batch} task ${partition.task}: another attempt ended this task " +
        s"after part ${part - 1} (${if (winner.runs.isEmpty) "sealed" else "unexpected entry"}); stopping")
      Iterator.empty
    }
  }

  /** Two-phase-commit and explicit mode: the consumer goes to the commit watcher with the records held. */
  private def holdUntilCommit(ordered: Seq[Record], polledAt: Long): Iterator[(Record, Int)] = {
    consumer.commit() // the dropped and poison records; the kept ones stay held
    counters.add(Metrics.LockUsedPercent, lockUsedPercent(polledAt))
    // The locks started at the fetch, which for a carry or the client's buffer was some time ago.
    val renewal    = if (partition.renewLocks) Some(CommitWatcher.Renewal(partition.lockDurationMs)) else None
    val lockLeftMs = renewal.fold((partition.lockDurationMs * 0.8).toLong)(_.everyMs) - lockAgeMs(polledAt)
    CommitWatcher.holdUntilCommitted(
      consumer,
      new Path(partition.commitFile),
      partition.hadoopConf,
      math.max(lockLeftMs, 0L),
      renewal,
      partition.explicitDefault.map(CommitWatcher.ExplicitDecisions(partition.decisions, partition.batch, _)),
      CommitWatcher.DoneMark(partition.markers, partition.batch, partition.task)
    )
    consumer = null
    withCounts(ordered)
  }

  /** The part is pinned: ACCEPT it (sent without waiting), then poll again or end the task. */
  private def acceptPart(ordered: Seq[Record], entry: AcquisitionEntry, pollAgain: Boolean, polledAt: Long): Iterator[(Record, Int)] = {
    val ackStart = System.nanoTime
    consumer.acknowledge(ordered, AcknowledgeType.ACCEPT)
    ackNanos += System.nanoTime - ackStart
    lastReturn = System.nanoTime
    counters.add(Metrics.Accepted, ordered.size)
    pinnedElsewhere.addOwnPart(entry)
    emitted += ordered.size
    part += 1
    if (pollAgain && ordered.nonEmpty) consumer.send() else finish(polledAt)
    withCounts(ordered)
  }

  /**
   * A failure: before the part was pinned, RELEASE what the consumer holds (nobody will emit it);
   * after, ACCEPT it: the records belong to this batch, and a retry replays them.
   */
  private def abandon(pinned: Boolean): Unit = {
    val failed = consumer
    consumer = null
    if (failed != null) {
      if (!pinned) counters.add(Metrics.Released, failed.holding)
      try {
        if (pinned) failed.acceptHeld() else failed.releaseHeld()
        ShareConsumerPool.giveBack(failed)
      } catch { case NonFatal(_) => ShareConsumerPool.discard(failed) }
    }
  }

  private def limits = PollClassification.Limits(
    deliveryLimit = partition.deliveryLimit,
    maxDeliveries = partition.poison.map(_.maxDeliveries),
    dropsRedeliveries = partition.strategy.dropsRedeliveries,
    shareLeft = partition.maxRecords - emitted,
    holdUntilCommit = partition.holdUntilCommit,
    maxPollRecords = consumer.maxPollRecords
  )

  /** RELEASEs records whose locks are too far spent to pin (those on their last attempt are kept by the caller). */
  private def giveBackSpent(records: Seq[Record], polledAt: Long, when: String): Unit = if (records.nonEmpty) {
    logWarning(s"kafka-share: batch ${partition.batch} task ${partition.task}: ${records.size} record(s) acquired " +
      s"${lockAgeMs(polledAt)} ms ago are too close to the end of their ${partition.lockDurationMs} ms lock to pin " +
      s"$when; giving them back to the group (those on their last delivery attempt are kept)")
    consumer.acknowledge(records, AcknowledgeType.RELEASE)
    counters.add(Metrics.Released, records.size)
  }

  /**
   * Records delivered more than kafka.share.maxDeliveries times: to the dead-letter topic (confirmed),
   * then REJECTed, never emitted. The REJECT goes out with the task's next acknowledgements.
   */
  private def rejectPoison(poison: Seq[Record]): Unit = if (poison.nonEmpty) {
    val policy = partition.poison.get
    policy.deadLetterTopic.foreach(DeadLetters.send(poison, _, partition.consumerKey.groupId, partition.consumerKey.params))
    consumer.acknowledge(poison, AcknowledgeType.REJECT)
    counters.add(Metrics.Rejected, poison.size)
    logWarning(s"kafka-share: ${poison.size} record(s) delivered more than ${policy.maxDeliveries} times rejected" +
      policy.deadLetterTopic.fold("")(t => s" after writing them to '$t'") + ": " +
      poison.take(5).map(r => s"${r.topic}-${r.partition}@${r.offset}").mkString(", "))
  }

  // deliveryLimit is Int.MaxValue where no record is lost at the limit (a dead-letter topic) or the
  // limit is unknown: then no record is on its last attempt.
  private def onLastAttempt(r: Record): Boolean = PooledShareConsumer.deliveryCountOf(r) >= partition.deliveryLimit

  private def noteLastAttempts(records: Seq[Record]): Unit = {
    val last = records.count(onLastAttempt)
    if (last > 0) {
      counters.add(Metrics.AtLastDelivery, last)
      logWarning(s"kafka-share: batch ${partition.batch} task ${partition.task}: $last record(s) are on their last " +
        s"delivery attempt (delivered ${partition.deliveryLimit} times, the group's limit): ${ShareSourceErrors.LastAttemptAdvice}")
    }
  }

  private def inReplayOrder(records: Seq[Record]): Seq[Record] = records.sorted(ReplayOrder)

  private def withCounts(records: Seq[Record]): Iterator[(Record, Int)] =
    records.iterator.map(r => r -> PooledShareConsumer.deliveryCountOf(r))

  /** Sends the last acknowledgements, waiting for the answer, and gives the consumer back. */
  private def finish(polledAt: Long): Unit = {
    // make bench-profile (tests/bench/profile_read.py) reads this line: keep the two in step.
    logDebug(s"kafka-share: batch ${partition.batch} task ${partition.task}: $polls polls, $emitted records in " +
      s"${(System.nanoTime - startedAt) / 1000000} ms: polling ${pollNanos / 1000000} ms, pinning ${pinNanos / 1000000} ms, " +
      s"acknowledging ${ackNanos / 1000000} ms, in Spark ${outsideNanos / 1000000} ms")
    if (part == 0 && emitted == 0) {
      // The task ends with nothing: an empty part 0 makes every later attempt replay nothing. Losing
      // the race is harmless here: the caller's replay path reads the winner.
      partition.log.writeIfAbsent(partition.batch, partition.task, AcquisitionEntry.empty)
    }
    // Until it is back in the pool the consumer stays ours: if the commit fails, the caller's error
    // handling RELEASEs or ACCEPTs what it holds.
    val refused = consumer.commit()
    refused.foreach { case (t, p, e) =>
      logWarning(s"the broker refused acknowledgements for $t-$p (${e.getMessage}); pinned records will be " +
        "redelivered and, with an exactly-once strategy, dropped")
    }
    counters.add(Metrics.LockUsedPercent, lockUsedPercent(polledAt))
    val done = consumer
    consumer = null
    ShareConsumerPool.giveBack(done)
  }

  private def budgetLeftMs: Long = partition.readDurationMs - (System.nanoTime - startedAt) / 1000000L

  private def lockUsedPercent(polledAt: Long): Long = lockAgeMs(polledAt) * 100 / partition.lockDurationMs

  private def lockAgeMs(acquiredAt: Long): Long = (System.nanoTime - acquiredAt) / 1000000L

  /**
   * The oldest acquisition this task still pins. Acknowledging right away needs little of the lock;
   * holding until the batch commits needs the rest of the batch, and the commit watcher ACCEPTs at 80%.
   */
  private def pinnableLockAgeMs: Long =
    (partition.lockDurationMs * (if (partition.holdUntilCommit) 0.6 else 0.8)).toLong

}

private object PinnedPolls {

  /** How long a poll after the first waits: a backlog answers at once, and an empty wait ends the task. */
  val LaterPollTimeoutMs = 200L

  /** The order a part's records are emitted and replayed in (the acquisition log's). */
  private object ReplayOrder extends Ordering[PooledShareConsumer.Record] {
    def compare(a: PooledShareConsumer.Record, b: PooledShareConsumer.Record): Int =
      AcquisitionEntry.compareRecords(a.topic, a.partition, a.offset, b.topic, b.partition, b.offset)
  }
}
