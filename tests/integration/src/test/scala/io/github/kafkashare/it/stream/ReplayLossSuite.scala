package io.github.kafkashare.it.stream

import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.{Files, Path}

import scala.concurrent.duration._
import scala.jdk.CollectionConverters._
import scala.util.Using

/**
 * A batch that must run again reads its pinned records back from the topic. When retention removed
 * them meanwhile, the restart fails with the data-loss error naming the records and the fix, never
 * with fewer rows or a raw time-out; with failOnDataLoss=false it goes on without them, and reads
 * what comes after. Each test stops the query between batches, takes the last batch's commit away
 * (a driver that died after the sink had the batch and before Spark's commit log: Spark runs the batch
 * again on restart), deletes every record of the topic, and starts the query again.
 */
class ReplayLossSuite extends ShareStreamTest {

  private def batchFiles(checkpoint: Path, log: String): Seq[Long] =
    Using.resource(Files.list(checkpoint.resolve(log)))(
      _.iterator.asScala.map(_.getFileName.toString).filter(_.forall(_.isDigit)).map(_.toLong).toSeq
    )

  /**
   * Spark runs batch `batch` again at the next start, as after a crash before its commit log: its
   * commit and every later batch's offset, commit and acquisitions are taken away (the source plans an
   * empty batch after one with records, which would otherwise be the one to run again).
   */
  private def runAgainAtStart(checkpoint: Path, batch: Long): Unit = {
    def drop(log: String, from: Long): Unit = batchFiles(checkpoint, log).filter(_ >= from).foreach { b =>
      Files.delete(checkpoint.resolve(s"$log/$b"))
      Files.deleteIfExists(checkpoint.resolve(s"$log/.$b.crc"))
    }
    drop("commits", batch)
    drop("offsets", batch + 1)
    // The source's files of the later batches go too: as if they had never started.
    batchFiles(checkpoint, "sources/0/acquisitions").filter(_ > batch)
      .foreach(b => TestDirs.deleteRecursively(checkpoint.resolve(s"sources/0/acquisitions/$b")))
  }

  private def stoppedAfterABatchThenRemoved(topic: Prepared, rerun: Long => Unit): Seq[StreamAction] = Seq(
    AddRecords(topic, 600),
    StartStream(),
    Assert("a batch read records")(q => eventually(90.seconds, "a batch with records")(q.sink.rows.nonEmpty)),
    StopStream,
    Assert("the last batch with records must run again, its records removed") { q =>
      val batch  = q.batchesWithRecords.last.batchId
      val pinned = Using.resource(Files.list(q.checkpoint.resolve(s"sources/0/acquisitions/$batch")))(_.iterator.asScala.toList)
      assert(pinned.nonEmpty, s"batch $batch pinned nothing")
      runAgainAtStart(q.checkpoint, batch)
      rerun(batch)
      topic.kafka.deleteAllRecords(topic.topic)
    }
  )

  test("a replay whose records retention removed fails with the data-loss error") {
    val topic = prepare(partitions = 1)
    val query = topic.query("checkpoint-dedup", "maxRecordsPerTrigger" -> "200")
    testStream(query)(
      stoppedAfterABatchThenRemoved(topic, _ => ()) ++ Seq(StartStream(), ExpectFailure("KAFKA_SHARE_DATA_LOSS.RECORDS_REMOVED")): _*
    )
  }

  test("with failOnDataLoss=false a replay whose records are gone goes on without them") {
    val topic = prepare(partitions = 1)
    val query = topic.query("checkpoint-dedup", "maxRecordsPerTrigger" -> "200", "failOnDataLoss" -> "false")
    var rerun = -1L
    testStream(query)(
      stoppedAfterABatchThenRemoved(topic, rerun = _) ++ Seq(
        AddRecords(topic, 100, firstKey = 600),
        StartStream(),
        Assert("the batch ran again without the removed records, said so, and the new records landed") { q =>
          eventually(150.seconds, "the 100 records produced after the removal") {
            q.query.exception.foreach(e => throw e)
            (600 until 700).map(_.toString).toSet.subsetOf(q.sink.rows.map(_.key).toSet)
          }
          assert(batchFiles(q.checkpoint, "commits").contains(rerun), s"batch $rerun, run again, was not committed")
          assert(q.sink.rowsOf(rerun).isEmpty, s"batch $rerun landed rows whose records were removed")
          val log = new String(Files.readAllBytes(TestDirs.connectorLog), UTF_8)
          assert(log.contains("are gone from the topic"), s"no warning of the removed records in ${TestDirs.connectorLog}")
        }
      ): _*
    )
  }
}
