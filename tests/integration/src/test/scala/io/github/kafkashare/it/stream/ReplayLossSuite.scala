package io.github.kafkashare.it.stream

import java.nio.file.{Files, Path}

import scala.concurrent.duration._
import scala.jdk.CollectionConverters._

/**
 * A batch that must run again reads its pinned records back from the topic. When retention removed
 * them meanwhile, the restart fails with the data-loss error naming the records and the fix, never
 * with fewer rows or a raw time-out; with failOnDataLoss=false it goes on without them, and reads
 * what comes after. Each test stops the query between batches, takes the last batch's commit away
 * (a driver that died after the sink had the batch and before Spark's commit log: Spark runs the batch
 * again on restart), deletes every record of the topic, and starts the query again.
 */
class ReplayLossSuite extends ShareStreamTest {

  private def lastCommitted(checkpoint: Path): Long =
    Files.list(checkpoint.resolve("commits")).iterator.asScala.map(_.getFileName.toString).filter(_.forall(_.isDigit))
      .map(_.toLong).max

  /** Spark runs the last batch again at the next start, as after a crash before its commit log. */
  private def uncommitLast(checkpoint: Path): Long = {
    val batch = lastCommitted(checkpoint)
    Files.delete(checkpoint.resolve(s"commits/$batch"))
    Files.deleteIfExists(checkpoint.resolve(s"commits/.$batch.crc"))
    batch
  }

  private def stoppedAfterABatchThenRemoved(topic: Prepared, query: ShareQuery): Seq[StreamAction] = Seq(
    AddRecords(topic, 600),
    StartStream(),
    Assert("a batch read records")(q => eventually(90.seconds, "a batch with records")(q.sink.rows.nonEmpty)),
    StopStream,
    Assert("the last batch must run again, its records removed") { q =>
      uncommitLast(q.checkpoint)
      topic.kafka.deleteAllRecords(topic.topic)
    }
  )

  test("a replay whose records retention removed fails with the data-loss error") {
    val topic = prepare(partitions = 1)
    val query = topic.query("checkpoint-dedup", "maxRecordsPerTrigger" -> "200")
    testStream(query)(
      stoppedAfterABatchThenRemoved(topic, query) ++ Seq(StartStream(), ExpectFailure("KAFKA_SHARE_DATA_LOSS.RECORDS_REMOVED")): _*
    )
  }

  test("with failOnDataLoss=false a replay whose records are gone goes on without them") {
    val topic = prepare(partitions = 1)
    val query = topic.query("checkpoint-dedup", "maxRecordsPerTrigger" -> "200", "failOnDataLoss" -> "false")
    var rerun = -1L
    testStream(query)(
      stoppedAfterABatchThenRemoved(topic, query) ++ Seq(
        Assert("the batch to run again")(q => rerun = lastCommitted(q.checkpoint) + 1),
        AddRecords(topic, 100, firstKey = 600),
        StartStream(),
        Assert("the batch ran again, empty, and the new records landed") { q =>
          eventually(150.seconds, "the 100 records produced after the removal") {
            q.query.exception.foreach(e => throw e)
            (600 until 700).map(_.toString).toSet.subsetOf(q.sink.rows.map(_.key).toSet)
          }
          assert(q.committedBatches > rerun, "the batch that ran again was committed")
          assert(!q.sink.rows.exists(r => r.key.toInt < 600 && q.sink.rows.count(_.key == r.key) > 1), "a removed record came twice")
        }
      ): _*
    )
  }
}
