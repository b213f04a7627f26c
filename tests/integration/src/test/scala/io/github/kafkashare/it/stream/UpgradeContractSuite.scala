package io.github.kafkashare.it.stream

import java.nio.file.Files

import scala.concurrent.duration._

import io.github.kafkashare.testkit.KafkaBroker
import org.apache.spark.sql.streaming.Trigger
import org.scalatest.BeforeAndAfterAll

/**
 * The upgrade contract (docs/guide/upgrading.md): what may change when a query restarts on its checkpoint,
 * each change made to a running query's settings, on the same checkpoint and the same sink, with records
 * produced before and after it. Where both runs' strategies promise exactly once: lost 0 and doubled 0;
 * otherwise lost 0. Most changes follow a stop inside a batch (its records read, the batch neither written
 * nor committed), which the restart must run again under the new settings. Then a checkpoint written by this
 * release (the fixture under src/test/resources/checkpoints/) resumes with the current build.
 *
 * Elsewhere: another group (QueryShapesSuite, "a checkpoint of another group is refused"), another cluster
 * (CheckpointDamageSuite, "offset of another Kafka cluster"), real time to micro-batch and back
 * (RealTimeSuite, "a query stopped inside a real-time batch goes on in micro-batches").
 */
class UpgradeContractSuite extends ShareStreamTest with BeforeAndAfterAll {

  private val strategy = "kafka.share.exactly.once.strategy"
  private val small    = Seq("maxRecordsPerTrigger" -> "200")

  /** A query of `from` stopped inside a batch, restarted with `to`, records produced before and after. */
  private def restartInsideABatch(from: Seq[(String, String)], to: Map[String, String]): Unit = {
    val topic = prepare()
    testStream(topic.query("none", from ++ small: _*))(
      AddRecords(topic, 1000),
      StartStream(),
      StopInsideBatch(),
      ChangeOptions(to),
      AddRecords(topic, 500, firstKey = 1000),
      StartStream(),
      CheckLanded(1500)
    )
  }

  for ((from, to) <- Seq("checkpoint-dedup" -> "two-phase-commit", "two-phase-commit" -> "checkpoint-dedup", "none" -> "checkpoint-dedup"))
    test(s"the strategy changes from $from to $to after a stop inside a batch") {
      restartInsideABatch(Seq(strategy -> from), Map(strategy -> to))
    }

  test("the strategy changes from checkpoint-dedup to none between batches") {
    val topic = prepare()
    testStream(topic.query("checkpoint-dedup", small: _*))(
      AddRecords(topic, 600),
      StartStream(),
      CheckLanded(600),
      StopStream,
      ChangeOptions(Map(strategy -> "none")),
      AddRecords(topic, 400, firstKey = 600),
      StartStream(),
      CheckLanded(1000)
    )
  }

  for ((from, to) <- Seq(2 -> 4, 4 -> 1))
    test(s"kafka.share.parallelism changes from $from to $to after a stop inside a batch (two-phase-commit)") {
      restartInsideABatch(
        Seq(strategy                  -> "two-phase-commit", "kafka.share.parallelism" -> from.toString),
        Map("kafka.share.parallelism" -> to.toString)
      )
    }

  test("a topic is added after a stop inside a batch, then the first topic is dropped (checkpoint-dedup)") {
    val first  = prepare()
    val second = first.copy(topic = fresh("added"))
    second.kafka.createTopic(second.topic, 2)
    val secondKeys = 100000 until 100400
    testStream(first.query("checkpoint-dedup", small: _*))(
      AddRecords(first, 600),
      StartStream(),
      StopInsideBatch(),
      ChangeOptions(Map("subscribe" -> s"${first.topic},${second.topic}")),
      AddRecords(second, secondKeys.size, firstKey = secondKeys.start),
      AddRecords(first, 300, firstKey = 600),
      StartStream(),
      CheckLanded(900, alsoKeys = secondKeys),
      StopStream,
      ChangeOptions(Map("subscribe" -> second.topic)),
      AddRecords(first, 200, firstKey = 900), // stays with the group: no longer this query's
      AddRecords(second, 200, firstKey = secondKeys.end),
      StartStream(),
      CheckLanded(900, alsoKeys = secondKeys.start until secondKeys.end + 200),
      Assert("the dropped topic's new records are still the group's, for whoever reads it") { q =>
        val got = first.kafka.shareConsume(first.group, Seq(first.topic), 200, timeoutMs = 30000)
        assert(got.map(_.key).toSet == (900 until 1100).map(_.toString).toSet, s"${got.size} of 200")
      }
    )
  }

  /**
   * A restart in the other acknowledgement mode is refused (RecordedMode): measured without the refusal,
   * explicit to implicit lost the records the last explicit batch had RELEASEd. A new checkpoint on the same
   * group takes over instead, and the two sinks together hold every record once.
   */
  private def modeChangeRefused(
      first: Prepared,
      query: ShareQuery,
      produced: Int,
      to: Map[String, String],
      drop: Set[String],
      hook: BatchHook
  )(setUp: StreamAction*): Unit = {
    testStream(query)(
      (setUp ++ Seq(
        ChangeOptions(to, drop, hook = Some(hook)),
        AddRecords(first, 300, firstKey = produced),
        StartStream(),
        ExpectFailure("KAFKA_SHARE_CHECKPOINT_MISMATCH.ACKNOWLEDGMENT_MODE_CHANGED")
      )): _*
    )
    val handOver = new ShareQuery(spark, query.options, TestDirs.create("checkpoint-"), hook)
    testStream(handOver)(
      StartStream(),
      Assert("a new checkpoint on the group takes over: every record once in the two sinks") { next =>
        val all    = (0 until produced + 300).map(_.toString).toSet
        def landed = query.sink.rows.map(_.key) ++ next.sink.rows.map(_.key)
        eventually(150.seconds, s"${all.size} keys in the two sinks")(landed.toSet == all || next.query.exception.isDefined)
        next.query.exception.foreach(e => throw e)
        Thread.sleep(3000) // a record landing twice would come by now
        assert(landed.size == all.size, s"${landed.size - landed.toSet.size} records landed twice")
      }
    )
  }

