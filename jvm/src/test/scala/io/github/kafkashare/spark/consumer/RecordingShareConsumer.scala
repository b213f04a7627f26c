package io.github.kafkashare.spark.consumer

import java.time.Duration
import java.util.Optional

import scala.collection.mutable

import org.apache.kafka.clients.consumer.{AcknowledgeType, ConsumerRecord, ConsumerRecords, MockShareConsumer}
import org.apache.kafka.common.TopicIdPartition
import org.apache.kafka.common.header.internals.RecordHeaders
import org.apache.kafka.common.record.TimestampType

/**
 * Kafka's MockShareConsumer, remembering what it was told: acknowledgements in order, commits, polls. It
 * takes records only for subscribed topics, and a pooled consumer subscribes at its first poll: `waiting`
 * are added then.
 */
final class RecordingShareConsumer(var waiting: Seq[ConsumerRecord[Array[Byte], Array[Byte]]])
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

  /** The acknowledgement each offset got last. */
  def lastAckOf: Map[Long, AcknowledgeType] = acks.toMap
}

object RecordingShareConsumer {

  /** A record of topic `orders`, partition `partition`, as a broker delivers it the `deliveryCount`-th time. */
  def record(offset: Long, deliveryCount: Short = 1, partition: Int = 0): ConsumerRecord[Array[Byte], Array[Byte]] =
    new ConsumerRecord[Array[Byte], Array[Byte]](
      "orders",
      partition,
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
}
