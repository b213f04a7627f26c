package io.github.kafkashare.it.stream

import java.nio.file.Files

import scala.concurrent.duration._
import scala.jdk.CollectionConverters._
import scala.util.Using

import org.apache.spark.sql.streaming.Trigger

/** Promise 8 (progress) and the source's other behaviour, against a real broker in a real Spark session. */
class SourceBehaviourSuite extends ShareStreamTest {

  test("an idle source runs no batches") {
    val topic  = prepare()
    var before = 0
    testStream(topic.query("checkpoint-dedup"))(
      AddRecords(topic, 500),
      StartStream(),
      CheckLanded(500),
      // After the last records one more batch runs and finds nothing (a consumer cannot know without
      // asking). Count from its end.
      Assert("a batch found nothing") { q =>
        eventually(60.seconds, "a batch without records")(q.progress.lastOption.exists(_.numInputRows == 0))
        before = q.committedBatches
      },
      // 20 s: longer than the lock duration, after which a probe would run if there were holes.
      Assert("no batch ran for 20 s") { q =>
        Thread.sleep(20000)
        // Commit log files, not progress events: Spark reports an idle query every 10 s under the next batch id.
        assert(q.committedBatches == before, s"${q.committedBatches - before} batches ran while the source was idle")
      }
    )
  }

  test("parallelism auto: a backlog gets the most read tasks, a trickle after it one; nothing lost or doubled") {
    val topic   = prepare()
    val trickle = (0 until 4).flatMap(i => Seq(AddRecords(topic, 20, firstKey = 6000 + 20 * i), CheckLanded(6020 + 20 * i)))
    testStream(topic.query("checkpoint-dedup", "kafka.share.parallelism" -> "auto", "maxRecordsPerTrigger" -> "1000"))(
      Seq(AddRecords(topic, 6000), StartStream(), CheckLanded(6000)) ++ trickle ++ Seq(
        Assert("the most read tasks with the backlog (the session's 4 task slots), one after it, each change with its reason") { q =>
          // The group's first batch sees no backlog (a group without state has none yet): the fewest.
          val counts  = q.batchesWithRecords.map(_.sources.head.metrics.get("parallelism").toInt)
          val reasons = q.progress.flatMap(p => Option(p.sources.head.metrics.get("parallelismReason")))
          assert(counts.max == 4 && counts.last == 1, s"read tasks by batch: $counts")
          assert(reasons.exists(r => r.startsWith("4") && r.contains("the maximum") && r.contains("a backlog of")), reasons)
          assert(reasons.exists(_.contains("down after 3 batches")), reasons)
        }
      ): _*
    )
  }

  test("Trigger.AvailableNow ends once everything is read") {
    val topic = prepare()
    testStream(topic.query("checkpoint-dedup"))(
      AddRecords(topic, 2000),
      StartStream(Trigger.AvailableNow()),
      AwaitTermination(),
      CheckLanded(2000)
    )
  }

  test("maxRecordsPerTrigger bounds every batch, and the rest of a poll waits acquired") {
    // A lock long enough that a first batch slowed down by a loaded machine does not age the carry past
    // the pool's limit (half a lock), where it is handed back to the group: correct (operations.md), but
    // it spends a delivery attempt, which this test counts.
    val topic = prepare(lockMs = 60000)
    testStream(topic.query("checkpoint-dedup", "maxRecordsPerTrigger" -> "300"))(
      AddRecords(topic, 2000),
      StartStream(),
      CheckLanded(2000),
      Assert("batches of at most 300, each record delivered once") { q =>
        val sizes = q.batchesWithRecords.map(_.numInputRows)
        assert(sizes.nonEmpty && sizes.max <= 300 && q.sink.batchSizes.max <= 300, s"read $sizes, landed ${q.sink.batchSizes}")
        // A poll takes more than a task's share (whole record batches); the rest waits for the next
        // task, acquired, instead of going back to the group and coming again with its count raised.
        val counts = q.progress.map(_.sources.head.metrics.get("lastBatchMaxDeliveryCount").toInt)
        assert(counts.max == 1, counts)
      }
    )
  }

