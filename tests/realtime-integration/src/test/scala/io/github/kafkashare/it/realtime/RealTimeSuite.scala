package io.github.kafkashare.it.realtime

import java.util.UUID
import java.util.concurrent.ConcurrentHashMap

import scala.concurrent.duration._
import scala.jdk.CollectionConverters._

import io.github.kafkashare.it.stream.{SharedBrokers, TestDirs}
import io.github.kafkashare.testkit.{KafkaBroker, KafkaTestOps}
import org.apache.spark.TaskContext
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.functions.{col, lit, udf}
import org.apache.spark.sql.streaming.{StreamingQuery, Trigger}
import org.scalatest.funsuite.AnyFunSuite

/** This JVM's Spark: the oldest line with real-time mode (spark.realtime in versions.properties). */
object RealTimeSpark {
  lazy val session: SparkSession = SparkSession
    .builder()
    .appName("kafka-share real-time suites")
    // Three real-time queries of two long-running read tasks each; 4 attempts per task, as on a cluster.
    .master("local[6,4]")
    .config("spark.ui.enabled", "false")
    .config("spark.sql.shuffle.partitions", "2")
    // Batches of 2 s (Spark's floor is 5 s): more batch ends, where real time carries and re-runs, per test.
    .config("spark.sql.streaming.realTimeMode.minBatchDuration", "1000")
    .getOrCreate()
}

/**
 * The delivery contract in Spark's real-time mode (docs/internals/real-time-measurements.md), in the test JVM: one query per
 * strategy that real time offers (`none`, `idempotent`, `checkpoint-dedup`), side by side on one topic, each
 * in its own group, writing through a foreach sink that keeps every row (RowLog). Records are produced while
 * the queries run; a failure strikes in the middle of a batch; every record must land in what the sink keeps
 * (RowLog.keptRows), and with checkpoint-dedup none twice. A driver SIGKILLed inside a batch, and an executor,
 * are tests/python/test_real_time.py.
 */
class RealTimeSuite extends AnyFunSuite {

  private val strategies = Seq("none", "idempotent", "checkpoint-dedup")
  private def spark      = RealTimeSpark.session

  /** A query of the test: its strategy, group, sink (the RowLog's name) and checkpoint. */
  private final class Cell(val strategy: String, val topic: String) {
    val group                 = s"rt-$strategy-${UUID.randomUUID().toString.take(8)}"
    val sink                  = s"$topic/$strategy"
    val checkpoint            = TestDirs.create("rt-checkpoint-").toString
    var query: StreamingQuery = _
  }

  private def cells(broker: KafkaBroker, topic: String): Seq[Cell] = strategies.map { strategy =>
    val cell = new Cell(strategy, topic)
    new KafkaTestOps(broker.bootstrapServers).setGroupConfig(
      cell.group,
      Map("share.record.lock.duration.ms" -> "15000", "share.heartbeat.interval.ms" -> "1000")
    )
    cell
  }

  /** Starts (or starts again, on its checkpoint) the cell's real-time query. */
  private def start(cell: Cell, broker: KafkaBroker, trigger: Trigger, parallelism: Int = 2): Unit = {
    val rows = spark.readStream
      .format("kafka-share")
      .option("kafka.bootstrap.servers", broker.bootstrapServers)
      .option("kafka.share.group.id", cell.group)
      .option("subscribe", cell.topic)
      .option("startingOffsets", "earliest")
      .option("kafka.share.exactly.once.strategy", cell.strategy)
      .option("kafka.share.parallelism", parallelism.toString)
      .load()
      .select(InjectedFaults.column(col("key").cast("string"), lit(cell.sink)).as("k"), col("deliveryCount"))
    cell.query = rows.writeStream
      .outputMode("update")
      .option("checkpointLocation", cell.checkpoint)
      .foreach(RowLog.writer(cell.sink))
      .trigger(trigger)
      .start()
  }

