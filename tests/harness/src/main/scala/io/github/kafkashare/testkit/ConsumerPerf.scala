package io.github.kafkashare.testkit

import java.time.Duration
import java.util.Properties
import java.util.concurrent.atomic.{AtomicLong, LongAccumulator}

import scala.jdk.CollectionConverters._

import org.apache.kafka.clients.consumer.{ConsumerConfig, KafkaConsumer, KafkaShareConsumer}
import org.apache.kafka.common.serialization.ByteArrayDeserializer

/**
 * The benchmark's Kafka-client contenders (`make bench`), clocked as the Spark contenders are: from
 * the moment the first record reaches the application to the moment the last one does, so a group's
 * join and first assignment are not counted. Kafka's own ShareConsumerPerformance counts them (about
 * half of a 12 s run), which is why the benchmark does not use its figure.
 * {{{
 *   ConsumerPerf share    <bootstrap> <topic> <group> <records> <threads> [key=value...]
 *   ConsumerPerf consumer <bootstrap> <topic> <group> <records> <threads> [key=value...]
 * }}}
 * `share`: `threads` share consumers of one share group (implicit acknowledgement, as
 * ShareConsumerPerformance), reading from the group's start (the caller sets the group to earliest).
 * `consumer`: `threads` plain consumers of one consumer group from the earliest offset: the broker and
 * client ceiling of the machine. The settings (for example max.poll.records=2000) go to every client.
 * Prints one JSON line: records, seconds, records_per_s. Exits 1 when fewer than `records` arrive
 * within 10 minutes: a contender that reads less must fail the run, not look fast.
 */
object ConsumerPerf {

  def main(args: Array[String]): Unit = args.toList match {
    case kind :: bootstrap :: topic :: group :: records :: threads :: settings =>
      val props = new Properties
      settings.foreach { s =>
        val Array(k, v) = s.split("=", 2)
        props.put(k, v)
      }
      props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap)
      props.put(ConsumerConfig.GROUP_ID_CONFIG, group)
      if (kind == "consumer") props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest")
      val result = run(kind, topic, props, records.toLong, threads.toInt)
      println(result)
      if (!result.contains("\"complete\":true")) sys.exit(1)
    case _ =>
      System.err.println("usage: ConsumerPerf share|consumer <bootstrap> <topic> <group> <records> <threads> [key=value...]")
      sys.exit(2)
  }

  private def run(kind: String, topic: String, props: Properties, records: Long, threads: Int): String = {
    val received = new AtomicLong
    val first    = new LongAccumulator(math.min, Long.MaxValue)
    val last     = new LongAccumulator(math.max, Long.MinValue)
    val deadline = System.nanoTime + Duration.ofMinutes(10).toNanos
    def readUntilDone(poll: () => Int): Unit =
      while (received.get < records && System.nanoTime < deadline) {
        val n = poll()
        if (n > 0) {
          val now = System.nanoTime
          first.accumulate(now)
          received.addAndGet(n)
          last.accumulate(now)
        }
      }
    val workers = (1 to threads).map { _ =>
      new Thread(() =>
        if (kind == "share") {
          val c = new KafkaShareConsumer[Array[Byte], Array[Byte]](props, new ByteArrayDeserializer, new ByteArrayDeserializer)
          try {
            c.subscribe(java.util.List.of(topic))
            readUntilDone(() => c.poll(Duration.ofMillis(200)).count)
            c.commitSync()
          } finally c.close()
        } else {
          val c = new KafkaConsumer[Array[Byte], Array[Byte]](props, new ByteArrayDeserializer, new ByteArrayDeserializer)
          try {
            c.subscribe(java.util.List.of(topic))
            readUntilDone(() => c.poll(Duration.ofMillis(200)).count)
          } finally c.close()
        }
      )
    }
    workers.foreach(_.start())
    workers.foreach(_.join())
    val count   = received.get
    val seconds = math.max(last.get - first.get, 1L) / 1e9
    f"""{"records":$count,"complete":${count >= records},"seconds":$seconds%.3f,"records_per_s":${(count / seconds).round}}"""
  }
}