  test("small batches fetch no more than they take (two-phase-commit)") {
    // Seen failing: with Kafka's default max.poll.records (500) each consumer acquired a whole
    // partition's fetch (1 MB, about 250 of these 4 KB records) for a task that takes 10. The rest
    // waited locked, aged past half a lock, went back to the group and came again with delivery count 2:
    // a delivery attempt spent on records nobody read, which crashes and restarts multiply (records
    // then reach the group's limit, where brokers hand them out one at a time).
    val topic = prepare()
    testStream(topic.query("two-phase-commit", "maxRecordsPerTrigger" -> "20"))(
      AddRecords(topic, 600, valueBytes = 4000),
      StartStream(),
      CheckLanded(600, within = 300.seconds),
      Assert("each record delivered once, none handed back") { q =>
        val counts = q.progress.map(_.sources.head.metrics.get("lastBatchMaxDeliveryCount").toInt)
        assert(counts.max == 1, s"delivery counts by batch: $counts")
        assert(q.metrics("recordsReleasedTotal") == "0", q.metrics)
      }
    )
  }

  test("a backlog is read in several polls per task") {
    val topic = prepare()
    testStream(topic.query("checkpoint-dedup", "kafka.max.poll.records" -> "100"))(
      AddRecords(topic, 3000),
      StartStream(),
      CheckLanded(3000),
      Assert("log parts per poll, batches above two polls") { q =>
        // Each poll a task pins is one part of its log entry: <task> first, then <task>.1, <task>.2 ...
        val parts = Using.resource(Files.walk(q.checkpoint.resolve("sources/0/acquisitions"))) { files =>
          files.iterator.asScala.filter(Files.isRegularFile(_)).map(_.getFileName.toString).filterNot(_.startsWith(".")).toSeq
        }
        assert(parts.exists(_.contains(".")), parts)
        // Two tasks, 100 records a poll: a batch above 200 records took several polls in one task.
        assert(q.sink.batchSizes.max > 200, q.sink.batchSizes)
      }
    )
  }

  test("one partition is read by several consumers at once") {
    val topic = prepare(partitions = 1)
    testStream(topic.query("checkpoint-dedup", "kafka.share.parallelism" -> "4", "kafka.max.poll.records" -> "200"))(
      AddRecords(topic, 20000),
      StartStream(),
      CheckLanded(20000),
      // In a consumer group one partition has one reader. Which of the four share consumers get records
      // is the broker's choice: CI saw two of them take all 20,000, also with all four joined first.
      Assert("more than one task emitted records") { q =>
        val perTask = q.sink.rows.groupBy(_.task).view.mapValues(_.size).toMap
        assert(perTask.count(_._2 > 0) >= 2, perTask)
      }
    )
  }

  test("without startingOffsets the group's own share.auto.offset.reset applies") {
    // Seen failing: the source set the group to its default, latest, when the group had no state yet,
    // overriding what its owner had configured, and skipped everything written before the query.
    val topic = prepare()
    topic.kafka.readFromEarliest(topic.group)
    val byDefault = topic.query("checkpoint-dedup")
    val query     = new ShareQuery(SharedSpark.session, byDefault.options - "startingOffsets", byDefault.checkpoint)
    testStream(query)(
      AddRecords(topic, 300),
      StartStream(),
      CheckLanded(300)
    )
  }

  test("subscribePattern reads every matching topic and no other") {
    val topic   = prepare(partitions = 1)
    val prefix  = fresh("pattern")
    val matched = Seq(s"$prefix-a", s"$prefix-b")
    (matched :+ s"other-$prefix-c").foreach { t => // other-...: matched by a search, not by the whole name
      topic.kafka.createTopic(t, 1)
      topic.kafka.produce(t, 300)
    }
    testStream(topic.patternQuery(s"$prefix-.*", "checkpoint-dedup"))(
      StartStream(),
      Assert("every record of the two matching topics, once") { q =>
        eventually(150.seconds, "600 rows") { q.query.exception.foreach(e => throw e); q.sink.rows.size >= 600 }
        val rows = q.sink.rows
        assert(rows.map(_.topic).toSet == matched.toSet, q.describe)
        // Keys repeat across the two topics: 300 distinct keys per topic.
        assert(rows.size == 600 && rows.map(r => (r.topic, r.key)).distinct.size == 600, q.describe)
      }
    )
  }