  test("explicit mode cannot change to implicit on a checkpoint; a new checkpoint on the group takes over") {
    val topic = prepare()
    val query = topic.queryWith(
      new ExplicitDecisions(topic.group, releaseTenths = true),
      "checkpoint-dedup",
      "kafka.share.acknowledgment.mode" -> "explicit",
      "maxRecordsPerTrigger"            -> "300"
    )
    modeChangeRefused(topic, query, 600, Map.empty, Set("kafka.share.acknowledgment.mode"), BatchHook.none)(
      AddRecords(topic, 600),
      // One batch, then a minute's pause: stopped after a batch whose RELEASEd records are back in the group.
      StartStream(Trigger.ProcessingTime(60000)),
      Assert("a batch committed, and RELEASEd a tenth of its records") { q =>
        // Its progress too: Spark reports a batch's progress after it writes the commit log.
        eventually(120.seconds, "a committed batch with records, and its progress")(
          q.committedBatches >= 1 && q.sink.rows.nonEmpty && q.batchesWithRecords.nonEmpty
        )
        assert(q.sink.rows.size < q.batchesWithRecords.map(_.numInputRows).sum, q.describe)
      },
      StopStream
    )
  }

  test("implicit mode cannot change to explicit on a checkpoint; a new checkpoint on the group takes over") {
    val topic    = prepare()
    val explicit = Map("kafka.share.acknowledgment.mode" -> "explicit")
    modeChangeRefused(topic, topic.query("checkpoint-dedup", small: _*), 400, explicit, Set.empty, new ExplicitDecisions(topic.group))(
      AddRecords(topic, 400),
      StartStream(),
      CheckLanded(400),
      StopStream
    )
  }

  // Each kept release's checkpoints and the broker data they name, unpacked; a broker started on that data.
  private val fixtures = scala.collection.concurrent.TrieMap.empty[String, (java.nio.file.Path, java.util.Properties, KafkaBroker)]

  private def fixture(release: String) = fixtures.getOrElseUpdate(
    release, {
      val dir      = TestDirs.create(s"fixture-$release-")
      val props    = CheckpointFixture.unpack(release, dir)
      val recorded = props.getProperty("broker.version")
      // The broker that wrote it where the build has it; else the newest (a broker upgrade reads older data).
      val version = if (SharedBrokers.versions.contains(recorded)) recorded else SharedBrokers.versions.last
      (dir, props, KafkaBroker.startCopied(dir.resolve("broker"), version))
    }
  )

  for (release <- CheckpointFixture.releases; q <- CheckpointFixture.Queries)
    test(s"a checkpoint written by $release inside a batch resumes with this build (${q.name})") {
      val (dir, props, broker) = fixture(release)
      assume(props.getProperty("queries").split(',').contains(q.name), s"the fixture of $release has no ${q.name} query")
      val produced = props.getProperty("produced").toInt
      val middle   = props.getProperty(s"${q.name}.middle.batch").toLong
      val query    = new ShareQuery(spark, q.options(broker.bootstrapServers), dir.resolve(s"checkpoints/${q.name}"), q.hook)
      val before   = CheckpointFixture.sinkOf(dir, q)
      query.sink.restore(before)
      val prepared = Prepared(broker, q.topic, q.group)
      testStream(query)(
        Assert("the fixture stopped inside a batch") { _ =>
          assert(Files.exists(query.checkpoint.resolve(s"offsets/$middle")) && !Files.exists(query.checkpoint.resolve(s"commits/$middle")))
          assert(before.nonEmpty && !before.contains(middle), before.keys)
        },
        StartStream(),
        AddRecords(prepared, 300, firstKey = produced),
        CheckLanded(produced + 300),
        Assert("the interrupted batch ran again first") { q =>
          assert(q.progress.head.batchId == middle && q.sink.rowsOf(middle).nonEmpty, q.progress.map(_.batchId))
        }
      )
    }

  for (release <- CheckpointFixture.releases.lastOption)
    test(s"the checkpoint of $release on a fresh broker is refused: the fixture must bring its broker's data") {
      val (dir, _, _) = fixture(release)
      val q           = CheckpointFixture.Queries.head
      val fresh       = prepare()
      val original    = dir.resolve(s"checkpoints/${q.name}")
      val copy        = TestDirs.create("fixture-copy-")
      Files.walk(original).forEach { p =>
        val target = copy.resolve(original.relativize(p).toString)
        if (Files.isDirectory(p)) Files.createDirectories(target) else Files.copy(p, target)
      }
      fresh.kafka.createTopic(q.topic, 2)
      testStream(new ShareQuery(spark, q.options(fresh.broker.bootstrapServers), copy))(
        AddRecords(fresh.copy(topic = q.topic), 100),
        StartStream(),
        ExpectFailure("CLUSTER_CHANGED")
      )
    }

  override def afterAll(): Unit =
    try fixtures.values.foreach(_._3.stop())
    finally super.afterAll()
}
