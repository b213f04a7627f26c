package io.github.kafkashare.it.stream

/**
 * The source's checkpoint I/O on a file system other than the local one (the test's `slowfs:`, the
 * local disk under another scheme, goes the way of HDFS and object stores: Spark's
 * CheckpointFileManager).
 */
class CheckpointStoreSuite extends ShareStreamTest {

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
