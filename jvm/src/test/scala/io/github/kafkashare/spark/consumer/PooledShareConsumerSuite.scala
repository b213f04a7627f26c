package io.github.kafkashare.spark.consumer

import java.time.Duration
import java.util.Optional

import scala.collection.mutable

import io.github.kafkashare.spark.options.{Decision, LockBudget}
import org.apache.kafka.clients.consumer.{AcknowledgeType, ConsumerRecord, ConsumerRecords, MockShareConsumer}
import org.apache.kafka.common.TopicIdPartition
import org.apache.kafka.common.header.internals.RecordHeaders
import org.apache.kafka.common.record.TimestampType
import org.scalatest.funsuite.AnyFunSuite

/**
 * The consumer's own bookkeeping (what it holds, carries, sends), against Kafka's MockShareConsumer:
 * which records get which acknowledgement, and which polls reach the client at all.
 */
class PooledShareConsumerSuite extends AnyFunSuite {

  /**
   * Kafka's mock, remembering what it was told: acknowledgements in order, commits, polls. It takes
   * records only for subscribed topics, and the consumer subscribes at its first poll: `waiting` are
   * added then.
   */
  private final class Recording(var waiting: Seq[ConsumerRecord[Array[Byte], Array[Byte]]])
      extends MockShareConsumer[Array[Byte], Array[Byte]] {
    val acks    = mutable.Buffer.empty[(Long, AcknowledgeType)]
    var commits = 0
    var polls   = 0
    override def poll(timeout: Duration): ConsumerRecords[Array[Byte], Array[Byte]] = {
      polls += 1
      waiting.foreach(addRecord)
      waiting = Nil
      super.poll(timeout)
    }
    override def acknowledge(record: ConsumerRecord[Array[Byte], Array[Byte]], kind: AcknowledgeType): Unit =
      acks += record.offset -> kind
    override def commitSync(timeout: Duration): java.util.Map[TopicIdPartition, Optional[org.apache.kafka.common.KafkaException]] = {
      commits += 1
      java.util.Map.of()
    }
  }

  private def record(offset: Long, deliveryCount: Short = 1) =
    new ConsumerRecord[Array[Byte], Array[Byte]](
      "orders",
      0,
      offset,
      0L,
      TimestampType.CREATE_TIME,
      0,
      0,
      Array.emptyByteArray,
      Array.emptyByteArray,
      new RecordHeaders,
      Optional.empty[Integer],
      Optional.of(java.lang.Short.valueOf(deliveryCount))
    )

  private def consumerWith(records: Seq[ConsumerRecord[Array[Byte], Array[Byte]]]): (PooledShareConsumer, Recording) = {
    val mock = new Recording(records)
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
}
