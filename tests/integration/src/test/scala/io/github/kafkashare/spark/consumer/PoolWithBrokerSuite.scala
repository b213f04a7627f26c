package io.github.kafkashare.spark.consumer

import java.nio.file.Files
import java.util.concurrent.atomic.AtomicInteger

import io.github.kafkashare.spark.offsets.{AcquisitionEntry, AcquisitionLog, SerializableHadoopConf, SourceMarkers}
import org.apache.hadoop.conf.Configuration

import org.apache.kafka.clients.consumer.AcknowledgeType
import org.scalatest.funsuite.AnyFunSuite

import io.github.kafkashare.it.stream.SharedBrokers
import io.github.kafkashare.testkit.KafkaTestOps
import io.github.kafkashare.spark.options.LockBudget

/**
 * The pool with consumers that really hold records (a real broker): what it does with records a
 * consumer acquired and no batch took. Closing such a consumer gives them back to the group, which
 * spends a delivery attempt of each and archives those on their last (a CI run lost 539 of 3,000 records
 * that way, with the group's delivery count limit at 2). In its own package: it looks at the pool's
 * idle consumers.
 */
class PoolWithBrokerSuite extends AnyFunSuite {

  private val counter     = new AtomicInteger()
  private lazy val broker = SharedBrokers.newest
  private lazy val kafka  = new KafkaTestOps(broker.bootstrapServers)

  private def freshTopic(records: Int): (String, String) = {
    val n     = counter.incrementAndGet()
    val topic = s"pool-$n-${System.nanoTime}"
    val group = s"pool-group-$n-${System.nanoTime}"
    kafka.createTopic(topic, partitions = 1)
    kafka.readFromEarliest(group)
    kafka.produce(topic, count = records)
    (topic, group)
  }

  private def key(group: String, topic: String, maxPollRecords: Int) =
    ConsumerKey(
      group,
      Map("bootstrap.servers" -> broker.bootstrapServers, "max.poll.records" -> maxPollRecords.toString),
      locks = LockBudget(6000L),
      subscription = s"subscribe=$topic",
      query = s"/tmp/pool-suite-$topic"
    )

  test("a carry older than locks.idleCloseMs is RELEASEd to the group, and its consumer kept with its membership") {
    val (topic, group) = freshTopic(records = 100)
    val pool           = new ShareConsumerPool(Clock.System, new PooledShareConsumer(_))
    val k              = key(group, topic, maxPollRecords = 500)
    val consumer       = pool.borrow(k)
    try {
      val polled = consumer.poll(Seq(topic), 30000L)
      assert(polled.records.size > 10, "the first poll should bring a whole producer batch")
      val (taken, carried) = polled.records.splitAt(10)
      consumer.acknowledge(taken, AcknowledgeType.ACCEPT)
      consumer.carry(carried, polled.acquiredAtNanos)
      consumer.commit()
      pool.giveBack(consumer)

      Thread.sleep(k.locks.idleCloseMs + 200)
      pool.evictIdle()
      assert(pool.idleCount(k) == 1, "the consumer was closed: what its client had fetched ahead went back too")
      assert(consumer.carrying == 0, "the aged carry was not released")
      // Released, not held: another member of the group gets exactly the carried records.
      val again = kafka.shareConsume(group, Seq(topic), expected = carried.size, timeoutMs = 30000L)
      assert(again.map(_.offset).sorted == carried.map(_.offset).sorted)
    } finally pool.closeAll()
  }

  test("records on their last delivery attempt stay in an aged carry for a batch, for up to two locks") {
    val (topic, group) = freshTopic(records = 100)
    val pool           = new ShareConsumerPool(Clock.System, new PooledShareConsumer(_))
    // Long enough that a loaded machine gets from the poll to the first eviction within two locks.
    val k        = key(group, topic, maxPollRecords = 500).copy(locks = LockBudget(3000L))
    val consumer = pool.borrow(k)
    try {
      val polled = consumer.poll(Seq(topic), 30000L)
      assert(polled.records.nonEmpty)
      consumer.lastDeliveryAttempt = 1 // as a group whose limit is 1 would have it: every record on its last attempt
      consumer.carry(polled.records, polled.acquiredAtNanos)
      pool.giveBack(consumer)
      Thread.sleep(k.locks.idleCloseMs + 200)
      pool.evictIdle()
      assert(consumer.carrying == polled.records.size, "records on their last attempt were released: the broker archives them")
      assert(pool.idleCount(k) == 1)
      Thread.sleep(3 * k.locks.idleCloseMs) // past two locks (four times idleCloseMs) since the records were acquired
      pool.evictIdle()
      assert(consumer.carrying == 0, "a carry no batch took in two locks is kept forever")
    } finally pool.closeAll()
  }

