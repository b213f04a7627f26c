package io.github.kafkashare.it.features

import scala.concurrent.duration._
import scala.util.Try

import io.github.kafkashare.it.stream._
import org.apache.spark.sql.DataFrame
import org.apache.spark.sql.streaming.Trigger

/**
 * No delivery attempt spent on records no task read (issue 28, item 3). While a batch stalls (a slow
 * foreachBatch), no task polls; yet records can sit acquired and unread in two places: the rest of a
 * fetch beyond max.poll.records in the client's buffer (the broker acquires whole record batches), and
 * what an idle pooled consumer's client fetched after an empty poll (it goes on fetching until records
 * come). Their locks ran out during the stall and the group delivered them again, one attempt spent each.
 * Kafka 4.2+ stops both: strict acquisition (share.acquire.mode=record_limit) acquires no more than a poll
 * returns, and the pool renews the locks of what idle consumers carry until a batch takes it.
 *
 * The cell: 600 records in record batches of about 130 over 2 partitions, maxRecordsPerTrigger 100 (polls of 50,
 * so that fetches round up past them), checkpoint-dedup (ACCEPTs each part at once), 15 s locks, and the
 * first batch with records stalls `kafkashare.stallSeconds` (45 by default: three locks). Every broker
 * line runs its cell at once. From 4.2: every row at delivery count 1. On 4.1: nothing lost or doubled, and
 * the spread of delivery counts is reported (docs/internals/delivery-semantics.md keeps the figures).
 */
final class StalledBatchSuite extends ShareStreamTest {

  private val stallSeconds: Int = sys.props.get("kafkashare.stallSeconds").map(_.toInt).getOrElse(45)
  private val records           = 600

  private final class StallFirstBatch(seconds: Int) extends BatchHook {
    @volatile var stalled: Option[Long]                          = None
    @volatile var sink: Option[BatchSink]                        = None
    override def read(rows: DataFrame, batchId: Long): DataFrame = rows
    override def afterWrite(batchId: Long): Unit = if (stalled.isEmpty && sink.exists(_.rowsOf(batchId).nonEmpty)) {
      stalled = Some(batchId)
      Thread.sleep(seconds * 1000L)
    }
  }

  private final class Cell(val version: String) {
    val prepared = prepare(SharedBrokers.of(version), partitions = 2, lockMs = 15000)
    val hook     = new StallFirstBatch(stallSeconds)
    val query    = prepared.queryWith(hook, "checkpoint-dedup", "maxRecordsPerTrigger" -> "100")
    hook.sink = Some(query.sink)
  }

  test(s"a batch stalled for $stallSeconds s with 15 s locks: from Kafka 4.2 every record emitted at delivery count 1 " +
    s"[Kafka ${SharedBrokers.versions.mkString(", ")}]") {
    val cells = SharedBrokers.versions.map(new Cell(_))
    // Produced at once, in record batches of about 130 (16 KB): a fetch of 50 rounds up past a poll.
    cells.foreach(c => c.prepared.kafka.produce(c.prepared.topic, records))
    cells.foreach(_.query.start(Trigger.ProcessingTime(200)))
    try cells.foreach { cell =>
        testStream(cell.query)(
          CheckLanded(records, within = (stallSeconds + 150).seconds),
          Assert("delivery counts") { q =>
            val counts = q.sink.rows.groupBy(_.deliveryCount).map { case (c, rs) => c -> rs.size }.toSeq.sorted
            info(s"Kafka ${cell.version}: rows by delivery count ${counts.map { case (c, n) => s"$c: $n" }.mkString(", ")}")
            assert(cell.hook.stalled.nonEmpty, "no batch stalled")
            val line = cell.version.split('.').take(2).mkString(".")
            if (line >= "4.2") assert(counts.map(_._1) == Seq(1), s"rows by delivery count: $counts")
          }
        )
      }
    finally cells.foreach(c => Try(c.query.stop()))
  }
}
