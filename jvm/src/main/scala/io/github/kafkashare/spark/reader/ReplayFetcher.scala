package io.github.kafkashare.spark.reader

import java.time.Duration
import java.util.{Collections, Properties}

import scala.jdk.CollectionConverters._

import io.github.kafkashare.spark.errors.ShareSourceErrors
import io.github.kafkashare.spark.offsets.{AcquiredRun, AcquisitionEntry}
import org.apache.kafka.clients.consumer.{CloseOptions, ConsumerRecord, KafkaConsumer}
import org.apache.kafka.common.TopicPartition
import org.apache.kafka.common.serialization.ByteArrayDeserializer
import org.apache.spark.internal.Logging

/**
 * Reads exactly the records a task's acquisition log parts name, with a plain consumer (assign and
 * seek): ACCEPTed records stay in the topic until retention removes them, so a batch can be re-run.
 *
 * The order is the first read's: part after part, and within a part by topic, partition and offset
 * (a fresh read emits each part in that order too), so that `limit`, `first` or `dropDuplicates`
 * agree across the actions of one batch. Records are fetched as they are consumed, one poll at a
 * time, never the whole task into memory.
 *
 * A record that is gone (retention, compaction, a deleted topic) fails the read with the data-loss
 * error, or with failOnDataLoss=false is skipped with a warning: never fewer rows without a word.
 */
final class ReplayFetcher(parts: Seq[AcquisitionEntry], params: Map[String, String], failOnDataLoss: Boolean)
    extends Iterator[(ConsumerRecord[Array[Byte], Array[Byte]], Int)] with AutoCloseable with Logging {

  private type Record = ConsumerRecord[Array[Byte], Array[Byte]]

  private val runs     = parts.iterator.flatMap(_.runs)
  private var consumer = Option.empty[KafkaConsumer[Array[Byte], Array[Byte]]]
  private var current  = Iterator.empty[(Record, Int)]
  // Per partition, read once: runs of one partition are often several (parts, sibling consumers).
  private val earliestOf = scala.collection.mutable.Map.empty[TopicPartition, Long]
  private val leftAt     = scala.collection.mutable.Map.empty[TopicPartition, Long]

  override def hasNext: Boolean = {
    while (!current.hasNext && runs.hasNext) current = fetch(runs.next())
    if (!current.hasNext) close()
    current.hasNext
  }

  override def next(): (Record, Int) = if (hasNext) current.next() else Iterator.empty.next()

  override def close(): Unit = {
    consumer.foreach(_.close(CloseOptions.timeout(Duration.ofSeconds(5))))
    consumer = None
  }

  private def client: KafkaConsumer[Array[Byte], Array[Byte]] = consumer.getOrElse {
    val props = new Properties
    // A plain consumer refuses the share consumer's own settings (share.acquire.mode, chosen by the source).
    params.foreach { case (k, v) => if (!k.startsWith("share.")) props.put(k, v) }
    props.put("enable.auto.commit", "false")
    props.put("auto.offset.reset", "none")
    props.remove("group.id")
    val created = new KafkaConsumer[Array[Byte], Array[Byte]](props, new ByteArrayDeserializer, new ByteArrayDeserializer)
    consumer = Some(created)
    created
  }

  /** The records of one run, poll by poll, each checked to be there. */
  private def fetch(run: AcquiredRun): Iterator[(Record, Int)] = {
    val tp = new TopicPartition(run.topic, run.partition)
    val c  = client
    if (!c.assignment.contains(tp)) { c.assign(Collections.singleton(tp)); leftAt.clear() } // a new assignment forgets positions
    val earliest = earliestOf.getOrElseUpdate(tp, offsetOf(run, c.beginningOffsets(Collections.singleton(tp), Timeout)))
    if (run.last < earliest) { missing(run, run.first, run.last, earliest); return Iterator.empty }
    if (run.first < earliest) missing(run, run.first, earliest - 1, earliest)
    var expected = math.max(run.first, earliest) // the next offset the run must yield
    // Where the previous run of this partition left the consumer: a seek there would drop what the
    // client already fetched.
    if (!leftAt.get(tp).contains(expected)) c.seek(tp, expected)
    var emptySince = 0L // when the polls started coming back empty
    new Iterator[Iterator[(Record, Int)]] {
      override def hasNext: Boolean = expected <= run.last
      override def next(): Iterator[(Record, Int)] = {
        val pollStart = System.nanoTime
        val got = c.poll(Duration.ofMillis(500)).records(tp).asScala.iterator
          .filter(r => r.offset >= expected && r.offset <= run.last).toVector
        got.foreach { r =>
          if (r.offset > expected) missing(run, expected, r.offset - 1, earliest)
          expected = r.offset + 1
        }
        if (got.nonEmpty) emptySince = 0L
        else {
          // Only time spent in empty polls counts, not the time the rows spent downstream.
          if (emptySince == 0L) emptySince = pollStart
          val position = c.position(tp, Timeout)
          val logEnd   = offsetOf(run, c.endOffsets(Collections.singleton(tp), Timeout))
          // The partition moved past offsets of the run without returning them, or ends before
          // them: compacted away (or removed otherwise).
          val gone = if (position > expected) position else if (logEnd <= expected) run.last + 1 else expected
          if (gone > expected) {
            missing(run, expected, math.min(gone - 1, run.last), earliest)
            expected = gone
            emptySince = 0L
          } else if (System.nanoTime - emptySince > ReplayFetcher.StallNanos)
            throw ShareSourceErrors.replayStalled(
              run.topic,
              run.partition,
              expected,
              run.last,
              params.getOrElse("bootstrap.servers", "?"),
              ReplayFetcher.StallNanos / 1000000000L
            )
        }
        if (expected > run.last) leftAt(tp) = c.position(tp, Timeout)
        got.iterator.map(_ -> run.deliveryCount)
      }
    }.flatten
  }

  private def offsetOf(run: AcquiredRun, ask: => java.util.Map[TopicPartition, java.lang.Long]): Long =
    try ask.get(new TopicPartition(run.topic, run.partition)).longValue
    catch {
      case e: org.apache.kafka.common.errors.TimeoutException =>
        throw ShareSourceErrors.replayStalled(
          run.topic,
          run.partition,
          run.first,
          run.last,
          params.getOrElse("bootstrap.servers", "?"),
          Timeout.getSeconds,
          e
        )
    }

  private val Timeout = Duration.ofSeconds(60)

  private def missing(run: AcquiredRun, from: Long, to: Long, earliest: Long): Unit = {
    if (failOnDataLoss) throw ShareSourceErrors.dataLost(run.topic, run.partition, from, to, earliest)
    logWarning(s"replaying ${run.topic}-${run.partition}: offsets $from..$to, pinned to this batch, are gone from the topic " +
      "(retention, compaction or a deleted topic); failOnDataLoss=false, so the batch goes on without them")
  }
}

object ReplayFetcher {

  /** How long a replay may get no record before it gives up with a clear error. */
  val StallNanos: Long = 120L * 1000000000L
}
