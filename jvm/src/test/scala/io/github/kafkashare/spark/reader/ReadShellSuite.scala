package io.github.kafkashare.spark.reader

import java.nio.file.Files
import java.util.concurrent.Future

import io.github.kafkashare.spark.ack.CommitWatcher
import io.github.kafkashare.spark.consumer.{ConsumerKey, ManualClock, PooledShareConsumer, RecordingShareConsumer, ShareConsumerPool}
import io.github.kafkashare.spark.consumer.RecordingShareConsumer.record
import io.github.kafkashare.spark.metrics.TaskCounters
import io.github.kafkashare.spark.offsets._
import io.github.kafkashare.spark.options.{ExactlyOnceStrategy, LockBudget, PoisonPolicy}
import io.github.kafkashare.spark.runtime.TaskRuntime
import org.apache.hadoop.conf.Configuration
import org.apache.kafka.clients.consumer.AcknowledgeType
import org.apache.kafka.clients.producer.{MockProducer, Producer, ProducerRecord, RecordMetadata}
import org.apache.kafka.common.serialization.ByteArraySerializer
import org.scalatest.funsuite.AnyFunSuite

/**
 * The read shell ([[PinnedPolls]] and what it calls: the pool, the acquisition log, the acknowledgements,
 * the dead letters) on Kafka's MockShareConsumer, a log in a temporary folder and a runtime of the test's
 * own: the cases the failure cells found end to end, here in milliseconds.
 */
class ReadShellSuite extends AnyFunSuite {

  private type Record = PooledShareConsumer.Record

  /** A runtime whose pool hands out consumers on `mock`, and whose dead-letter producer is `producer`. */
  private final class TestRuntime(mock: RecordingShareConsumer, producer: Producer[Array[Byte], Array[Byte]]) extends TaskRuntime {
    val consumerPool           = new ShareConsumerPool(new ManualClock, key => new PooledShareConsumer(key, _ => mock))
    lazy val commitWatcher     = new CommitWatcher(new ManualClock, consumerPool)
    def commitWatcherIfStarted = None
    def deadLetterProducer(params: Map[String, String], make: Map[String, String] => Producer[Array[Byte], Array[Byte]]) = producer
  }

  /** A dead-letter topic that takes `delayMs` to confirm each write (a slow cluster). */
  private final class SlowDeadLetters(delayMs: Long)
      extends MockProducer[Array[Byte], Array[Byte]](true, null, new ByteArraySerializer, new ByteArraySerializer) {
    override def send(r: ProducerRecord[Array[Byte], Array[Byte]]): Future[RecordMetadata] = { Thread.sleep(delayMs); super.send(r) }
  }

  private def taskOf(
      strategy: ExactlyOnceStrategy,
      task: Int = 0,
      pinned: TopicPartitionRanges = TopicPartitionRanges.empty,
      lockMs: Long = 120000L,
      poison: Option[PoisonPolicy] = None
  ): KafkaShareInputPartition = {
    val checkpoint = Files.createTempDirectory("read-shell").toString
    val conf       = new SerializableHadoopConf(new Configuration())
    val query = ReadTaskQuery(
      strategy,
      ConsumerKey(s"group-$checkpoint", Map("max.poll.records" -> "10"), LockBudget(lockMs), "subscribe=orders", checkpoint),
      pollTimeoutMs = 200,
      readDurationMs = 500,
      locks = LockBudget(lockMs),
      includeHeaders = false,
      failOnDataLoss = true,
      log = new AcquisitionLog(checkpoint, conf),
      commitLogDir = s"$checkpoint/commits",
      hadoopConf = conf,
      holdUntilCommit = strategy.acceptsAfterCommit,
      renewLocks = false,
      explicitDefault = None,
      decisions = new DecisionLog(checkpoint, conf),
      markers = new SourceMarkers(checkpoint, conf),
      poison = poison
    )
    KafkaShareInputPartition(query, batch = 1, task, Seq("orders"), pinned, Int.MaxValue, deliveryLimit = 5, totals = null)
  }

