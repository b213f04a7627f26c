package io.github.kafkashare.spark.offsets

import io.github.kafkashare.spark.UnitTestDirs
import io.github.kafkashare.spark.diagnostics.ConnectorInfo
import io.github.kafkashare.spark.errors.ShareSourceException
import org.apache.hadoop.conf.Configuration
import org.scalatest.funsuite.AnyFunSuite

class AcquisitionLogSuite extends AnyFunSuite {

  test("records compress into runs of consecutive offsets with one delivery count") {
    val entry =
      AcquisitionEntry.of(Seq(("t", 0, 3L, 1), ("t", 0, 1L, 1), ("t", 0, 2L, 1), ("t", 0, 4L, 2), ("t", 0, 9L, 2), ("t", 1, 0L, 1)))
    assert(entry.runs == Seq(
      AcquiredRun("t", 0, 1, 3, 1),
      AcquiredRun("t", 0, 4, 4, 2),
      AcquiredRun("t", 0, 9, 9, 2),
      AcquiredRun("t", 1, 0, 0, 1)
    ))
    assert(entry.recordCount == 6)
    assert(entry.serialize == s"kafka-share acquisitions v1 by ${ConnectorInfo.version}\nt 0 1-3:1 4-4:2 9-9:2\nt 1 0-0:1\n")
  }

  test("the text format round-trips; an empty entry too") {
    val entry = AcquisitionEntry.of((0L until 1000L).map(o => ("orders.eu-1", (o % 3).toInt, o, 1)))
    assert(AcquisitionEntry.parse(entry.serialize, "f") == entry)
    assert(AcquisitionEntry.parse(AcquisitionEntry.empty.serialize, "f") == AcquisitionEntry.empty)
  }

  test("a log entry is a few bytes per run, not per record") {
    val entry = AcquisitionEntry.of((0L until 100000L).map(o => ("orders", 0, o, 1)))
    assert(entry.serialize.length < 60)
  }

  test("damaged files are refused with the path and what is wrong, never with a raw parse exception") {
    Seq(
      ""                                                            -> "the file is empty",
      "kafka-share acquisitions\n"                                  -> "expected 'kafka-share acquisitions v1'",
      "kafka-share decisions v1\n"                                  -> "expected 'kafka-share acquisitions v1'",
      "kafka-share acquisitions v1\nt 0\n"                          -> "is not 'topic partition runs...'",
      "kafka-share acquisitions v1\nt 0 5-x:1\n"                    -> "is not first-last:deliveryCount",
      "kafka-share acquisitions v1\nt x 5-6:1\n"                    -> "'x' in the line 't x 5-6:1' is not a number",
      "kafka-share acquisitions v1\nt 0 5-99999999999999999999:1\n" -> "'99999999999999999999' in the line",
      "kafka-share acquisitions v1\nt 0 9-5:1\n"                    -> "'9-5:1' ends before it starts"
    ).foreach { case (text, why) =>
      val e = intercept[ShareSourceException](AcquisitionEntry.parse(text, "/ck/sources/0/acquisitions/3/1"))
      assert(e.getCondition == "KAFKA_SHARE_CHECKPOINT_DAMAGED.CORRUPT_LOG", e.getMessage)
      assert(e.getMessage.contains("/ck/sources/0/acquisitions/3/1") && e.getMessage.contains(why), e.getMessage)
    }
  }

  test("a file of a newer format is refused as 'upgrade', naming the connector that wrote it; older headers still read") {
    val e = intercept[ShareSourceException](AcquisitionEntry.parse("kafka-share acquisitions v2 by 0.9.0\nt 0 1-2:1\n", "/ck/a/3/1"))
    assert(e.getCondition == "KAFKA_SHARE_CHECKPOINT_DAMAGED.NEWER_LOG_FORMAT", e.getMessage)
    assert(
      e.getMessage.contains("written by connector version 0.9.0") && e.getMessage.contains("Upgrade the connector to 0.9.0"),
      e.getMessage
    )
    assert(e.getMessage.contains("/ck/a/3/1") && e.getMessage.contains("reads up to v1"), e.getMessage)
    // Written before the header named its writer, and by another connector version of the same format.
    val runs = Seq(AcquiredRun("t", 0, 1, 2, 1))
    assert(AcquisitionEntry.parse("kafka-share acquisitions v1\nt 0 1-2:1\n", "f").runs == runs)
    assert(AcquisitionEntry.parse("kafka-share acquisitions v1 by 0.0.1\nt 0 1-2:1\n", "f").runs == runs)
  }

