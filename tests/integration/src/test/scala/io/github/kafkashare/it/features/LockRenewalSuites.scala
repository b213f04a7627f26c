package io.github.kafkashare.it.features

import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.Files

import scala.concurrent.duration._
import scala.jdk.CollectionConverters._
import scala.util.Try

import io.github.kafkashare.it.stream._
import io.github.kafkashare.spark.monitoring.JvmActivity
import io.github.kafkashare.testkit.{ProjectPaths, ReceivedRecord}
import org.apache.spark.sql.DataFrame
import org.apache.spark.sql.streaming.Trigger

/**
 * Two-phase commit and explicit mode hold a batch's records until the batch commits. Where the broker
 * can renew a lock (Kafka 4.2+), a batch may take many lock durations: its records stay with it, none
 * is acknowledged before the commit, none is redelivered. Where it cannot (4.1, or a group that turns
 * RENEW off), the query says so at start, and the records are acknowledged when their locks near their
 * end, as before.
 *
 * A slow batch: foreachBatch sleeps `kafkashare.slowBatchSeconds` (25 by default; locks of 15 s) in the
 * first batch that has records (one partition, so that the first batch acquires all of them), then a
 * plain share consumer of the group polls for 3 s: it must get nothing, since the batch still holds every
 * record. After the batch the commit watcher must not have had to acknowledge before the commit (its
 * "did not come within the lock duration" warning), and every record landed once, at delivery count 1.
 * A two-phase-commit query and an explicit-mode query run on each broker line, all side by side in one
 * test, their slow batches at the same time, each with its own topic and group.
 * `-Dkafkashare.slowBatchSeconds=300` in the test JVM's options gives the 5-minute batch (docs/internals/delivery-semantics.md).
 */
abstract class LockRenewalCells extends ShareStreamTest {

  protected val slowSeconds: Int = sys.props.get("kafkashare.slowBatchSeconds").map(_.toInt).getOrElse(25)

  // (what the test calls it, strategy, options)
  private val modes = Seq(
    ("two-phase-commit", "two-phase-commit", Seq.empty[(String, String)]),
    (
      "explicit mode",
      "checkpoint-dedup",
      Seq("kafka.share.acknowledgment.mode" -> "explicit", "kafka.share.acknowledgment.default" -> "accept")
    )
  )

  /** Sleeps in the first batch with records, then lets another member of the group look for records. */
  private final class SlowFirstBatch(prepared: Prepared, seconds: Int) extends BatchHook {
    @volatile var slept: Option[Long]                            = None
    @volatile var probeGot: Option[Seq[ReceivedRecord]]          = None
    @volatile var woke                                           = false
    @volatile var query: Option[ShareQuery]                      = None
    override def read(rows: DataFrame, batchId: Long): DataFrame = rows
    override def afterWrite(batchId: Long): Unit = if (slept.isEmpty && query.exists(_.sink.rowsOf(batchId).nonEmpty)) {
      slept = Some(batchId)
      Thread.sleep(seconds * 1000L)
      probeGot = Some(prepared.kafka.shareConsume(prepared.group, Seq(prepared.topic), expected = 1, timeoutMs = 3000))
      woke = true
    }
  }

  /** One mode's query on its own topic and group, with a slow first batch. */
  private final class Cell(
      version: String,
      seconds: Int,
      groupSettings: Map[String, String],
      strategy: String,
      options: Seq[(String, String)]
  ) {
    val prepared = prepare(SharedBrokers.of(version), partitions = 1, lockMs = 15000)
    if (groupSettings.nonEmpty) prepared.kafka.setGroupConfig(prepared.group, groupSettings)
    val hook  = new SlowFirstBatch(prepared, seconds)
    val query = prepared.queryWith(hook, strategy, options: _*)
    hook.query = Some(query)
  }

  /** Where a test's cells run: the broker, the group's settings, and whether held locks are renewed there. */
  protected final case class Where(version: String, renews: Boolean, groupSettings: Map[String, String] = Map.empty)

  /** The cells of every place at once (their slow batches at the same time), then each one's checks. */
  protected def slowBatchCells(seconds: Int, places: Where*): Unit = {
    // Without renewal, explicit mode RELEASEs at 80% of the lock and the records wait in the group for the
    // query's next poll: only two-phase-commit, whose early ACCEPT leaves nothing behind, is checked there.
    val cells = places.flatMap { where =>
      modes.take(if (where.renews) modes.size else 1).map { case (_, strategy, options) =>
        (where, new Cell(where.version, seconds, where.groupSettings, strategy, options))
      }
    }
    cells.foreach { case (_, c) => c.prepared.kafka.produce(c.prepared.topic, 200) }
    val renewedBefore = JvmActivity.recordsRenewed.getCount
    cells.foreach(_._2.query.start(Trigger.ProcessingTime(200)))
    try {
      cells.foreach { case (where, c) =>
        info(s"Kafka ${where.version}, ${c.query.strategy}${if (where.groupSettings.nonEmpty) s", group ${where.groupSettings}" else ""}")
        testStream(c.query)(checks(c, seconds, where.renews, where.groupSettings): _*)
      }
      // Each renewing cell's batch outlived a lock while it held its 200 records: one RENEW each at least, in the
      // metrics system's counter (JVM-wide: other suites of this JVM may add to it, none takes from it).
      val renewing = cells.count(_._1.renews)
      val renewed  = JvmActivity.recordsRenewed.getCount - renewedBefore
      info(s"jvm.recordsRenewed grew by $renewed")
      assert(renewed >= 200L * renewing, s"jvm.recordsRenewed grew by $renewed for $renewing cells that renewed 200 records each")
    } finally cells.foreach(c => Try(c._2.query.stop()))
  }

