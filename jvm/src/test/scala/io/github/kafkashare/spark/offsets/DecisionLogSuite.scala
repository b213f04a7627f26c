package io.github.kafkashare.spark.offsets

import java.nio.file.{Files, Path => JPath}

import io.github.kafkashare.spark.UnitTestDirs
import io.github.kafkashare.spark.errors.ShareSourceException
import io.github.kafkashare.spark.options.Decision
import org.apache.hadoop.conf.Configuration
import org.scalatest.funsuite.AnyFunSuite

class DecisionLogSuite extends AnyFunSuite {

  private def fresh(): (JPath, DecisionLog) = {
    val dir = UnitTestDirs.create("decisions")
    dir -> new DecisionLog(dir.toString, new SerializableHadoopConf(new Configuration()))
  }

  private val released = TopicPartitionRanges(Map(("t", 0) -> OffsetRanges(Seq(OffsetRange(5, 6)))))

  test("decisions and the manifest round-trip") {
    val (_, log) = fresh()
    val file     = log.writeFile(3, "task-0", Iterator((Decision.Accept, "t", 0, 4L), (Decision.Reject, "t", 1, 9L)))
    log.writeManifest(3, Seq(file), released)
    assert(log.decisions(3).contains(Map(("t", 0, 4L) -> Decision.Accept, ("t", 1, 9L) -> Decision.Reject)))
    assert(log.released(3, TopicPartitionRanges.empty, Decision.Accept) == released)
    assert(log.decisions(4).isEmpty)
  }

  private def damage(dir: JPath, name: String, text: String): Unit =
    Files.writeString(dir.resolve("decisions").resolve("3").resolve(name), text)

  test("a damaged data file or manifest gives the catalogued error, never a raw parse exception") {
    Seq(
      ("task-0", "kafka-share decisions v1\na t x 4\n", "'x' in the line 'a t x 4' is not a number"),
      ("task-0", "kafka-share decisions v1\na t 0 99999999999999999999\n", "is not a number"),
      ("task-0", "kafka-share decisions v1\nq t 0 4\n", "cannot read the line 'q t 0 4'"),
      ("task-0", "", "the file is empty"),
      ("_manifest", "kafka-share decision manifest v1\nfile task-0\nreleased t 0 9 5\n", "ends before it starts"),
      ("_manifest", "kafka-share decision manifest v1\nfile task-0\nreleased t zero 5 6\n", "'zero' in the line"),
      ("_manifest", "kafka-share decisions v1\n", "expected 'kafka-share decision manifest v1'")
    ).foreach { case (name, text, why) =>
      val (dir, log) = fresh()
      log.writeManifest(3, Seq(log.writeFile(3, "task-0", Iterator((Decision.Accept, "t", 0, 4L)))), released)
      damage(dir, name, text)
      val e = intercept[ShareSourceException](log.released(3, TopicPartitionRanges.empty, Decision.Release))
      assert(e.getCondition == "KAFKA_SHARE_CHECKPOINT_DAMAGED.CORRUPT_LOG", e.getMessage)
      assert(e.getMessage.contains(s"decisions/3/$name") && e.getMessage.contains(why), e.getMessage)
    }
  }

  test("a manifest of a newer format is refused as 'upgrade'") {
    val (dir, log) = fresh()
    log.writeManifest(3, Nil, released)
    damage(dir, "_manifest", "kafka-share decision manifest v3 by 1.4.0\n")
    val e = intercept[ShareSourceException](log.decisions(3))
    assert(e.getCondition == "KAFKA_SHARE_CHECKPOINT_DAMAGED.NEWER_LOG_FORMAT", e.getMessage)
    assert(e.getMessage.contains("Upgrade the connector to 1.4.0"), e.getMessage)
  }
}
