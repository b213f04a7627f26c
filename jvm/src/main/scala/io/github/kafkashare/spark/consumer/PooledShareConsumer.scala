package io.github.kafkashare.spark.consumer

import java.time.Duration
import java.util.Properties

import scala.jdk.CollectionConverters._

import io.github.kafkashare.spark.monitoring.JvmActivity
import io.github.kafkashare.spark.options.{Decision, LockBudget}
import org.apache.kafka.clients.consumer.{AcknowledgeType, ConsumerRecord, KafkaShareConsumer, ShareConsumer}
import org.apache.kafka.common.serialization.ByteArrayDeserializer

/**
 * One Kafka share consumer in explicit acknowledgement mode, with what it holds.
 *
 * The rules it keeps (Kafka's, and the delivery contract's):
 *  - one thread at a time: the pool hands it to one task, or to the commit watcher, never both;
 *  - every record of a poll is acknowledged before the next poll (explicit mode demands it);
 *  - only this consumer acknowledges what it acquired, so it goes back to the pool holding nothing
 *    but its carry (below).
 *
 * The carry: a poll returns whole record batches, often more than a task's share of
 * maxRecordsPerTrigger. RELEASEing the rest would spend one of each record's delivery attempts
 * (share.delivery.count.limit) for nothing, and a small limit would archive records unread. So the
 * rest is carried: still acquired, unacknowledged, and the next task that borrows this consumer
 * takes it instead of polling. The pool RELEASEs a carry that has aged past half a lock duration
 * ([[releaseCarry]]), and keeps the consumer.
 *
 * The client's own buffer: one ShareFetch response can hold more than `max.poll.records` (several
 * partitions, whole record batches), and the client returns the rest from its buffer at the next
 * poll, without asking the broker. Those records were acquired when the response came, which can be
 * long before that next poll: the consumer may have been held for a two-phase commit, or idle in the
 * pool, meanwhile. So [[poll]] reports for its records the earliest moment they can have been
 * acquired. Kafka's client asks for more only when a poll finds its buffer empty, and then goes on
 * fetching until a response brings records (also while the consumer waits in the pool: the pool collects
 * those, see [[collectFetchedWhileIdle]]). So a poll that returned fewer than `max.poll.records` left
 * nothing behind (with one leader broker per consumer's partitions; a second leader's response can
 * still come), and a poll during which no fetch response came (the client's `fetch-total` metric)
 * returned buffered records.
 *
 * @param open makes the client from its settings: Kafka's share consumer, or in unit tests Kafka's
 *             `MockShareConsumer` (PooledShareConsumerSuite)
 */
final class PooledShareConsumer(val key: ConsumerKey, open: Properties => ShareConsumer[Array[Byte], Array[Byte]]) {
  import PooledShareConsumer.Record

  def this(key: ConsumerKey) = this(key, PooledShareConsumer.kafkaClient)

  private val consumer = {
    val props = new Properties
    key.params.foreach { case (k, v) => props.put(k, v) }
    props.put("group.id", key.groupId)
    props.put("share.acknowledgement.mode", "explicit")
    val opened = open(props)
    JvmActivity.consumerOpened()
    opened
  }
  // close() may come twice (a failed close, then the pool's drain): counted once.
  private val closed                  = new java.util.concurrent.atomic.AtomicBoolean(false)
  private var subscribed: Set[String] = Set.empty
  // Acquired and not yet acknowledged, by identity (a record is added and removed once per poll: an
  // identity map does both without allocating, which matters at hundreds of thousands a second).
  private val held = java.util.Collections.newSetFromMap(new java.util.IdentityHashMap[Record, java.lang.Boolean])
  // Acquired, not yet given to any batch, and when the poll that acquired them ran (System.nanoTime).
  // Volatile: the pool reads them (and may release the carry) while the consumer waits with it.
  @volatile private var carried      = Seq.empty[Record]
  @volatile private var carriedSince = 0L
  // When the carry's oldest records were first acquired: a renewal restarts their locks (carriedSince), not this.
  @volatile private var carriedFirstSince = 0L
  // When what the last poll returned was first acquired (a carry keeps its first date through renewals).
  private var polledFirstSince = 0L
  // The carry came from collectFetchedWhileIdle: no reader has seen (and counted) these records yet.
  @volatile private var carryFetchedWhileIdle = false