  private def checks(cell: Cell, seconds: Int, renews: Boolean, groupSettings: Map[String, String]): Seq[StreamAction] = {
    import cell.{hook, prepared}
    Seq(
      Assert("the slow batch ran") { q =>
        eventually((seconds + 120).seconds, "the slow batch's end") { q.query.exception.foreach(e => throw e); hook.woke }
      },
      CheckLanded(200),
      Assert("the start-up log says whether held locks are renewed") { _ =>
        val said =
          StreamSuiteLog.linesWith(s"group '${prepared.group}'").filter(l => l.contains(" WARN ") && l.contains("cannot renew their locks"))
        if (renews) assert(said.isEmpty, said.mkString("\n"))
        else {
          assert(said.nonEmpty, s"no start-up warning for group ${prepared.group}")
          info(said.head)
          groupSettings.keys.foreach(setting => assert(said.head.contains(setting), said.head))
        }
      },
      Assert("the slow batch's records") { q =>
        assert(hook.slept.nonEmpty, "no batch slept")
        val early = StreamSuiteLog.linesWith(q.checkpoint.toString).filter(_.contains("did not come within the lock duration"))
        if (renews) {
          // Nothing acknowledged before the commit, however long the batch ran; nothing given to another member.
          assert(early.isEmpty, early.mkString("\n"))
          assert(hook.probeGot.contains(Nil), s"another member of the group got ${hook.probeGot.map(_.take(3))} during the batch")
          val counts = q.sink.rows.groupBy(_.deliveryCount).map { case (c, rs) => c -> rs.size }
          assert(counts.keySet == Set(1), s"rows by delivery count: $counts")
        } else assert(early.nonEmpty, "the held records were not acknowledged before the commit: were their locks renewed?")
      },
      StopStream,
      Assert("every record acknowledged: nothing is left for another member of the group") { _ =>
        val left = prepared.kafka.shareConsume(prepared.group, Seq(prepared.topic), expected = 1, timeoutMs = 5000)
        assert(left.isEmpty, s"${left.size} records came back to the group, for example ${left.take(3)}")
      }
    )
  }
}

/** Kafka 4.2 and later: the held records keep their locks by RENEW for as long as the batch runs. */
final class LockRenewalSuite extends LockRenewalCells {
  private val lines = SharedBrokers.since("4.2")
  test(
    s"two-phase-commit and explicit mode: a batch of $slowSeconds s with 15 s locks keeps its records by RENEW, acknowledges them at commit " +
      s"[Kafka ${lines.mkString(", ")}]"
  ) {
    slowBatchCells(slowSeconds, lines.map(Where(_, renews = true)): _*)
  }
}

/**
 * Where locks cannot be renewed, today's behaviour: a warning at start, the records acknowledged as their
 * locks near their end (two-phase-commit ACCEPTs, they are pinned; explicit mode RELEASEs, and applies the
 * decisions when they come back): nothing lost, nothing doubled. 20 s: past 80% of a 15 s lock.
 * Two-phase-commit only (see slowBatchCells). Kafka 4.1, and a 4.3+ group with share.renew.acknowledge.enable=false.
 */
final class WithoutLockRenewalSuite extends LockRenewalCells {
  private val renewOff = SharedBrokers.since("4.3").lastOption
  test(
    s"without RENEW (Kafka ${SharedBrokers.versions.head}; share.renew.acknowledge.enable=false on Kafka ${renewOff.getOrElse("-")}) " +
      "two-phase-commit warns at start, and loses nothing"
  ) {
    slowBatchCells(
      20,
      Where(SharedBrokers.versions.head, renews = false) +:
        renewOff.toSeq.map(Where(_, renews = false, Map("share.renew.acknowledge.enable" -> "false"))): _*
    )
  }
}

/** The stream suites' log file (tests/integration/src/test/resources/log4j2.properties): the connector's lines at INFO. */
object StreamSuiteLog {
  def linesWith(text: String): Seq[String] = {
    val file = ProjectPaths.root.resolve("target/test-results/stream-suites.log")
    if (!Files.exists(file)) Nil else Files.readAllLines(file, UTF_8).asScala.filter(_.contains(text)).toSeq
  }
}
