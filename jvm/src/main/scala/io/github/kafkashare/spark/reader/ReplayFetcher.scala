package io.github.kafkashare.spark.reader

import java.time.Duration
import java.util.Properties

import scala.collection.mutable
import scala.jdk.CollectionConverters._

import io.github.kafkashare.spark.errors.ShareSourceErrors
import io.github.kafkashare.spark.offsets.AcquiredRun
import org.apache.kafka.clients.consumer.{CloseOptions, ConsumerRecord, KafkaConsumer}
import org.apache.kafka.common.TopicPartition
import org.apache.kafka.common.serialization.ByteArrayDeserializer
import org.apache.spark.internal.Logging

/**
 * Reads exactly the records an acquisition log entry names, with a plain consumer (assign and seek):
 * ACCEPTed records stay in the topic until retention removes them, so a batch can be re-run.
 */
object ReplayFetcher extends Logging {

  def fetch(runs: Seq[AcquiredRun], params: Map[String, String], failOnDataLoss: Boolean)
      : Seq[(ConsumerRecord[Array[Byte], Array[Byte]], Int)] = {
    if (runs.isEmpty) return Nil
    val props = new Properties
    params.foreach { case (k, v) => props.put(k, v) }
    props.put("enable.auto.commit", "false")
    props.put("auto.offset.reset", "none")
    props.remove("group.id")
    val consumer = new KafkaConsumer[Array[Byte], Array[Byte]](props, new ByteArrayDeserializer, new ByteArrayDeserializer)
    try {
      runs.groupBy(r => new TopicPartition(r.topic, r.partition)).toSeq.flatMap { case (tp, partRuns) =>
        consumer.assign(java.util.Collections.singleton(tp))
        val earliest = consumer.beginningOffsets(java.util.Collections.singleton(tp)).get(tp).longValue
        partRuns.sortBy(_.first).flatMap { run =>
          if (run.first < earliest) {
            if (failOnDataLoss) throw ShareSourceErrors.dataLost(tp.topic, tp.partition, run.first, run.last, earliest)
            logWarning(s"replaying ${tp}: offsets ${run.first}..${math.min(run.last, earliest - 1)} were removed by retention")
          }
          if (run.last < earliest) Nil else fetchRun(consumer, tp, math.max(run.first, earliest), run.last).map(_ -> run.deliveryCount)
        }
      }
    } finally consumer.close(CloseOptions.timeout(Duration.ofSeconds(5)))
  }

  private def fetchRun(consumer: KafkaConsumer[Array[Byte], Array[Byte]], tp: TopicPartition, first: Long, last: Long)
      : Seq[ConsumerRecord[Array[Byte], Array[Byte]]] = {
    consumer.seek(tp, first)
    val out      = mutable.ArrayBuffer.empty[ConsumerRecord[Array[Byte], Array[Byte]]]
    val deadline = System.currentTimeMillis + 120000
    while (consumer.position(tp) <= last) {
      if (System.currentTimeMillis > deadline)
        throw new java.util.concurrent.TimeoutException(s"replaying $tp offsets $first..$last took over 120 s")
      consumer.poll(Duration.ofMillis(500)).records(tp).asScala.foreach { r =>
        if (r.offset >= first && r.offset <= last) out += r
      }
    }
    out.toSeq
  }
}