  /**
   * The delivery count at which a record is on its last attempt (the group's limit), as the last
   * borrower knew it; Int.MaxValue where none is lost at the limit. The pool never releases those.
   */
  @volatile var lastDeliveryAttempt: Int = Int.MaxValue

  /**
   * The batch of the read task that borrowed it last (-1: none said). The pool compares it with the batches
   * its query ran since: one that runs on without it must not keep what it carries locked away.
   */
  @volatile var lastBatch: Long = -1L

  def holding: Int = held.size

  def carrying: Int = carried.size

  /** How many times the pool handed it out: 1 for a consumer created for the borrowing task. */
  private[consumer] var borrows: Long = 0L
  def newlyCreated: Boolean           = borrows <= 1

  /** Out with a read task (ShareConsumerPool.borrow) until given back or discarded. */
  @volatile private[consumer] var lent = false

  /** Out with a commit watcher, which gives it back or discards it (ShareConsumerPool.expectBack). */
  @volatile private[consumer] var expectedBack = false

  /** When it last went back to the pool (System.nanoTime); the pool closes it after key.locks.idleCloseMs. */
  @volatile private[consumer] var idleSinceNanos: Long = System.nanoTime

  // Set while the client's buffer may hold acquired records that no poll returned yet (see above):
  // the earliest moment they can have been acquired. The polling thread writes it; the pool reads it.
  @volatile private var unreturnedSince: Option[Long] = None
  // Its last poll returned nothing, so its client goes on fetching until a response brings records.
  @volatile private var fetching = false
  val maxPollRecords: Int        = key.params.get("max.poll.records").flatMap(_.toIntOption).getOrElse(500)

  /**
   * Since when the oldest record it acquired and no batch took yet may have been locked: its carry, or
   * what its client's buffer may hold (the rest of a full poll, or a fetch that answered after an
   * empty one). None when it holds nothing. The pool hands out such consumers first.
   */
  def pendingSinceNanos: Option[Long] = (carriedSinceNanos.toList ++ unreturnedSince).minOption

  /** When its carry was acquired, if it has one (or when its locks were last renewed). */
  def carriedSinceNanos: Option[Long] = if (carried.nonEmpty) Some(carriedSince) else None

  /** When its carry's oldest records were first acquired, renewals or not, if it has a carry. */
  def carriedFirstSinceNanos: Option[Long] = if (carried.nonEmpty) Some(carriedFirstSince) else None

  /**
   * RELEASEs the carry (its locks are too far spent for a batch to pin it) and keeps the consumer, with
   * its membership and its client's buffer. Records on their last delivery attempt are kept: released,
   * the broker would archive them, while a batch still emits them (the reader pins those whatever their
   * lock's age), unless `keepLastAttempts` is false. The group gets every released one back for another
   * try. Returns how many it released.
   */
  def releaseCarry(keepLastAttempts: Boolean = true): Int = {
    // Only a carry collected while idle can hold records on their last attempt: those stay for a batch.
    val (lastAttempt, released) =
      carried.partition(r => keepLastAttempts && PooledShareConsumer.deliveryCountOf(r) >= lastDeliveryAttempt)
    if (released.nonEmpty) {
      released.foreach(consumer.acknowledge(_, AcknowledgeType.RELEASE))
      carried = lastAttempt
      if (carried.isEmpty) carryFetchedWhileIdle = false
      commit()
    }
    released.size
  }

  /** Whether its client is still fetching after a poll that returned nothing (see [[collectFetchedWhileIdle]]). */
  def stillFetching: Boolean = fetching

