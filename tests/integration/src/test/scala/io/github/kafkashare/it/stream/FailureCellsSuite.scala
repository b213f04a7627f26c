package io.github.kafkashare.it.stream

import java.util.concurrent.{ConcurrentHashMap, ConcurrentLinkedQueue}
import java.util.concurrent.atomic.{AtomicBoolean, AtomicInteger}

import scala.concurrent.duration._

import org.apache.spark.TaskContext
import org.apache.spark.sql.DataFrame
import org.apache.spark.sql.functions.{col, lit, udf}

/**
 * The delivery contract's failures that need no process to die (docs/internals/delivery-semantics.md, "What was tested"),
 * each against every strategy it applies to, counted as the chaos suite counts (tests/python/chaos.py,
 * which runs them too, with `make chaos`): lost 0 everywhere, doubled 0 for the exactly-once ones.
 *   F1  a read task throws midway; Spark retries it
 *   F2  the batch fails after its reader finished; the query restarts
 *   F8  foreachBatch runs two actions on the batch
 *   F10 a poison record fails its batch three times, then the fix is deployed
 *   F11 the query is stopped and started five times in a row
 * Process crashes (F3 to F7, F9) stay in tests/python/test_delivery.py: they need a process to kill.
 */
class FailureCellsSuite extends ShareStreamTest {

  private val strategies  = Seq("none", "idempotent", "checkpoint-dedup", "two-phase-commit")
  private val exactlyOnce = Seq("checkpoint-dedup", "two-phase-commit")
  // As the chaos cells: at least five batches, so that a failure can strike any of batches 1 to 3,
  // with several polls per read task (tasks of 400 records, polls of about 150).
  private val cellOptions = Seq("kafka.max.poll.records" -> "150", "maxRecordsPerTrigger" -> "800")

  /** The batch a cell's failure strikes: 1 to 3, fixed per cell so that every run strikes the same point. */
  private def failureBatch(cell: String): Long = 1L + math.abs(cell.hashCode % 3)

  for (strategy <- strategies) test(s"F1 a read task throws midway ($strategy)") {
    val topic = prepare()
    val at    = failureBatch(s"F1/$strategy")
    val hook  = new FailReadTaskOnce(at, token = s"F1/$strategy")
    testStream(topic.queryWith(hook, strategy, cellOptions: _*))(
      AddRecords(topic, 4000),
      StartStream(),
      CheckLanded(4000),
      Assert("the failure struck once") { _ => assert(hook.thrown == 1, s"task 0 of batch $at threw ${hook.thrown} times") }
    )
  }

  for (strategy <- strategies) test(s"F2 the batch fails after its reader finished ($strategy)") {
    val topic = prepare()
    val at    = failureBatch(s"F2/$strategy")
    val hook  = new FailBatchOnce(at)
    testStream(topic.queryWith(hook, strategy, cellOptions: _*))(
      AddRecords(topic, 4000),
      StartStream(),
      ExpectFailure("injected F2"),
      StartStream(), // the restart runs the failed batch again from its offset log
      CheckLanded(4000)
    )
  }

  for (strategy <- strategies) test(s"F8 foreachBatch runs two actions on the batch ($strategy)") {
    val topic = prepare()
    val hook  = new ReadTwice
    testStream(topic.queryWith(hook, strategy, cellOptions: _*))(
      AddRecords(topic, 4000),
      StartStream(),
      CheckLanded(4000),
      Assert("every read of a batch returned the same rows") { _ => assert(hook.mismatches.isEmpty, hook.mismatches) }
    )
  }

  for (strategy <- exactlyOnce) test(s"F10 a poison record fails its batch three times, then the fix is deployed ($strategy)") {
    val topic     = prepare()
    val poison    = (math.abs(s"F10/$strategy".hashCode) % 4000).toString
    val hook      = new PoisonRecord(poison, times = 3)
    val failedRun = Seq(StartStream(), ExpectFailure("injected F10"))
    testStream(topic.queryWith(hook, strategy, cellOptions: _*))(
      (AddRecords(topic, 4000) +: (failedRun ++ failedRun ++ failedRun)) ++ Seq(StartStream(), CheckLanded(4000)): _*
    )
  }

  for (strategy <- strategies) test(s"F11 the query is stopped and started five times in a row ($strategy)") {
    val topic = prepare()
    val oneBatch = Seq(
      StartStream(),
      // Each run stops after its first batch with records, or at once when everything landed (as the
      // chaos cell's runs do: 2000 records take about three batches of 800).
      Assert("one more batch with records, or everything landed") { q =>
        val before = q.batchesWithRecords.size
        eventually(120.seconds, "a batch with records")(q.batchesWithRecords.size > before || q.sink.distinctKeys >= 2000)
      },
      StopStream
    )
    testStream(topic.queryWith(BatchHook.none, strategy, cellOptions: _*))(
      (AddRecords(topic, 2000) +: Seq.fill(5)(oneBatch).flatten) ++ Seq(StartStream(), CheckLanded(2000)): _*
    )
  }
}

/**
 * F1: in batch `at`, once, the first attempt of read task 0 throws midway (a UDF in the reading stage).
 * `token` names the test: the UDF counts its throws under it (tasks run in this JVM in local mode).
 */
final class FailReadTaskOnce(at: Long, token: String) extends BatchHook {
  private val armed = new AtomicBoolean(true)
  override def read(rows: DataFrame, batchId: Long): DataFrame =
    if (batchId == at && armed.getAndSet(false)) rows.withColumn("key", FailReadTaskOnce.firstAttemptOfTask0(col("key"), lit(token)))
    else rows
  def thrown: Int = FailReadTaskOnce.thrown.getOrDefault(token, 0)
}

object FailReadTaskOnce {
  private val thrown = new ConcurrentHashMap[String, Int]()
  // Outside the class, so that the UDF's closure serializes without it.
  val firstAttemptOfTask0 = udf { (key: String, token: String) =>
    val task = TaskContext.get()
    if (task != null && task.partitionId() == 0 && task.attemptNumber() == 0) {
      thrown.merge(token, 1, _ + _)
      throw new RuntimeException("injected F1: read task fails midway")
    }
    key
  }
}

/** F2: batch `at` fails once, after the sink wrote it. */
final class FailBatchOnce(at: Long) extends BatchHook {
  private val armed = new AtomicBoolean(true)
  override def afterWrite(batchId: Long): Unit =
    if (batchId == at && armed.getAndSet(false)) throw new RuntimeException("injected F2: the batch fails after its reader finished")
}

/**
 * F8: two actions on each batch. The first acquires (or replays the acquisition log), the second
 * replays it: both must return the same rows in the same order.
 */
final class ReadTwice extends BatchHook {
  val mismatches = new ConcurrentLinkedQueue[String]()
  override def read(rows: DataFrame, batchId: Long): DataFrame = {
    val first  = rows.collect().toSeq
    val second = rows.collect().toSeq
    if (first != second) mismatches.add(s"batch $batchId: ${first.size} rows, then ${second.size} (or another order)")
    rows
  }
}

/** F10: a batch that holds the record with `key` fails, `times` times (until "the fix is deployed"). */
final class PoisonRecord(key: String, times: Int) extends BatchHook {
  private val failures = new AtomicInteger()
  override def read(rows: DataFrame, batchId: Long): DataFrame = {
    if (failures.get < times && !rows.filter(col("key") === key).isEmpty) {
      failures.incrementAndGet()
      throw new RuntimeException(s"injected F10: poison record $key fails its batch")
    }
    rows
  }
}
