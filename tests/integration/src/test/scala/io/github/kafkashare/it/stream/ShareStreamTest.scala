package io.github.kafkashare.it.stream

import java.util.UUID

import scala.concurrent.duration._

import io.github.kafkashare.testkit.KafkaBroker
import org.apache.spark.sql.{DataFrame, SparkSession}
import org.scalatest.{Failed, Outcome}
import org.scalatest.funsuite.AnyFunSuite

/** The Spark session of the test JVM, shared by every stream suite (queries and groups are per test). */
object SharedSpark {
  lazy val session: SparkSession = SparkSession
    .builder()
    .appName("kafka-share stream suites")
    .master("local[4,4]") // 4 concurrent tasks for parallelism 4; 4 attempts per task, as on a cluster
    .config("spark.sql.shuffle.partitions", "2")
    .config("spark.ui.enabled", "false")
    .config("spark.sql.streaming.numRecentProgressUpdates", "1000")
    // A checkpoint on a slow store, for the tests that need one (Prepared.queryOn).
    .config(s"spark.hadoop.fs.${SlowLocalFileSystem.Scheme}.impl", classOf[SlowLocalFileSystem].getName)
    .config(s"spark.hadoop.fs.AbstractFileSystem.${SlowLocalFileSystem.Scheme}.impl", classOf[SlowLocalFs].getName)
    // The source's metrics plugin and Spark's JMX sink, as an operator sets them (MetricsSystemSuite reads them).
    .config("spark.plugins", "io.github.kafkashare.spark.KafkaSharePlugin")
    .config("spark.metrics.conf.*.sink.jmx.class", "org.apache.spark.metrics.sink.JmxSink")
    .getOrCreate()
}

/**
 * In-JVM end-to-end tests of the source in the style of Spark's own `KafkaMicroBatchSourceSuite`: a real
 * broker (SharedBrokers), a real Spark session (SharedSpark), a fresh topic and group per test, and a
 * test as a list of actions: add records, start, stop, restart from the checkpoint, check what landed.
 */
abstract class ShareStreamTest extends AnyFunSuite {

  protected def spark: SparkSession = SharedSpark.session

  /** A topic or group name no other test (of this or an earlier run on the same broker) uses. */
  protected def fresh(prefix: String): String = s"$prefix-${UUID.randomUUID().toString.take(8)}"

  /**
   * A fresh topic of `partitions` and a group whose locks last `lockMs` (by default the shortest the
   * broker allows, so that what a stopped or failed reader held comes back quickly) and whose members
   * heartbeat every `heartbeatMs`. A new consumer gets its partitions with a heartbeat: the broker's
   * default of 5 s costs every query start and restart that long, so tests use 1 s, and a few keep the
   * default (EveryStrategySuite's `none` tests) so that the usual join stays tested.
   */
  protected def prepare(
      broker: KafkaBroker = SharedBrokers.newest,
      partitions: Int = 2,
      lockMs: Int = 15000,
      heartbeatMs: Int = 1000
  ): Prepared = {
    val prepared = Prepared(broker, fresh("orders"), fresh("spark"))
    prepared.kafka.createTopic(prepared.topic, partitions)
    prepared.kafka.setGroupConfig(
      prepared.group,
      Map("share.record.lock.duration.ms" -> lockMs.toString, "share.heartbeat.interval.ms" -> heartbeatMs.toString)
    )
    prepared
  }

  /** Runs `actions` in order on `query`; a failure names the action and describes the query. */
  protected def testStream(query: ShareQuery)(actions: StreamAction*): Unit =
    try actions.zipWithIndex.foreach { case (action, i) =>
        try run(query, action)
        catch {
          case e: Throwable =>
            val trace = actions.zipWithIndex.map { case (a, j) => (if (j == i) "=> " else "   ") + a }.mkString("\n")
            fail(s"action ${i + 1} failed: ${e.getMessage}\n$trace\nquery: ${query.describe}", e)
        }
      }
    finally
      try query.stop() // whatever happened: a query left running would slow every later test of the JVM
      catch { case e: Exception => info(s"stopping the query: $e") }