  /** Whether its client's buffer may hold acquired records no poll returned yet (the rest of a full poll). */
  def mayHoldBuffered: Boolean = unreturnedSince.nonEmpty

  /** Whether its carry came from [[collectFetchedWhileIdle]] and no task took it yet. */
  def carriesFetchedWhileIdle: Boolean = carryFetchedWhileIdle && carried.nonEmpty

  private var joined = false

  // After a joining consumer's first fetch answer, how long its poll still waits: a fetch round (the broker
  // holds a fetch without records up to fetch.max.wait.ms) and half a second, for the other brokers' answers.
  private val fetchRoundNanos =
    (key.params.get("fetch.max.wait.ms").flatMap(_.toLongOption).getOrElse(PooledShareConsumer.DefaultFetchMaxWaitMs) + 500L) * 1000000L

  /**
   * Polls until a poll returns records or `timeoutMs` passes. Empty polls are repeated because a
   * consumer that just joined gets nothing until the group has assigned it partitions, which
   * happens on a heartbeat (share.heartbeat.interval.ms, 5 s by default): its first poll waits for
   * that, up to [[PooledShareConsumer.JoinTimeoutMs]], and from the broker's first answer to a fetch
   * (the assignment came) no longer than `timeoutMs` in all, as later polls do. The records are held
   * until acknowledged. A carry, if any, is returned instead, without asking the broker.
   */
  def poll(topics: Seq[String], timeoutMs: Long, waitForJoin: Boolean = true): PooledShareConsumer.Polled = {
    require(held.isEmpty, s"poll while holding ${held.size} unacknowledged records")
    if (carried.nonEmpty) {
      val records = carried
      carried = Seq.empty
      records.foreach(held.add)
      // Records the pool collected while it waited are new to the reader: counted as acquired by it.
      val fromCarry = !carryFetchedWhileIdle
      carryFetchedWhileIdle = false
      polledFirstSince = carriedFirstSince
      return PooledShareConsumer.Polled(records, carriedSince, fromCarry)
    }
    if (topics.isEmpty) return PooledShareConsumer.Polled(Nil, System.nanoTime, fromCarry = false) // a pattern matching nothing
    if (topics.toSet != subscribed) { consumer.subscribe(topics.asJava); subscribed = topics.toSet }
    // Real time (waitForJoin false) keeps to the batch's end: a consumer that has not joined yet polls again.
    var joining         = !joined && waitForJoin
    val started         = System.nanoTime
    val ownWait         = started + timeoutMs * 1000000L
    val joinWait        = math.max(ownWait, started + PooledShareConsumer.JoinTimeoutMs * 1000000L)
    var deadline        = if (joining) joinWait else ownWait
    var records         = Seq.empty[Record]
    var lastCall        = System.nanoTime
    val responsesBefore = fetchResponses
    while (records.isEmpty && System.nanoTime < deadline) {
      val remainingMs = math.max(1L, (deadline - System.nanoTime) / 1000000L)
      lastCall = System.nanoTime
      records = consumer.poll(Duration.ofMillis(math.min(remainingMs, 500L))).asScala.toVector
      // The broker answered a fetch: the consumer has its partitions, and an empty answer means there is
      // nothing for it now, as for any member. Waiting the join time out would make an empty batch after
      // new consumers (a restart, consumers closed while idle) last 12 s where the poll timeout is 2.
      // One more fetch round first: with partitions on several brokers, the others answer a moment later.
      if (joining && fetchResponses > responsesBefore) {
        deadline = math.min(joinWait, math.max(ownWait, System.nanoTime + fetchRoundNanos))
        joining = false
      }
    }
    records.foreach(held.add)
    // After its first poll the consumer has its assignment (the broker answered, or the join time passed),
    // whether or not records came: the group's other members may hold them all. Waiting for the join again
    // would cost every later task of such a consumer up to 12 s for nothing.
    if (waitForJoin || records.nonEmpty) joined = true
    // Records that came with a response during this poll were acquired as the broker answered, during
    // the last call. Without a response they came from the client's buffer (the client fetches only
    // once its buffer is empty, and acknowledgements were all sent before this poll), as old as the
    // response that brought them.
    val fresh = lastCall - PooledShareConsumer.InFlightMarginNanos
    val acquiredAt = unreturnedSince match {
      case Some(since) if !(fetchResponses > responsesBefore) => since
      case _                                                  => fresh
    }
    fetching = records.isEmpty
    unreturnedSince =
      if (records.isEmpty) Some(System.nanoTime - PooledShareConsumer.InFlightMarginNanos) // a fetch may still answer
      else if (records.size >= maxPollRecords) Some(acquiredAt)                            // the rest may be buffered
      else None                                                                            // the buffer ran dry
    polledFirstSince = acquiredAt
    PooledShareConsumer.Polled(records, acquiredAt, fromCarry = false)
  }