  test("what an idle consumer's client fetches is collected, the query told, and the consumer handed out first") {
    val (topic, group) = freshTopic(records = 1)
    val pool           = new ShareConsumerPool(Clock.System, new PooledShareConsumer(_))
    val k              = key(group, topic, maxPollRecords = 500)
    val (markers, log) = queryFiles()
    pool.watch(k, markers, log)
    val fetching = pool.borrow(k)
    val empty    = pool.borrow(k) // never polls: holds nothing
    try {
      val first = fetching.poll(Seq(topic), 30000L)
      assert(first.records.size == 1)
      fetching.acknowledge(first.records, AcknowledgeType.ACCEPT)
      fetching.commit()
      // Nothing left: this poll comes back empty, and Kafka's client goes on fetching after it.
      assert(fetching.poll(Seq(topic), 500L).records.isEmpty)
      pool.giveBack(fetching)
      pool.giveBack(empty) // given back last: the one a last-in-first-out pool would hand out
      kafka.produce(topic, count = 50, firstKey = 1)

      // The producer may send the 50 in more than one request (its linger is short, and a loaded machine
      // is slow to append): the fetch in flight answers with what had arrived, the rest comes with a poll.
      eventually(s"the idle consumer's fetch collected") { pool.evictIdle(); fetching.carrying > 0 }
      val collected = fetching.carrying
      assert(markers.takeFetchedWhileIdle(), "the driver was not asked for a batch")
      assert(!markers.takeFetchedWhileIdle(), "taking the mark clears it")
      val borrowed = pool.borrow(k)
      assert(borrowed eq fetching)
      val next = borrowed.poll(Seq(topic), 500L)
      assert(next.records.map(_.offset) == (1L to collected.toLong), "the collected records, first and all at once")
      assert(!next.fromCarry, "records no reader saw yet are counted by the one that takes them")
      borrowed.acknowledge(next.records, AcknowledgeType.ACCEPT)
      borrowed.commit()
      var seen = next.records.map(_.offset)
      while (seen.size < 50) {
        val more = borrowed.poll(Seq(topic), 30000L)
        assert(more.records.nonEmpty, s"records after the collected ones did not come: ${seen.size} of 50")
        borrowed.acknowledge(more.records, AcknowledgeType.ACCEPT)
        borrowed.commit()
        seen ++= more.records.map(_.offset)
      }
      assert(seen.sorted == (1L to 50L))
      pool.giveBack(borrowed)
    } finally pool.closeAll()
  }

  test("a consumer whose query ran two batches since the one it served is closed when its carry ages: the group " +
    "hands its records to a member that reads") {
    // Long enough that a renewal (its answer waited for a quarter of this) goes through on a loaded machine.
    val ServedBatch3(pool, k, log, consumer, topic, group) = servedBatch3(idleCloseMs = 4000L, renewIdle = true)
    try {
      val polled = consumer.poll(Seq(topic), 30000L)
      assert(polled.records.nonEmpty)
      consumer.carry(polled.records, polled.acquiredAtNanos)
      pool.giveBack(consumer)
      // The source's next batch started (Spark's ids skip where it ran nothing): it may still take the carry.
      Seq(2L, 3L, 7L).foreach(b => log.writeIfAbsent(b, 0, AcquisitionEntry.empty))
      Thread.sleep(k.locks.idleCloseMs + 300)
      pool.evictIdle()
      assert(pool.idleCount(k) == 1, "closed while the query's next batch could still take what it carries")
      assert(consumer.carrying == polled.records.size, "the carry was not renewed")

      log.writeIfAbsent(12, 0, AcquisitionEntry.empty) // batch 7 ran to its end without it
      Thread.sleep(k.locks.idleCloseMs + 300)
      pool.evictIdle()
      assert(pool.idleCount(k) == 0, "kept: a member holding records, and partitions, that no read task polls")
      // Closed, it left the group: another member gets every record, the carried ones and any its client held.
      val again = kafka.shareConsume(group, Seq(topic), expected = 100, timeoutMs = 30000L)
      assert(again.map(_.offset).sorted == (0L until 100L))
    } finally pool.closeAll()
  }

  test("left behind by its query, a consumer keeps records on their last attempt for up to two locks, then closes") {
    val ServedBatch3(pool, k, log, consumer, topic, _) = servedBatch3(idleCloseMs = 1500L, renewIdle = false)
    try {
      val polled = consumer.poll(Seq(topic), 30000L)
      assert(polled.records.nonEmpty)
      consumer.lastDeliveryAttempt = 1 // every record on its last attempt
      consumer.carry(polled.records, polled.acquiredAtNanos)
      pool.giveBack(consumer)
      Seq(4L, 5L).foreach(b => log.writeIfAbsent(b, 0, AcquisitionEntry.empty))
      Thread.sleep(k.locks.idleCloseMs + 200)
      pool.evictIdle()
      assert(pool.idleCount(k) == 1 && consumer.carrying == polled.records.size, "closed with records on their last attempt")
      Thread.sleep(3 * k.locks.idleCloseMs) // past two locks (four times idleCloseMs) since the records were acquired
      pool.evictIdle()
      assert(pool.idleCount(k) == 0, "a consumer its query left behind is kept for ever")
    } finally pool.closeAll()
  }

  private final case class ServedBatch3(
      pool: ShareConsumerPool,
      key: ConsumerKey,
      log: AcquisitionLog,
      consumer: PooledShareConsumer,
      topic: String,
      group: String
  )

  /** A watched query of a fresh topic of 100 records, and the consumer its task of batch 3 borrowed. */
  private def servedBatch3(idleCloseMs: Long, renewIdle: Boolean): ServedBatch3 = {
    val (topic, group) = freshTopic(records = 100)
    val pool           = new ShareConsumerPool(Clock.System, new PooledShareConsumer(_))
    val k              = key(group, topic, maxPollRecords = 500).copy(locks = LockBudget(2 * idleCloseMs), renewIdle = renewIdle)
    val (markers, log) = queryFiles()
    pool.watch(k, markers, log)
    val consumer = pool.borrow(k)
    consumer.lastBatch = 3
    ServedBatch3(pool, k, log, consumer, topic, group)
  }

  private def queryFiles(): (SourceMarkers, AcquisitionLog) = {
    val dir  = Files.createTempDirectory("pool-query").toString
    val conf = new SerializableHadoopConf(new Configuration)
    (new SourceMarkers(dir, conf), new AcquisitionLog(dir, conf))
  }

  private def eventually(what: String)(done: => Boolean): Unit = {
    val until = System.nanoTime + 20000L * 1000000L
    while (!done) {
      assert(System.nanoTime < until, s"timed out waiting for: $what")
      Thread.sleep(200)
    }
  }
}