  test("an entry is written once: a second writer gets the first entry back") {
    val dir    = UnitTestDirs.create("acq").toString
    val log    = new AcquisitionLog(dir, new SerializableHadoopConf(new Configuration()))
    val first  = AcquisitionEntry.of(Seq(("t", 0, 1L, 1)))
    val second = AcquisitionEntry.of(Seq(("t", 0, 2L, 1)))
    assert(log.read(0, 0).isEmpty)
    assert(log.writeIfAbsent(0, 0, first) == ((first, true)))
    assert(log.writeIfAbsent(0, 0, second) == ((first, false)))
    assert(log.read(0, 0).contains(first))
    log.writeIfAbsent(1, 0, second)
    assert(log.readBatch(0, 2) == Seq(first))
    log.purgeBefore(1)
    assert(log.read(0, 0).isEmpty && log.read(1, 0).contains(second))
  }

  test("the batches a task wrote a part of, by number (Spark's ids skip), none before the first write nor after a purge") {
    val dir = UnitTestDirs.create("acq").toString
    val log = new AcquisitionLog(dir, new SerializableHadoopConf(new Configuration()))
    assert(log.batches.isEmpty)
    Seq(12L, 3L, 7L).foreach(b => log.writeIfAbsent(b, 1, AcquisitionEntry.empty))
    log.writeIfAbsent(7, 0, AcquisitionEntry.empty, part = 2)
    assert(log.batches == Seq(3L, 7L, 12L))
    log.purgeBefore(7)
    assert(log.batches == Seq(7L, 12L))
  }

  test("a task sees what its siblings in the same batch pinned so far, not its own entry nor other batches'") {
    val dir = UnitTestDirs.create("acq").toString
    val log = new AcquisitionLog(dir, new SerializableHadoopConf(new Configuration()))
    assert(log.partsOf(4, _ != 0).isEmpty) // nothing written yet: no folder at all
    val mine    = AcquisitionEntry.of(Seq(("t", 0, 1L, 1)))
    val sibling = AcquisitionEntry.of(Seq(("t", 0, 7L, 2)))
    log.writeIfAbsent(4, 0, mine)
    log.writeIfAbsent(4, 2, sibling)
    log.writeIfAbsent(5, 1, AcquisitionEntry.of(Seq(("t", 0, 9L, 1))))
    assert(log.partsOf(4, _ != 0) == Seq(sibling))
    assert(log.partsOf(4, _ != 1) == Seq(mine, sibling))
  }

  test("a task's records are its parts up to the first missing or empty one; a seal ends it for every attempt") {
    val dir = UnitTestDirs.create("acq").toString
    val log = new AcquisitionLog(dir, new SerializableHadoopConf(new Configuration()))
    val p0  = AcquisitionEntry.of(Seq(("t", 0, 1L, 1)))
    val p1  = AcquisitionEntry.of(Seq(("t", 0, 2L, 1)))
    val p2  = AcquisitionEntry.of(Seq(("t", 1, 5L, 1)))
    assert(log.readTask(0, 3).isEmpty) // no part 0: a fresh attempt polls
    log.writeIfAbsent(0, 3, p0)
    log.writeIfAbsent(0, 3, p1, part = 1)
    assert(log.readTask(0, 3).contains(Seq(p0, p1)))
    assert(log.path(0, 3, 1).getName == "3.1" && log.path(0, 3).getName == "3")
    // A retry seals after the last part: the first attempt, still polling, cannot pin part 2 any more.
    assert(log.sealTask(0, 3) == Seq(p0, p1))
    assert(log.writeIfAbsent(0, 3, p2, part = 2) == ((AcquisitionEntry.empty, false)))
    assert(log.readTask(0, 3).contains(Seq(p0, p1)) && log.sealTask(0, 3) == Seq(p0, p1))
    assert(log.readBatch(0, 4) == Seq(p0, p1))
    assert(log.partsOf(0, _ != 0) == Seq(p0, p1) && log.partsOf(0, _ != 3).isEmpty)
    // A task that got nothing has an empty part 0: it is complete, with no records.
    log.writeIfAbsent(0, 1, AcquisitionEntry.empty)
    assert(log.readTask(0, 1).contains(Nil) && log.sealTask(0, 1).isEmpty)
  }

  test("file names: a task's part 0 is its number, later parts task.part; other files are no part") {
    assert(AcquisitionLog.taskAndPart("3").contains((3, 0)) && AcquisitionLog.taskAndPart("3.12").contains((3, 12)))
    Seq(".3.crc", ".3.1.crc", ".3.4f1c-uuid.tmp", "3.x", "").foreach(n => assert(AcquisitionLog.taskAndPart(n).isEmpty, n))
  }
}