  // ShareFetch (and ShareAcknowledge) responses the client has received: Kafka's `fetch-total` metric.
  private lazy val fetchResponseMetric = consumer.metrics().asScala.collectFirst {
    case (name, metric) if name.name == "fetch-total" && name.group == "consumer-share-fetch-manager-metrics" => metric
  }
  // NaN where the metric is missing: no poll then counts as having seen a response, which dates records older.
  private def fetchResponses: Double =
    fetchResponseMetric.map(_.metricValue).collect { case d: java.lang.Double => d.doubleValue }.getOrElse(Double.NaN)

  /**
   * Collects into the carry what the client fetched while the consumer waited in the pool, and
   * returns how many records that was. Why: after a poll that returned nothing, Kafka's client goes on
   * fetching until records come, so an idle consumer acquires records that no task polls: locked to it,
   * they would wait for their locks to expire (and be archived where that was their last delivery
   * attempt). Collected, the pool hands this consumer out first and asks the driver for a batch.
   * Only for a consumer that holds nothing (explicit mode polls only with everything acknowledged);
   * otherwise it collects nothing.
   */
  def collectFetchedWhileIdle(alsoBuffered: Boolean = false): Int =
    // Only while its client is fetching anyway: on a consumer that stopped (its last poll brought
    // records), a poll with an empty buffer would start a fetch, and acquire records for nothing.
    // Unless `alsoBuffered` (the pool can renew what it collects): then also where the client's buffer
    // may hold the rest of a full poll, at the cost of starting a fetch where it holds none.
    if (!(fetching || alsoBuffered && unreturnedSince.nonEmpty) || !held.isEmpty || carried.nonEmpty || subscribed.isEmpty) 0
    else {
      val since   = unreturnedSince.getOrElse(System.nanoTime)
      val records = consumer.poll(Duration.ZERO).asScala.toVector
      if (records.isEmpty) {
        // Nothing has come so far: whatever comes later is acquired later. An empty poll leaves the client fetching.
        unreturnedSince = Some(System.nanoTime - PooledShareConsumer.InFlightMarginNanos)
        fetching = true
      } else {
        carried = records
        carriedSince = since
        carriedFirstSince = since
        carryFetchedWhileIdle = true
        fetching = false // a response with records ends the client's fetching
        unreturnedSince = if (records.size >= maxPollRecords) Some(since) else None
      }
      records.size
    }

  /** Keeps held records, acquired at `acquiredAtNanos`, for the next [[poll]] (the carry, above). */
  def carry(records: Seq[Record], acquiredAtNanos: Long): Unit = if (records.nonEmpty) {
    records.foreach(held.remove)
    carriedSince = if (carried.isEmpty) acquiredAtNanos else math.min(carriedSince, acquiredAtNanos)
    val firstSince = math.min(polledFirstSince, acquiredAtNanos) // records of the last poll, perhaps renewed
    carriedFirstSince = if (carried.isEmpty) firstSince else math.min(carriedFirstSince, firstSince)
    carried ++= records
  }

  /** Marks records as decided; the decisions are sent with the next [[commit]]. */
  def acknowledge(records: Iterable[Record], kind: AcknowledgeType): Unit =
    records.foreach { r => consumer.acknowledge(r, kind); held.remove(r) }

