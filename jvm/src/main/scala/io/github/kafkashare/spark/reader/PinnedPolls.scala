package io.github.kafkashare.spark.reader

import scala.collection.mutable
import scala.util.control.NonFatal

import io.github.kafkashare.spark.ack.CommitWatcher
import io.github.kafkashare.spark.consumer.{PooledShareConsumer, ShareConsumerPool}
import io.github.kafkashare.spark.errors.ShareSourceErrors
import io.github.kafkashare.spark.metrics.{ShareSourceMetrics => Metrics, TaskCounters}
import io.github.kafkashare.spark.offsets.{AcquisitionEntry, TopicPartitionRanges}
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
  private var part     = 0
  private var emitted  = 0L
  private var ownParts = TopicPartitionRanges.empty
  private var current  = Iterator.empty[(Record, Int)]

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
      val pollStart = System.nanoTime
      val timeoutMs = if (part == 0 && emitted == 0) partition.pollTimeoutMs else math.max(1L, math.min(LaterPollTimeoutMs, budgetLeftMs))
      val poll      = consumer.poll(partition.topics, timeoutMs)
      polls += 1; pollNanos += System.nanoTime - pollStart
      val polledAt = poll.acquiredAtNanos
      if (!poll.fromCarry) counters.add(Metrics.Acquired, poll.records.size)
      // The poll's highest delivery count: below the limits (the usual case), no record needs a look for them.
      val maxCount = poll.records.iterator.map(PooledShareConsumer.deliveryCountOf).maxOption.getOrElse(0)
      counters.add(Metrics.MaxDeliveryCount, maxCount)
      val someOnLastAttempt = maxCount >= partition.deliveryLimit
      if (!poll.fromCarry && someOnLastAttempt) noteLastAttempts(poll.records)

      val polled = if (lockAgeMs(polledAt) <= pinnableLockAgeMs) poll.records
      else {
        val (lastAttempt, giveBack) = poll.records.partition(onLastAttempt)
        logWarning(s"kafka-share: batch ${partition.batch} task ${partition.task}: ${giveBack.size} record(s) were " +
          s"acquired ${lockAgeMs(polledAt)} ms ago, too close to the end of their ${partition.lockDurationMs} ms lock to " +
          "pin (was this JVM paused?); giving them back to the group" +
          (if (lastAttempt.nonEmpty) s" (keeping ${lastAttempt.size} on their last delivery attempt)" else ""))
        consumer.acknowledge(giveBack, AcknowledgeType.RELEASE)
        counters.add(Metrics.Released, giveBack.size)
        lastAttempt
      }
      val (redelivered, unpinned) =
        if (partition.strategy.dropsRedeliveries) splitPinnedElsewhere(polled)
        else (Seq.empty[Record], polled)
      val (poison, fresh) = partition.poison match {
        case Some(policy) if maxCount > policy.maxDeliveries =>
          unpinned.partition(r => PooledShareConsumer.deliveryCountOf(r) > policy.maxDeliveries)
        case _ => (Seq.empty[Record], unpinned)
      }
      rejectPoison(poison)
      // A poll returns whole record batches, often more than this task's share of maxRecordsPerTrigger:
      // the rest stays acquired for the next task (PooledShareConsumer's carry), not RELEASEd. Records on
      // their last delivery attempt are never carried, even past the share: a carry that ages out or a
      // crash hands them back to the group, which archives them.
      val (lastChance, others) = if (someOnLastAttempt) fresh.partition(onLastAttempt) else (Seq.empty[Record], fresh)
      val (withinShare, overLimit) =
        others.splitAt((partition.maxRecords - emitted - lastChance.size).max(0L).min(Int.MaxValue).toInt)
      val keptAtFirstCheck = lastChance ++ withinShare
      consumer.acknowledge(redelivered, AcknowledgeType.ACCEPT)
      counters.add(Metrics.Dropped, redelivered.size)
      counters.add(Metrics.Accepted, redelivered.size)
      consumer.carry(overLimit, polledAt)
      // A small poll of redelivered records is no sign of a quiet stream: brokers after 4.1 (4.3 and 4.4
      // do) hand out records past half the delivery count limit in ever smaller batches, and those on
      // their last attempt one per fetch (to isolate a poison record), whatever the backlog behind them.
      // Polling once per task would then drain them at one record per task per batch.
      val throttled = maxCount > 1
      val pollAgain = !partition.holdUntilCommit && overLimit.isEmpty && emitted + keptAtFirstCheck.size < partition.maxRecords &&
        budgetLeftMs > 0 && (poll.fromCarry || poll.records.size * 2 >= consumer.maxPollRecords || throttled)

      if (keptAtFirstCheck.isEmpty && (pollAgain || part > 0)) {
        // Nothing to pin from this poll. Part 0 is written, even empty, only when the task ends, so
        // that a retry replays the same (empty) task instead of polling anew.
        if (pollAgain) consumer.send() else finish(polledAt)
        return Iterator.empty
      }
      val kept = if (lockAgeMs(polledAt) <= pinnableLockAgeMs) keptAtFirstCheck
      else {
        // The steps since the first check (sibling reads, a dead-letter send, a slow file system)
        // spent the lock: another member may hold these records by now. Give them back, but for those
        // on their last attempt (see above).
        val (lastAttempt, giveBack) = keptAtFirstCheck.partition(onLastAttempt)
        logWarning(s"kafka-share: batch ${partition.batch} task ${partition.task}: ${giveBack.size} record(s) acquired " +
          s"${lockAgeMs(polledAt)} ms ago are too close to the end of their ${partition.lockDurationMs} ms lock to pin " +
          "after the checks before pinning; giving them back to the group")
        consumer.acknowledge(giveBack, AcknowledgeType.RELEASE)
        counters.add(Metrics.Released, giveBack.size)
        lastAttempt
      }
      if (kept.isEmpty && keptAtFirstCheck.nonEmpty) {
        finish(polledAt)
        return Iterator.empty
      }
      val pinStart       = System.nanoTime
      val ordered        = inReplayOrder(kept)
      val entry          = AcquisitionEntry.of(ordered.map(r => (r.topic, r.partition, r.offset, PooledShareConsumer.deliveryCountOf(r))))
      val (winner, ours) = partition.log.writeIfAbsent(partition.batch, partition.task, entry, part)
      pinNanos += System.nanoTime - pinStart
      pinned = ours
      if (!ours) {
        // Another attempt pinned part 0 first, or a retry sealed the task: their parts are the task's.
        // This attempt is usually a zombie on an executor the driver gave up: carried, its records would
        // wait for a borrower that never comes, so they go back now.
        consumer.acknowledge(kept, AcknowledgeType.RELEASE)
        counters.add(Metrics.Released, kept.size)
        finish(polledAt)
        if (part == 0) replay()
        else {
          logInfo(s"kafka-share: batch ${partition.batch} task ${partition.task}: another attempt ended this task " +
            s"after part ${part - 1} (${if (winner.runs.isEmpty) "sealed" else "unexpected entry"}); stopping")
          Iterator.empty
        }
      } else if (partition.holdUntilCommit && kept.nonEmpty) {
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
      } else {
        val ackStart = System.nanoTime
        consumer.acknowledge(kept, AcknowledgeType.ACCEPT)
        ackNanos += System.nanoTime - ackStart
        lastReturn = System.nanoTime
        counters.add(Metrics.Accepted, kept.size)
        ownParts = ownParts.union(entry.offsets)
        emitted += kept.size
        part += 1
        if (pollAgain && kept.nonEmpty) consumer.send() else finish(polledAt)
        withCounts(ordered)
      }
    } catch {
      case NonFatal(e) =>
        val failed = consumer
        consumer = null
        if (failed != null) {
          if (!pinned) {
            counters.add(Metrics.Released, failed.holding)
            try { failed.releaseHeld(); ShareConsumerPool.giveBack(failed) }
            catch { case NonFatal(_) => ShareConsumerPool.discard(failed) }
          } else {
            // Pinned: the retry replays these records; accept them so nobody else gets them.
            try { failed.acceptHeld(); ShareConsumerPool.giveBack(failed) }
            catch { case NonFatal(_) => ShareConsumerPool.discard(failed) }
          }
        }
        throw e
    }
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

  /**
   * Splits a poll into the records pinned already, to an earlier batch (the pinned set), to a sibling
   * task of this batch, or to an earlier part of this task, and the others. Not only redeliveries
   * (delivery count above 1) are looked up: on Kafka 4.1 a record released by a departing member comes
   * back with delivery count 1. The siblings' parts are listed once per poll, and each part is read
   * once (a part never changes after it is written). Records are looked up one by one only in the
   * partitions where the poll's offsets reach into a pinned range: a backlog's polls are new offsets,
   * and a lookup per record was a tenth of a read task's CPU (docs/performance.md).
   */
  private def splitPinnedElsewhere(records: Seq[Record]): (Seq[Record], Seq[Record]) =
    if (records.isEmpty) (Seq.empty, records)
    else {
      refreshSiblings()
      val pins    = Seq(partition.pinned, ownParts, siblingsPinned)
      val suspect = partitionsReachingPins(records, pins)
      if (suspect.isEmpty) (Seq.empty, records)
      else records.partition(r => suspect((r.topic, r.partition)) && pins.exists(_.contains(r.topic, r.partition, r.offset)))
    }

  /** The partitions whose offsets in `records` (from lowest to highest) overlap a pinned range. */
  private def partitionsReachingPins(records: Seq[Record], pins: Seq[TopicPartitionRanges]): Set[(String, Int)] = {
    val found           = mutable.Set.empty[(String, Int)]
    var topic: String   = null
    var kafkaPartition  = -1
    var lowest, highest = 0L
    def check(): Unit =
      if (
        topic != null && !found((topic, kafkaPartition)) &&
        pins.exists(_.overlaps(topic, kafkaPartition, lowest, highest))
      ) found += ((topic, kafkaPartition))
    // A poll's records come partition after partition: one span per run of a partition.
    records.foreach { r =>
      if (r.partition != kafkaPartition || r.topic != topic) {
        check(); topic = r.topic; kafkaPartition = r.partition; lowest = r.offset; highest = r.offset
      } else { lowest = math.min(lowest, r.offset); highest = math.max(highest, r.offset) }
    }
    check()
    found.toSet
  }

  private val siblingPartsRead = mutable.Set.empty[(Int, Int)]
  private var siblingsPinned   = TopicPartitionRanges.empty

  private def refreshSiblings(): Unit =
    partition.log.partNames(partition.batch).filter(n => n._1 != partition.task && !siblingPartsRead(n)).foreach {
      case name @ (t, p) =>
        partition.log.read(partition.batch, t, p).foreach(e => siblingsPinned = siblingsPinned.union(e.offsets))
        siblingPartsRead += name
    }
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
