package io.github.kafkashare.spark.reader

import java.nio.charset.StandardCharsets.UTF_8
import java.util.Properties
import java.util.concurrent.TimeUnit

import scala.util.control.NonFatal

import io.github.kafkashare.spark.runtime.TaskRuntime
import io.github.kafkashare.spark.consumer.PooledShareConsumer
import io.github.kafkashare.spark.errors.ShareSourceErrors
import org.apache.kafka.clients.consumer.ConsumerRecord
import org.apache.kafka.clients.producer.{KafkaProducer, Producer, ProducerRecord}
import org.apache.kafka.common.serialization.ByteArraySerializer

/**
 * Poison records on their way to the dead-letter topic (option kafka.share.deadLetterTopic). A record
 * is written there, and the write confirmed, before it is REJECTed: a failure in between sends it
 * again later (the dead-letter topic is at least once), never loses it.
 *
 * Each copy keeps its key, value, timestamp and headers, plus headers that name its origin.
 */
object DeadLetters {

  val OriginHeaders: Seq[String] = Seq(
    "kafka-share.origin.topic",
    "kafka-share.origin.partition",
    "kafka-share.origin.offset",
    "kafka-share.origin.deliveryCount",
    "kafka-share.origin.group"
  )

  def send(
      records: Seq[ConsumerRecord[Array[Byte], Array[Byte]]],
      topic: String,
      groupId: String,
      params: Map[String, String],
      runtime: TaskRuntime
  ): Unit =
    if (records.nonEmpty) {
      // One producer per JVM and client settings (KafkaProducer is thread-safe), closed at exit.
      val producer = runtime.deadLetterProducer(params, create)
      try {
        val sent = records.map { r =>
          val copy   = new ProducerRecord[Array[Byte], Array[Byte]](topic, null, r.timestamp, r.key, r.value, r.headers)
          val origin = Seq(r.topic, r.partition.toString, r.offset.toString, PooledShareConsumer.deliveryCountOf(r).toString, groupId)
          OriginHeaders.zip(origin).foreach { case (k, v) => copy.headers.add(k, v.getBytes(UTF_8)) }
          producer.send(copy)
        }
        sent.foreach(_.get(60, TimeUnit.SECONDS))
      } catch {
        case NonFatal(e) => throw ShareSourceErrors.deadLetterFailed(topic, e)
      }
    }

  private def create(params: Map[String, String]): Producer[Array[Byte], Array[Byte]] = {
    val props = new Properties
    // Security and connection settings apply to the producer too; consumer-only settings are left out.
    params.foreach { case (k, v) if !ConsumerOnly.exists(k.startsWith) => props.put(k, v); case _ => }
    props.put("acks", "all")
    props.put("enable.idempotence", "true")
    props.put("client.id", s"kafka-share-dead-letters-${ProcessHandle.current.pid}")
    new KafkaProducer[Array[Byte], Array[Byte]](props, new ByteArraySerializer, new ByteArraySerializer)
  }

  private val ConsumerOnly = Seq("share.", "fetch.", "max.poll.", "max.partition.fetch", "check.crcs", "client.rack", "exclude.internal")
}