  test(s"the backlog metric works on the oldest broker the build fetches [Kafka ${SharedBrokers.versions.head}]") {
    // It needs only ListOffsets and the group's start offsets (DescribeShareGroupOffsets), both in Kafka 4.1.
    val topic = prepare(broker = SharedBrokers.of(SharedBrokers.versions.head), lockMs = 60000)
    testStream(topic.query("checkpoint-dedup", "maxRecordsPerTrigger" -> "100"))(
      AddRecords(topic, 500),
      StartStream(),
      CheckLanded(500),
      Assert("the backlog shows what is left, then 0") { q =>
        def totals = q.progress.map(_.sources.head.metrics.asScala).flatMap(_.get("backlogRecords")).map(_.toLong)
        eventually(60.seconds, "a progress with backlog 0 after everything landed")(totals.lastOption.contains(0L))
        assert(totals.max > 0, s"the backlog never showed what was left: $totals")
      }
    )
  }

  test("query progress reports the source metrics") {
    // A long lock: the pool keeps a consumer whose carry is younger than half of it, however slow the machine.
    val topic = prepare(lockMs = 60000)
    testStream(topic.query("two-phase-commit", "maxRecordsPerTrigger" -> "100"))(
      AddRecords(topic, 500),
      StartStream(),
      CheckLanded(500),
      Assert("the metrics") { q =>
        val metrics = q.metrics
        val expected = Set(
          "lastBatchRecordsAcquired",
          "lastBatchMaxDeliveryCount",
          "pinnedRanges",
          "parallelism",
          "lockDurationMs",
          "recordsAcquiredTotal",
          "recordsAcceptedTotal",
          "recordsReleasedTotal",
          "recordsReplayedTotal",
          "redeliveriesDroppedTotal",
          "consumersCreatedTotal"
        )
        assert(expected.subsetOf(metrics.keySet), metrics)
        assert(metrics("parallelism") == "2" && metrics("lockDurationMs") == "60000", metrics)
        assert(metrics("recordsAcquiredTotal").toLong >= 500, metrics)
        // The pool hands the first batch's two consumers to every later batch (two-phase-commit gives
        // them back at the commit, before the next batch is planned): 2, not 2 per batch (12 for six).
        // Up to two more are allowed: a task that waited its limit (1 s) for a consumer still held by the
        // commit watcher creates one (suites share the machine with three other suites; 4 seen).
        assert(q.sink.batchSizes.size >= 4, q.sink.batchSizes)
        assert(Set("2", "3", "4")(metrics("consumersCreatedTotal")), metrics)
      },
      Assert("the backlog drains, batch by batch, to 0") { q =>
        def backlogs = q.progress.map(_.sources.head.metrics.asScala).filter(_.contains("backlogRecords"))
        // The batch after the last one with records plans against an empty backlog.
        eventually(60.seconds, "a progress with backlog 0 after everything landed")(backlogs.lastOption.exists(_("backlogRecords") == "0"))
        val totals = backlogs.map(_("backlogRecords").toLong)
        info(s"backlog at each batch: ${totals.mkString(", ")}")
        // Partitions the group has not read yet count 0 (where it starts there is its reset policy), so the
        // first batches see part of it; it peaks below the 500 produced and ends at 0.
        assert(totals.max > 0 && totals.max < 500, s"the backlog never showed what was left: $totals")
        assert(backlogs.exists(_("backlogRecordsByTopic").startsWith(s"${topic.topic}=")), backlogs.last)
        val changes = backlogs.map(_("backlogChangeSinceLastBatch").toLong)
        assert(changes.exists(_ < 0), s"no batch reported a shrinking backlog: $changes")
      }
    )
  }

