package io.github.kafkashare.spark.consumer

import java.time.Duration

import io.github.kafkashare.spark.options.{Decision, LockBudget}
import org.apache.kafka.clients.consumer.{AcknowledgeType, ConsumerRecord, ConsumerRecords, MockShareConsumer}
import org.apache.kafka.common.{Metric, MetricName}
import org.scalatest.funsuite.AnyFunSuite

/**
 * The consumer's own bookkeeping (what it holds, carries, sends), against Kafka's MockShareConsumer:
 * which records get which acknowledgement, and which polls reach the client at all.
 */
class PooledShareConsumerSuite extends AnyFunSuite {

  import RecordingShareConsumer.record

  private type Recording = RecordingShareConsumer

  private def consumerWith(records: Seq[ConsumerRecord[Array[Byte], Array[Byte]]]): (PooledShareConsumer, Recording) = {
    val mock = new RecordingShareConsumer(records)
    val key  = ConsumerKey("mock-group", Map("max.poll.records" -> "10"), LockBudget(120000L), "subscribe=orders", "/tmp/checkpoint")
    (new PooledShareConsumer(key, _ => mock), mock)
  }

  test("what a task does not take is carried, handed to the next poll without asking the client, and decided per record") {
    val (c, mock) = consumerWith((0L until 10L).map(record(_)))
    val first     = c.poll(Seq("orders"), 100)
    assert(first.records.map(_.offset) == (0L until 10L) && !first.fromCarry && c.holding == 10)
    c.acknowledge(first.records.take(4), AcknowledgeType.ACCEPT)
    c.carry(first.records.drop(4), first.acquiredAtNanos)
    assert(c.holding == 0 && c.carrying == 6)
    val pollsBefore = mock.polls
    val second      = c.poll(Seq("orders"), 100)
    assert(mock.polls == pollsBefore, "a carry is served from the consumer, not fetched again")
    assert(second.records.map(_.offset) == (4L until 10L) && second.fromCarry && c.carrying == 0 && c.holding == 6)
    val (made, refused) = c.decideHeld { case (_, _, offset) => if (offset % 2 == 0) Decision.Accept else Decision.Reject }
    assert(made == Map(Decision.Accept -> 3, Decision.Reject -> 3) && refused.isEmpty)
    assert(mock.acks.take(4).forall(_._2 == AcknowledgeType.ACCEPT))
    assert(mock.acks.drop(4).toMap == (4L until 10L).map(o =>
      o -> (if (o % 2 == 0) AcknowledgeType.ACCEPT else AcknowledgeType.REJECT)
    ).toMap)
    assert(mock.commits == 1 && c.holding == 0)
  }

  test("a carry too old to pin is RELEASEd, but for the records on their last delivery attempt, which would be archived") {
    val (c, mock) = consumerWith(Seq(record(0, deliveryCount = 5), record(1, deliveryCount = 2), record(2)))
    c.lastDeliveryAttempt = 5
    val polled = c.poll(Seq("orders"), 100)
    c.carry(polled.records, polled.acquiredAtNanos)
    assert(c.releaseCarry() == 2)
    assert(mock.acks.toSet == Set(1L -> AcknowledgeType.RELEASE, 2L -> AcknowledgeType.RELEASE))
    assert(c.carrying == 1, "the record on its last attempt stays for a batch")
    assert(c.releaseCarry(keepLastAttempts = false) == 1)
  }

  test("a failed task's records go back: RELEASE for what it held, nothing sent when it held nothing") {
    val (c, mock) = consumerWith((0L until 3L).map(record(_)))
    c.releaseHeld()
    assert(mock.commits == 0)
    c.poll(Seq("orders"), 100)
    c.releaseHeld()
    assert(mock.acks.map(_._2).toSet == Set(AcknowledgeType.RELEASE) && mock.acks.size == 3 && mock.commits == 1)
    assert(c.holding == 0)
  }

  /**
   * A client that joins the group at its `answerAt`-th poll: from then on the broker answers its fetches
   * (Kafka's `fetch-total` counts them), with nothing, as for a group whose records other members hold;
   * at its `recordsAt`-th poll a record comes (another broker's answer, a moment later).
   */
  private final class Joining(answerAt: Int, recordsAt: Int = Int.MaxValue) extends MockShareConsumer[Array[Byte], Array[Byte]] {
    var polls         = 0
    private val fetch = new MetricName("fetch-total", "consumer-share-fetch-manager-metrics", "", java.util.Map.of())
    private val answers = new Metric {
      def metricName: MetricName = fetch
      def metricValue: AnyRef    = java.lang.Double.valueOf(math.max(0, polls - answerAt + 1).toDouble)
    }
    override def metrics(): java.util.Map[MetricName, _ <: Metric] = java.util.Map.of(fetch, answers)
    override def poll(timeout: Duration): ConsumerRecords[Array[Byte], Array[Byte]] = {
      polls += 1
      Thread.sleep(math.min(timeout.toMillis, 100L)) // the mock returns at once; a client waits for the broker
      if (polls == recordsAt) addRecord(record(0))
      super.poll(timeout)
    }
  }

  test("a new consumer's first poll waits for the group's assignment, then no longer than its timeout once the broker answered") {
    val mock    = new Joining(answerAt = 5)
    val key     = ConsumerKey("mock-group", Map.empty, LockBudget(120000L), "subscribe=orders", "/tmp/checkpoint")
    val c       = new PooledShareConsumer(key, _ => mock)
    val started = System.nanoTime
    assert(c.poll(Seq("orders"), 200).records.isEmpty)
    val tookMs = (System.nanoTime - started) / 1000000L
    assert(mock.polls >= 5, s"it stopped before the broker answered (${mock.polls} polls)")
    // Without the answer it waits PooledShareConsumer.JoinTimeoutMs (12 s): an empty batch of new consumers lasted that long.
    assert(tookMs < 4000L, s"the first poll took $tookMs ms after the broker had answered")
  }

  test("records that come a moment after the broker's first answer still reach the first poll (a fetch round later)") {
    val mock = new Joining(answerAt = 5, recordsAt = 7)
    val key  = ConsumerKey("mock-group", Map.empty, LockBudget(120000L), "subscribe=orders", "/tmp/checkpoint")
    val c    = new PooledShareConsumer(key, _ => mock)
    // The poll timeout is shorter than the time to join: without a fetch round's grace it would end at the first answer.
    assert(c.poll(Seq("orders"), 200).records.map(_.offset) == Seq(0L))
  }
}