  /**
   * Sends the acknowledgements marked so far. Returns the partitions whose acknowledgement the
   * broker refused (for example because the lock had expired).
   */
  def commit(timeoutMs: Long = 30000L): Seq[(String, Int, Throwable)] = {
    val result = consumer.commitSync(Duration.ofMillis(timeoutMs)).asScala
    result.collect { case (tip, error) if error.isPresent => (tip.topic, tip.partition, error.get: Throwable) }.toSeq
  }

  /**
   * Sends the acknowledgements marked so far without waiting for the broker's answer: a read task
   * that polls again goes on at once, while its acknowledgements are already on their way (they would
   * otherwise wait for the next poll, after the task's rows were processed). A refusal shows later
   * as a redelivery.
   */
  def send(): Unit = consumer.commitAsync()

  /** ACCEPTs everything held and sends it (two-phase commit, phase 2). */
  def acceptHeld(): Seq[(String, Int, Throwable)] = {
    acknowledge(heldNow, AcknowledgeType.ACCEPT)
    commit()
  }

  /**
   * Acknowledges each held record as `decide` says and sends it; returns how many got each decision
   * and the partitions whose acknowledgements the broker refused.
   */
  def decideHeld(
      decide: ((String, Int, Long)) => Decision,
      commitTimeoutMs: Long = 30000L
  ): (Map[Decision, Int], Seq[(String, Int, Throwable)]) = {
    val decided = heldNow.groupBy(r => decide((r.topic, r.partition, r.offset)))
    decided.foreach { case (d, records) => acknowledge(records, PooledShareConsumer.kafkaType(d)) }
    val refused = commit(commitTimeoutMs)
    (decided.map { case (d, records) => d -> records.size }, refused)
  }

  /**
   * Renews the locks of what it holds and carries (RENEW, Kafka 4.2+: the broker restarts each lock), for a
   * batch whose commit has not come yet. Kafka's client hands renewed records back at the next poll, to
   * be acknowledged again later, and returns nothing else until they are all back; so it polls them back
   * here and holds (or carries) them again. Returns the partitions whose renewal the broker refused, and
   * any record the client did not hand back: those are no longer this consumer's to acknowledge (their
   * locks run out and the group gets them again).
   */
  def renewHeld(commitTimeoutMs: Long, pollBackMs: Long): Seq[(String, Int, Throwable)] = {
    val heldBefore    = heldNow
    val carriedBefore = carried
    val firstBefore   = carriedFirstSinceNanos
    if (heldBefore.isEmpty && carriedBefore.isEmpty) return Nil
    // The broker restarts the locks while the commit runs: date them from before it was sent.
    val renewedAt = System.nanoTime - PooledShareConsumer.InFlightMarginNanos
    (heldBefore ++ carriedBefore).foreach(consumer.acknowledge(_, AcknowledgeType.RENEW))
    JvmActivity.renewedRecords(heldBefore.size + carriedBefore.size)
    // If this throws (a timeout), the records stay marked held: the caller closes the consumer.
    val refused = commit(commitTimeoutMs)
    held.clear()
    carried = Seq.empty
    val refusedParts              = refused.map { case (t, p, _) => (t, p) }.toSet
    def idOf(r: Record)           = (r.topic, r.partition, r.offset)
    def expected(rs: Seq[Record]) = rs.filterNot(r => refusedParts((r.topic, r.partition))).map(idOf).toSet
    val wantHeld                  = expected(heldBefore)
    val wanted                    = wantHeld ++ expected(carriedBefore)
    // The client hands every renewed record back at once, at the first poll after the broker answered;
    // polling again before they are acknowledged would be refused.
    var back     = Vector.empty[Record]
    val deadline = System.nanoTime + pollBackMs * 1000000L
    while (wanted.nonEmpty && back.isEmpty && System.nanoTime < deadline)
      back = consumer.poll(Duration.ofMillis(100)).asScala.toVector
    val (again, rest) = back.partition(r => wantHeld(idOf(r)))
    again.foreach(held.add)
    // The carry's locks were renewed too; anything else the poll brought was acquired just now.
    if (rest.nonEmpty) {
      // Renewed records, and perhaps what the client's buffer held: dated as the older of the two.
      carriedSince = unreturnedSince.fold(renewedAt)(math.min(_, renewedAt))
      carriedFirstSince = firstBefore.getOrElse(carriedSince)
      carried = rest
    }
    fetching = false
    val notBack = (wanted -- back.map(idOf)).toSeq.map { case (t, p, o) =>
      (t, p, new IllegalStateException(s"offset $o was not handed back after its renewal"): Throwable)
    }
    refused ++ notBack
  }