  private def batchesStarted(cell: Cell): Long = Option(cell.query.lastProgress).map(_.batchId + 1).getOrElse(0L)

  private def eventually(within: FiniteDuration, what: => String)(condition: => Boolean): Unit = {
    val deadline = within.fromNow
    while (!condition) {
      if (deadline.isOverdue()) fail(s"not within $within: $what")
      Thread.sleep(100)
    }
  }

  /**
   * Runs `failure` while `records` are produced over `seconds`, waits until every record is in every sink, then
   * `settle` more (a record given again after the last one landed counts too: the next batches' carried rows, a
   * redelivery), and counts what each sink kept.
   */
  private def cellsSurvive(
      broker: => KafkaBroker,
      records: Int,
      seconds: Int = 20,
      settle: FiniteDuration = 5.seconds,
      trigger: Trigger = Trigger.RealTime("2 seconds")
  )(
      failure: Seq[Cell] => Unit
  ): Seq[(Cell, Landed)] = {
    val topic = s"rt-orders-${UUID.randomUUID().toString.take(8)}"
    new KafkaTestOps(broker.bootstrapServers).createTopic(topic, 2)
    val all = cells(broker, topic)
    try {
      all.foreach(start(_, broker, trigger))
      @volatile var produced = -1
      val upstream =
        new Thread(() => produced = new KafkaTestOps(broker.bootstrapServers).produceAtRate(topic, records / seconds, seconds))
      upstream.start()
      failure(all)
      upstream.join()
      assert(produced == records, s"the producer wrote $produced of $records records (or failed: see the log)")
      // Until every record is in what the sink keeps: rows count once the attempt that wrote them ended well.
      def kept(c: Cell) = RowLog.keptRows(c.sink).map(_.key).distinct.size
      eventually(120.seconds, s"every record in every sink: ${all.map(c => s"${c.strategy} ${kept(c)}").mkString(", ")}") {
        all.foreach(c => c.query.exception.foreach(e => throw e))
        all.forall(c => kept(c) >= records)
      }
      Thread.sleep(settle.toMillis)
      all.foreach(c => c.query.exception.foreach(e => throw e))
      all.map { c =>
        val landed = Landed.of(c.sink, records)
        info(s"${c.strategy}: $landed (Spark ${spark.version}, Kafka ${broker.version})")
        c -> landed
      }
    } finally all.foreach(c => Option(c.query).foreach(_.stop()))
  }

  private def assertDelivered(results: Seq[(Cell, Landed)]): Unit = results.foreach { case (cell, landed) =>
    assert(landed.lost == 0 && landed.landed == landed.produced, s"${cell.strategy}: $landed")
    if (cell.strategy == "checkpoint-dedup") assert(landed.doubled == 0, s"${cell.strategy}: $landed")
  }

  test("runs on the Spark of spark.realtime, the oldest line with real-time mode") {
    assert(spark.version == sys.props("kafkashare.spark.realtime"))
  }

