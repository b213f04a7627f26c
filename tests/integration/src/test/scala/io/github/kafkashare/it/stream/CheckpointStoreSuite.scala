package io.github.kafkashare.it.stream

/**
 * The source's checkpoint I/O on a file system other than the local one (the test's `slowfs:`, the
 * local disk under another scheme, goes the way of HDFS and object stores: Spark's
 * CheckpointFileManager).
 */
class CheckpointStoreSuite extends ShareStreamTest {

  test("a checkpoint file manager set in spark.sql.streaming.checkpointFileManagerClass writes the source's files too") {
    val topic = prepare()
    val query = topic.queryOn(SlowLocalFileSystem.Scheme, "checkpoint-dedup")
    val key   = "spark.sql.streaming.checkpointFileManagerClass"
    spark.conf.set(key, classOf[CountingCheckpointFileManager].getName)
    try testStream(query)(
        AddRecords(topic, 200),
        StartStream(),
        CheckLanded(200),
        Assert("the manager wrote the acquisition log") { q =>
          import scala.jdk.CollectionConverters._
          val mine    = CountingCheckpointFileManager.written.asScala.filter(_.startsWith(q.checkpoint.toString)).toSeq
          val pinned  = mine.filter(_.contains("/sources/0/acquisitions/"))
          val commits = mine.filter(_.contains("/commits/"))
          info(s"${mine.size} files through the manager: ${pinned.size} acquisition parts, ${commits.size} commits")
          assert(commits.nonEmpty, "Spark's own commit log did not go through the manager: the setting was not applied")
          assert(pinned.nonEmpty, s"no acquisition part went through the manager; it wrote ${mine.take(5)}")
        }
      )
    finally spark.conf.unset(key)
  }

  test("file system instances stay flat over 60 batches of two-phase-commit (no store made per task or check)") {
    val topic     = prepare()
    val query     = topic.queryOn(SlowLocalFileSystem.Scheme, "two-phase-commit", "maxRecordsPerTrigger" -> "20")
    var afterWarm = 0
    testStream(query)(
      AddRecords(topic, 200),
      StartStream(),
      CheckLanded(200),
      Assert("10 batches ran: the stores of this query exist") { q =>
        assert(q.batchesWithRecords.size >= 10, s"${q.batchesWithRecords.size} batches read records")
        afterWarm = SlowLocalFileSystem.made.get
      },
      AddRecords(topic, 1000, firstKey = 200),
      CheckLanded(1200),
      Assert("60 batches later, no file system instance was made") { q =>
        val batches = q.batchesWithRecords.size
        assert(batches >= 60, s"only $batches batches read records")
        val made = SlowLocalFileSystem.made.get - afterWarm
        info(s"$batches batches; slowfs instances: $afterWarm after the first 10 batches, $made made after them")
        assert(made == 0, s"$made slowfs instances were made in the last ${batches - 10} batches")
      }
    )
  }
}