  private def run(query: ShareQuery, action: StreamAction): Unit = action match {
    case AddRecords(prepared, count, firstKey, valueBytes) =>
      prepared.kafka.produce(prepared.topic, count, valueBytes, firstKey = firstKey)
    case StartStream(trigger) => query.start(trigger)
    case StopStream           => query.stop()
    case AwaitTermination(within) =>
      assert(query.query.awaitTermination(within.toMillis), s"the query did not end within $within")
      query.query.exception.foreach(e => throw e)
    case CheckLanded(records, within, alsoKeys) => checkLanded(query, (0 until records) ++ alsoKeys, within)
    case ExpectFailure(containing, within) =>
      eventually(within, s"the query failing with '$containing'")(!query.query.isActive)
      val error = query.query.exception.map(e => s"${e.getMessage} ${Option(e.getCause).map(_.toString).getOrElse("")}")
      assert(error.exists(_.contains(containing)), s"ended with ${error.getOrElse("no error")}")
    case a: Assert => a.check(query)
    case ChangeOptions(set, drop, hook) =>
      query.changeOptions(set, drop)
      hook.foreach(query.sink.hook = _)
    case StopInsideBatch(within) => stopInsideBatch(query, within)
  }

  private def stopInsideBatch(query: ShareQuery, within: FiniteDuration): Unit = {
    val usual = query.sink.hook
    val hold  = new HoldInsideBatch(usual)
    query.sink.hook = hold
    try {
      eventually(within, "a batch with records held inside foreachBatch") {
        query.query.exception.foreach(e => throw e)
        hold.holding.isDefined
      }
      query.query.stop()
    } finally query.sink.hook = usual
    val batch = hold.holding.get
    assert(query.sink.rowsOf(batch).isEmpty, s"batch $batch was written before the stop")
    assert(!java.nio.file.Files.exists(query.checkpoint.resolve(s"commits/$batch")), s"batch $batch committed before the stop")
    assert(java.nio.file.Files.exists(query.checkpoint.resolve(s"offsets/$batch")), s"batch $batch has no offset log")
    info(s"stopped inside batch $batch, after it read ${hold.rowsRead} records")
  }

  private def checkLanded(query: ShareQuery, expectedKeys: Seq[Int], within: FiniteDuration): Unit = {
    eventually(within, s"${expectedKeys.size} distinct keys in the sink") {
      query.query.exception.foreach(e => throw e)
      query.sink.distinctKeys >= expectedKeys.size
    }
    // The batch that landed the last rows reports its progress only after it commits.
    eventually(30.seconds, "the progress of the sink's last batch") {
      query.progress.lastOption.exists(_.batchId >= query.sink.lastBatch)
    }
    val rows    = query.sink.rows
    val keys    = rows.map(_.key).toSet
    val missing = expectedKeys.map(_.toString).filterNot(keys)
    val doubled = rows.size - keys.size
    info(
      s"${query.strategiesRun.mkString(" then ")}: produced ${expectedKeys.size} landed ${rows.size} lost ${missing.size} doubled $doubled"
    )
    assert(missing.isEmpty, s"${missing.size} records lost, for example ${missing.take(5).mkString(", ")}")
    assert(keys.size == expectedKeys.size, s"keys that were never produced landed: ${(keys -- expectedKeys.map(_.toString)).take(5)}")
    // Exactly once where every run's strategy promises it (a restart may have changed the strategy).
    val exactlyOnce = (query.strategiesRun :+ query.strategy).forall(Set("checkpoint-dedup", "two-phase-commit"))
    if (exactlyOnce) assert(doubled == 0, s"$doubled records landed twice")
  }

  /** Waits until `condition` holds, checking every 200 ms; fails naming `what`. */
  protected def eventually(within: FiniteDuration, what: String)(condition: => Boolean): Unit = {
    val deadline = within.fromNow
    while (!condition) {
      if (deadline.isOverdue()) fail(s"not within $within: $what")
      Thread.sleep(200)
    }
  }

  override def withFixture(test: NoArgTest): Outcome = super.withFixture(test) match {
    case failed: Failed =>
      SharedBrokers.running.foreach(b => info(s"--- last lines of ${b.logFile} ---\n${b.logTail()}"))
      failed
    case other => other
  }
}

/**
 * Inside the first batch with records: reads the batch (after what `usual` does: explicit decisions), then
 * waits until the query's stop interrupts it, so the batch is neither written nor committed.
 */
final class HoldInsideBatch(usual: BatchHook) extends BatchHook {
  @volatile var holding: Option[Long] = None
  @volatile var rowsRead: Long        = 0
  override def read(rows: DataFrame, batchId: Long): DataFrame = {
    val decided = usual.read(rows, batchId)
    val read    = decided.count()
    if (read > 0 && holding.isEmpty) {
      rowsRead = read
      holding = Some(batchId)
      Thread.sleep(600000) // until the stop interrupts the stream thread
    }
    decided
  }
}