  test("a read task fails midway and Spark retries it, then the queries stop inside a batch and start again (floor broker)") {
    val floor = SharedBrokers.of(SharedBrokers.versions.head)
    // Where each query's retry starts or stops against Spark's end of the batch (InjectedFaults.Timing): the two
    // ways a retry misses part of the batch are made to happen, not left to the machine's speed.
    val timings = Map(
      "none"             -> InjectedFaults.RetryStartsLate,
      "idempotent"       -> InjectedFaults.RetryInTime,
      "checkpoint-dedup" -> InjectedFaults.RetryCutShort
    )
    val trigger = Trigger.RealTime(s"${InjectedFaults.BatchMs} milliseconds")
    // Records flow for 40 s: on a loaded machine the first rows can come 8 s in, after half of a 20 s stream, and a
    // query whose task 0 then got too few rows early in a batch was never struck (a CI run on 2 Dec).
    val results = cellsSurvive(floor, records = 4800, seconds = 40, trigger = trigger) { all =>
      // Read task 0 throws at its 21st row of a batch, once per query, early in a batch where records flow (the first
      // records can take a few batches): each retry then has most of the batch left, unless the injected wait takes it.
      eventually(60.seconds, "rows in every query")(all.forall(c => RowLog.distinctKeys(c.sink) > 0))
      all.foreach(c => InjectedFaults.arm(c.sink, fromBatch = batchesStarted(c) + 1, afterRows = 20, timings(c.strategy)))
      eventually(60.seconds, "the injected failure in every query")(all.forall(c => InjectedFaults.struckIn(c.sink).isDefined))
      eventually(60.seconds, "the batch after it running in every query")(
        all.forall(c => batchesStarted(c) >= InjectedFaults.struckIn(c.sink).get + 2)
      )
      Thread.sleep(700) // inside that batch
      all.foreach(_.query.stop())
      all.foreach(start(_, floor, trigger))
    }
    assertDelivered(results)
    results.foreach { case (cell, _) => assertRetryReplays(cell, timings(cell.strategy)) }
  }

  /**
   * The retry of the failed task emits what the failed attempt emitted first, in the same order, until Spark's
   * end of the batch stops it: all of it when it starts in time, a prefix when the end cuts it short, nothing when
   * it starts after the end. The next batch emits the rest first: a sink that keeps one attempt per task and batch
   * holds each of those records once, in the failed task's batch or the next.
   */
  private def assertRetryReplays(cell: Cell, timing: InjectedFaults.Timing): Unit = {
    val batch  = InjectedFaults.struckIn(cell.sink).get
    val ofTask = RowLog.rows(cell.sink).filter(r => r.epoch == batch && r.partition == InjectedFaults.Task)
    val failed = ofTask.filter(_.attempt == 0).map(_.key)
    val retry  = ofTask.filter(_.attempt == 1).map(_.key)
    val what   = s"${cell.strategy} ($timing): the retry emitted ${retry.take(25)} after the failed attempt's $failed"
    assert(failed.size == 20, s"${cell.strategy}: the failed attempt emitted ${failed.size} rows, not 20")
    val replayed = retry.take(failed.size)
    assert(replayed == failed.take(replayed.size), what)
    timing match {
      case InjectedFaults.RetryInTime     => assert(replayed == failed, what)
      case InjectedFaults.RetryCutShort   => assert(retry == failed.take(1), what)
      case InjectedFaults.RetryStartsLate => assert(retry.isEmpty, what)
    }
    val kept = RowLog.keptRows(cell.sink).filter(r => failed.contains(r.key))
    assert(kept.map(_.key).distinct.size == failed.size, s"${cell.strategy}: of the failed attempt's rows, ${kept.map(_.key)} kept")
    val next = failed.drop(replayed.size).toSet
    assert(
      kept.forall(r => r.epoch == (if (next(r.key)) batch + 1 else batch)),
      s"${cell.strategy}: the rows the retry did not emit come in the next batch: ${kept.map(r => r.key -> r.epoch)}"
    )
    if (cell.strategy == "checkpoint-dedup") assert(kept.size == failed.size, s"${cell.strategy}: doubled ${kept.map(_.key)}")
    info(s"${cell.strategy}: batch $batch's failed attempt emitted ${failed.size} row(s), its retry ($timing) ${retry.size}")
  }