  /** RELEASEs whatever is still held (rollback), so the group can give it to another member at once. */
  def releaseHeld(): Unit = if (!held.isEmpty) {
    acknowledge(heldNow, AcknowledgeType.RELEASE)
    commit()
  }

  private def heldNow: Seq[Record] = held.asScala.toVector

  /**
   * Closes the client. One that never subscribed never joined the group: it has nothing to leave or
   * acknowledge, and a graceful close would only spend its timeout looking for a coordinator.
   */
  def close(): Unit =
    try consumer.close(if (subscribed.isEmpty) Duration.ZERO else Duration.ofSeconds(10))
    finally if (closed.compareAndSet(false, true)) JvmActivity.consumerClosed()
}

object PooledShareConsumer {
  val JoinTimeoutMs = 12000L

  /** The longest a broker holds a share fetch without records (the client's fetch.max.wait.ms), when not set. */
  private val DefaultFetchMaxWaitMs = 500L

  /** How long before its response reaches the client the broker may have acquired records, generously. */
  private val InFlightMarginNanos = 1000L * 1000000L

  type Record = ConsumerRecord[Array[Byte], Array[Byte]]

  /** What a poll gave: the records, when they were acquired, and whether they are a carry. */
  final case class Polled(records: Seq[Record], acquiredAtNanos: Long, fromCarry: Boolean)

  /** Kafka's share consumer, reading keys and values as bytes. */
  def kafkaClient(props: Properties): ShareConsumer[Array[Byte], Array[Byte]] =
    new KafkaShareConsumer[Array[Byte], Array[Byte]](props, new ByteArrayDeserializer, new ByteArrayDeserializer)

  /** How many times the broker delivered `record`, this time included (1 where the broker does not say). */
  def deliveryCountOf(record: ConsumerRecord[_, _]): Int = if (record.deliveryCount.isPresent) record.deliveryCount.get.toInt else 1

  def kafkaType(decision: Decision): AcknowledgeType = decision match {
    case Decision.Accept  => AcknowledgeType.ACCEPT
    case Decision.Release => AcknowledgeType.RELEASE
    case Decision.Reject  => AcknowledgeType.REJECT
  }
}

/**
 * Consumers are interchangeable when everything that decides what they return is the same: the group,
 * the client settings, the subscription, and the query. A consumer holds records it fetched ahead
 * (its carry, its client's buffer) for the topics it was subscribed to, on behalf of one query: given
 * to another query, even of the same group, it would hand that query records that are not its own.
 *
 * @param subscription the topics or the pattern, as the option gave them
 * @param query        the query's checkpoint location (two running queries never share one)
 * @param locks        the query's lock, by which the pool times its consumers (see [[ShareConsumerPool]])
 * @param renewIdle    whether the pool renews the locks of what an idle consumer carries (RENEW, Kafka 4.2+)
 *                     rather than give it back to the group, which would spend a delivery attempt of each record
 */
final case class ConsumerKey(
    groupId: String,
    params: Map[String, String],
    locks: LockBudget,
    subscription: String,
    query: String,
    renewIdle: Boolean = false
) {
  override def toString: String = s"ConsumerKey($groupId, $subscription, ${params.size} settings)" // settings may hold secrets
}
