package io.github.kafkashare.it.stream

import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.{Files, Path}

import scala.concurrent.duration._
import scala.jdk.CollectionConverters._

/**
 * A damaged checkpoint stops the query with an error that names the file and the way out. Each test
 * runs a query for a batch, stops it between batches, damages one file the way a bad copy or a newer
 * connector would, and starts it again: it must fail (not read on from a wrong place, which would lose
 * or double records) and say why.
 */
class CheckpointDamageSuite extends ShareStreamTest {

  private def lastOffsetFile(checkpoint: Path): Path =
    Files.list(checkpoint.resolve("offsets")).iterator.asScala.filter(_.getFileName.toString.forall(_.isDigit))
      .maxBy(_.getFileName.toString.toLong)

  private def rewrite(file: Path, text: String): Unit = {
    Files.write(file, text.getBytes(UTF_8))
    Files.deleteIfExists(file.resolveSibling(s".${file.getFileName}.crc")) // as a copy without checksums would be
  }

  /** Spark's offset log file: 'v1', its metadata, then one line per source (ours is the only one). */
  private def damageOffset(replace: String => String)(checkpoint: Path): Unit = {
    val file  = lastOffsetFile(checkpoint)
    val lines = new String(Files.readAllBytes(file), UTF_8).split("\n", -1)
    lines(2) = replace(lines(2))
    rewrite(file, lines.mkString("\n"))
  }

  private def garbleAcquisitions(checkpoint: Path): Unit = {
    val batch = lastOffsetFile(checkpoint).getFileName.toString
    rewrite(checkpoint.resolve(s"sources/0/acquisitions/$batch/0"), "kafka-share acquisitions v1\nthis is not a range\n")
  }

  private val cases: Seq[(String, Path => Unit, String)] = Seq(
    (
      "offset from a newer connector",
      damageOffset(_.replaceAll("\"version\":\\d+", "\"version\":99")),
      "offset of version 99, newer than this connector reads"
    ),
    ("offset cut short", damageOffset(s => s.take(s.length / 2)), "cannot read the kafka-share offset"),
    ("acquisition log entry garbled", garbleAcquisitions, "is not valid ('is' in the line"),
    // A checkpoint taken to another cluster (a migration, a disaster-recovery copy): refused, not read on.
    (
      "offset of another Kafka cluster",
      damageOffset(_.replaceAll("\"cluster\":\"[^\"]*\"", "\"cluster\":\"another-cluster-id\"")),
      "CLUSTER_CHANGED"
    )
  )

  for ((name, damage, message) <- cases)
    test(s"a damaged checkpoint fails clearly: $name") {
      val topic = prepare()
      val query = topic.query("checkpoint-dedup")
      testStream(query)(
        AddRecords(topic, 600),
        StartStream(),
        Assert("a batch read records")(q => eventually(90.seconds, "a batch with records")(q.sink.rows.nonEmpty)),
        StopStream,
        Assert(s"damaged: $name")(q => damage(q.checkpoint)),
        // New records, so that the restarted query plans a batch (planning is where it reads the checkpoint).
        AddRecords(topic, 300, firstKey = 600),
        StartStream(),
        ExpectFailure(message)
      )
    }
}