  for (strategy <- Seq("checkpoint-dedup", "two-phase-commit"))
    test(s"a stopped query leaves the rest to the group at once ($strategy)") {
      val topic = prepare()
      // A long trigger interval, so that the query stops after its first batch, between batches.
      testStream(topic.query(strategy, "maxRecordsPerTrigger" -> "500"))(
        AddRecords(topic, 5000),
        StartStream(Trigger.ProcessingTime(60000)),
        Assert("a first batch") { q =>
          eventually(120.seconds, "a batch with records")(q.batchesWithRecords.nonEmpty)
        },
        StopStream,
        Assert("another member gets the rest before the locks (15 s) expire") { q =>
          // What the batches read, by their progress, is what landed: nothing read and dropped.
          val sizes = q.batchesWithRecords.map(_.numInputRows)
          assert(sizes.nonEmpty && sizes.forall(_ <= 500), sizes)
          assert(q.sink.distinctKeys == sizes.sum && q.sink.rows.size == sizes.sum, s"read $sizes; ${q.describe}")
          val remaining = 5000 - q.sink.distinctKeys
          // With this JVM (and its pooled consumers) still alive.
          val got = topic.kafka.shareConsume(topic.group, Seq(topic.topic), remaining, timeoutMs = 10000)
          assert(got.size == remaining, s"${got.size} of $remaining")
        }
      )
    }

  test("a query stopped while its read tasks poll logs nothing above INFO") {
    // A lock of its own length: another suite's warnings about a 15 s lock (LockChecksSuite's) are not this query's.
    val lockMs = 60000
    val topic  = prepare(lockMs = lockMs)
    // Full polls (50 of 50) make a task poll again, for up to 10 s: once the 100 records are read, its
    // next poll waits for records inside the client, where the stop's interrupt finds it.
    val query    = topic.query("checkpoint-dedup", "kafka.share.read.duration.ms" -> "10000", "kafka.max.poll.records" -> "50")
    val logStart = java.nio.file.Files.size(TestDirs.connectorLog)
    testStream(query)(
      AddRecords(topic, 100),
      StartStream(),
      Assert("stopped inside a batch, while its tasks poll") { q =>
        eventually(120.seconds, "a batch whose tasks are polling")(q.query.status.isTriggerActive && q.sink.rows.isEmpty)
        Thread.sleep(3000)
        q.query.stop()
        Thread.sleep(2000) // what the killed tasks log on their way out
        val log   = new String(java.nio.file.Files.readAllBytes(TestDirs.connectorLog), java.nio.charset.StandardCharsets.UTF_8)
        val lines = log.substring(logStart.toInt).linesIterator.toSeq
        val loud = lines.filter(l =>
          (l.contains(" WARN ") || l.contains(" ERROR ")) && !QuietAtStop.ignored.exists(l.contains) &&
            !QuietAtStop.aboutAnotherBroker(l, topic.broker.bootstrapServers) &&
            !QuietAtStop.aboutAnotherQuery(l, q.query.id.toString) && !QuietAtStop.aboutAnotherLock(l, lockMs)
        )
        assert(loud.isEmpty, s"logged above INFO at a clean stop:\n${loud.take(10).mkString("\n")}")
      }
    )
  }
}

/** Warnings that are not the source's own at a stop. */
private object QuietAtStop {

  /**
   * The log is the test JVM's, shared by the suites that run beside this one: a line that names
   * another broker's address (a client of a suite whose broker was just killed) is not this query's.
   */
  def aboutAnotherBroker(line: String, bootstrap: String): Boolean =
    """127\.0\.0\.1:\d+""".r.findAllIn(line).exists(_ != bootstrap)

  /** A read task's line about records under a lock of another length than this query's. */
  def aboutAnotherLock(line: String, lockMs: Int): Boolean =
    """of their (\d+) ms lock""".r.findAllMatchIn(line).exists(_.group(1) != lockMs.toString)

  /** A line of another query's stream thread, or about another query (Spark's "Query [id = ...] terminated"). */
  def aboutAnotherQuery(line: String, queryId: String): Boolean =
    """\[id = ([0-9a-f-]{36})""".r.findAllMatchIn(line).exists(_.group(1) != queryId)

  val ignored = Seq(
    "ResolveWriteToStream",
    "ShareConsumerDelegateCreator",
    "ProcessingTimeExecutor: Current batch is falling behind",
    // Spark's own, at a stop inside a batch, whatever the source: the batch's job cancelled, its tasks killed.
    "DAGScheduler: Failed to cancel job group",
    "TaskKilled (Stage cancelled"
  )
}