  test("a query stopped inside a real-time batch goes on in micro-batches, then in real time again (newest broker)") {
    val newest = SharedBrokers.newest
    val results = cellsSurvive(newest, records = 2400) { all =>
      def switchTo(trigger: Trigger, insideABatch: Boolean): Unit = {
        eventually(60.seconds, "two batches of this run in every query")(all.forall(_.query.recentProgress.length >= 2))
        if (insideABatch) {
          // A task of each query stops at its 20th row from now and waits there: the stop falls inside a batch
          // that emitted rows, whatever the machine's speed.
          all.foreach(c => InjectedFaults.holdAfter(c.sink, rows = 20))
          eventually(60.seconds, "a read task of every query held inside a batch")(all.forall(c => InjectedFaults.holding(c.sink)))
        }
        all.foreach(_.query.stop())
        all.foreach(start(_, newest, trigger))
      }
      switchTo(Trigger.ProcessingTime(500), insideABatch = true)
      switchTo(Trigger.RealTime("2 seconds"), insideABatch = false)
    }
    assertDelivered(results)
    // The first stop cut a real-time batch short: rows of a run Spark did not keep, emitted again after it.
    assert(results.map(_._2.fromFailedAttempts).sum > 0, "no stop fell inside a batch that had emitted rows")
  }

  test("batches longer than the lock, three read tasks on one partition: no lock expires, every task reads (floor broker)") {
    val floor = SharedBrokers.of(SharedBrokers.versions.head)
    val topic = s"rt-one-partition-${UUID.randomUUID().toString.take(8)}"
    new KafkaTestOps(floor.bootstrapServers).createTopic(topic, 1)
    val cell    = cells(floor, topic).find(_.strategy == "checkpoint-dedup").get // locks of 15 s
    val records = 2000
    try {
      start(cell, floor, Trigger.RealTime("20 seconds"), parallelism = 3)
      new KafkaTestOps(floor.bootstrapServers).produceAtRate(topic, records / 20, 20)
      eventually(90.seconds, s"every record kept: ${RowLog.keptRows(cell.sink).map(_.key).distinct.size}") {
        cell.query.exception.foreach(e => throw e)
        RowLog.keptRows(cell.sink).map(_.key).distinct.size >= records
      }
      // The time lag of a real-time batch: its records' ages when emitted (RealTimeRecords' own path), in its progress.
      eventually(60.seconds, "the progress of a real-time batch that read records") {
        cell.query.recentProgress.exists(_.numInputRows > 0)
      }
      val metrics = cell.query.recentProgress.find(_.numInputRows > 0).get.sources.head.metrics.asScala
      info(s"the first real-time batch with records: ${metrics.view.filterKeys(_.contains("Age")).toMap}")
      val (maxAge, p99) = (metrics("emittedAgeMaxMs").toLong, metrics("emittedAgeP99Ms").toLong)
      assert(maxAge > 0 && p99 > 0, s"emittedAgeMaxMs $maxAge, emittedAgeP99Ms $p99")
    } finally Option(cell.query).foreach(_.stop())
    val landed = Landed.of(cell.sink, records)
    val kept   = RowLog.keptRows(cell.sink)
    info(s"${cell.strategy}: $landed; rows by read task ${kept.groupBy(_.partition).view.mapValues(_.size).toMap}")
    assert(landed.lost == 0 && landed.doubled == 0, landed)
    // Records are ACCEPTed as they are pinned: none waits out its 15 s lock in a 20 s batch and comes again.
    assert(kept.forall(_.deliveryCount == 1), s"delivery counts ${kept.groupBy(_.deliveryCount).view.mapValues(_.size).toMap}")
    assert(kept.map(_.partition).distinct.sorted == Seq(0, 1, 2), "each of the three read tasks read from the one partition")
  }

  test("the broker is killed inside a real-time batch and started again (newest broker)") {
    val version = SharedBrokers.versions.last
    // Records whose ACCEPT the dead broker never got come back when their 15 s lock ends: counted after that.
    val results = cellsSurvive(SharedBrokers.of(version), records = 2400, settle = 16.seconds) { all =>
      eventually(60.seconds, "batch 2 of every query running, with rows")(
        all.forall(c => batchesStarted(c) >= 2 && RowLog.distinctKeys(c.sink) > 0)
      )
      Thread.sleep(500)
      SharedBrokers.of(version).kill()
      Thread.sleep(3000)
      SharedBrokers.of(version) // starts it again: same data, same port
    }
    assertDelivered(results)
  }
}