  /** Runs the task's polls to their end: what it emitted, and what the mock was told. */
  private def read(
      partition: KafkaShareInputPartition,
      mock: RecordingShareConsumer,
      producer: Producer[Array[Byte], Array[Byte]] = new SlowDeadLetters(0),
      replay: () => Iterator[(Record, Int)] = () => Iterator.empty
  ): Seq[Long] = {
    val polls =
      new PinnedPolls(partition, new TaskCounters, replay, new BatchBudget(partition.query.pollTimeoutMs), new TestRuntime(mock, producer))
    try polls.map(_._1.offset).toVector
    finally polls.close()
  }

  private def offsets(first: Long, last: Long) = AcquisitionEntry.of((first to last).map(o => ("orders", 0, o, 1)))

  test("a poll of only redeliveries of pinned records emits nothing and ACCEPTs them (exactly-once strategies)") {
    val mock    = new RecordingShareConsumer((0L until 10L).map(record(_, deliveryCount = 2)))
    val task    = taskOf(ExactlyOnceStrategy.CheckpointDedup, pinned = offsets(0, 9).offsets)
    val emitted = read(task, mock)
    assert(emitted.isEmpty, "redeliveries of records pinned to an earlier batch were emitted again")
    assert(mock.lastAckOf == (0L until 10L).map(_ -> AcknowledgeType.ACCEPT).toMap)
    assert(task.query.log.read(1, 0).exists(_.runs.isEmpty), "the task's part 0 should say: nothing")
  }

  test("records a sibling task pinned come back at delivery count 1 (Kafka 4.1): dropped, not emitted twice") {
    val task = taskOf(ExactlyOnceStrategy.CheckpointDedup)
    task.query.log.writeIfAbsent(1, 1, offsets(0, 4)) // task 1 of the same batch pinned 0 to 4
    val mock    = new RecordingShareConsumer((0L until 10L).map(record(_)))
    val emitted = read(task, mock)
    assert(emitted == (5L until 10L), "records pinned by a sibling task were emitted again")
    assert((0L until 5L).forall(mock.lastAckOf(_) == AcknowledgeType.ACCEPT))
  }

  test("a retry that finds its part 0 pinned by another attempt gives its records back and replays that attempt's") {
    val task = taskOf(ExactlyOnceStrategy.None)
    task.query.log.writeIfAbsent(1, 0, offsets(100, 102)) // the other attempt won
    val mock    = new RecordingShareConsumer((0L until 10L).map(record(_)))
    val winners = () => (100L to 102L).iterator.map(o => record(o) -> 1)
    val emitted = read(task, mock, replay = winners)
    assert(emitted == (100L to 102L), "the task must emit what the log names for it, nothing it polled")
    assert(mock.lastAckOf == (0L until 10L).map(_ -> AcknowledgeType.RELEASE).toMap, "what it polled must go back to the group")
  }

  test("records whose lock ran out while a poison record went to the dead-letter topic are given back, not pinned") {
    // A 5 s lock, pinnable while younger than 4 s; a poll's records count as acquired up to a second before it
    // returned (PooledShareConsumer's in-flight margin), and the dead-letter write takes 3.5 s.
    val task    = taskOf(ExactlyOnceStrategy.None, lockMs = 5000L, poison = Some(PoisonPolicy(maxDeliveries = 1, Some("dead"))))
    val mock    = new RecordingShareConsumer(record(0, deliveryCount = 2) +: (1L until 6L).map(record(_)))
    val emitted = read(task, mock, producer = new SlowDeadLetters(3500))
    assert(emitted.isEmpty, "records past the pinnable age were pinned: another member may have them by now")
    assert(mock.lastAckOf(0L) == AcknowledgeType.REJECT)
    assert((1L until 6L).forall(mock.lastAckOf(_) == AcknowledgeType.RELEASE))
  }
}