/**
 * Fails read task `Task` once, at its row `afterRows` + 1 of a batch from `fromBatch` on, early in that batch, in
 * the query whose sink is named, at a [[InjectedFaults.Timing]]; or holds the task that reaches the query's row `rows` + 1 after holdAfter, until the
 * query stops (a UDF in the reading stage: tasks run in this JVM, so the test arms it and reads whether it struck).
 */
object InjectedFaults {
  val Task = 0

  /** The duration of the retry test's batches. */
  val BatchMs = 4000L
  // The failure strikes only this soon after its attempt started (with the batch: Spark starts a real-time batch's
  // tasks at once), so at least BatchMs less this is left to the retry.
  private val EarlyInTheBatchMs = 2000L
  // Longer than a whole batch: a wait this long ends past the batch's end.
  private val PastTheBatchEndMs = BatchMs + 1000L

  /** Where the retry falls against Spark's end of the batch. */
  sealed trait Timing

  /** The failed attempt throws at once: its retry starts with most of the batch left. */
  case object RetryInTime extends Timing

  /** The retry's first row takes past the batch's end (a slow sink, a stalled thread): Spark ends the retry there. */
  case object RetryCutShort extends Timing

  /** The failed attempt throws only after the batch's end: Spark starts its retry with no time left. */
  case object RetryStartsLate extends Timing

  private final case class Armed(fromBatch: Long, afterRows: Int, timing: Timing)
  private val armed  = new ConcurrentHashMap[String, Armed]()
  private val seen   = new ConcurrentHashMap[(String, Long), Integer]() // rows of task `Task`'s first attempt, per batch
  private val struck = new ConcurrentHashMap[String, java.lang.Long]()  // the batch where the failure struck
  private val slowed = ConcurrentHashMap.newKeySet[String]()

  def arm(name: String, fromBatch: Long, afterRows: Int, timing: Timing): Unit =
    armed.put(name, Armed(fromBatch, afterRows, timing))
  def struckIn(name: String): Option[Long] = Option(struck.get(name)).map(_.longValue)

  private val holdsLeft = new ConcurrentHashMap[String, Integer]()
  private val holds     = ConcurrentHashMap.newKeySet[String]()

  def holdAfter(name: String, rows: Int): Unit = holdsLeft.put(name, rows)
  def holding(name: String): Boolean           = holds.contains(name)

  /** Waits (up to 60 s) until the task is interrupted: the query stopped. Once per hold. */
  private def holdIfDue(name: String): Unit =
    if (Option(holdsLeft.computeIfPresent(name, (_, left) => left - 1)).exists(_ == -1)) {
      holdsLeft.remove(name)
      holds.add(name)
      Thread.sleep(60000)
    }

  val column = udf { (key: String, name: String) =>
    holdIfDue(name)
    val task = TaskContext.get()
    Option(armed.get(name)).foreach { at =>
      val batch = Option(task.getLocalProperty("streaming.sql.batchId")).map(_.toLong).getOrElse(-1L)
      if (batch >= at.fromBatch && task.partitionId() == Task) {
        val first = task.attemptNumber() == 0 && !struck.containsKey(name)
        // Looked up only at the row where the failure is due.
        def early = RowLog.writerStart(name, batch, Task, attempt = 0).exists(System.currentTimeMillis < _ + EarlyInTheBatchMs)
        if (
          first && seen.merge((name, batch), 1, (a, b) => a + b) == at.afterRows + 1 && early && struck.putIfAbsent(name, batch) == null
        ) {
          if (at.timing == RetryStartsLate) Thread.sleep(PastTheBatchEndMs)
          throw new RuntimeException(s"injected: read task $Task of batch $batch fails midway")
        }
        val retryOfStruck = task.attemptNumber() == 1 && struckIn(name).contains(batch)
        if (retryOfStruck && at.timing == RetryCutShort && slowed.add(name)) Thread.sleep(PastTheBatchEndMs)
      }
    }
    key
  }
}
