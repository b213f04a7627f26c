package io.github.kafkashare.spark.offsets

import io.github.kafkashare.spark.errors.ShareSourceErrors
import io.github.kafkashare.spark.options.Decision
import io.github.kafkashare.spark.offsets.store.CheckpointStore
import org.apache.hadoop.fs.Path

/**
 * Explicit mode: the decisions foreachBatch gave for the records of a batch, under the source's
 * checkpoint directory: `decisions/<batch>/<file>` written by the tasks of an acknowledge call, and
 * `decisions/<batch>/_manifest` naming the files of the call that counts (the last one: a batch that
 * runs again after a failure decides again) and the records it RELEASEd, as offset ranges.
 *
 * A data file: the line `kafka-share decisions v1 by <connector version>` ([[LogHeader]]), then `<a|r|j> <topic> <partition> <offset>` per
 * record (accept, release, reject). Topic names have no spaces.
 */
final class DecisionLog(checkpointDir: String, hadoopConf: SerializableHadoopConf) extends Serializable {
  import DecisionLog._

  @transient private lazy val root  = new Path(checkpointDir, "decisions")
  @transient private lazy val store = CheckpointStore.of(root, hadoopConf.value)

  private def batchDir(batch: Long) = new Path(root, batch.toString)

  /** Writes one task's decisions; returns the file name for the manifest. */
  def writeFile(batch: Long, name: String, decisions: Iterator[(Decision, String, Int, Long)]): String = {
    val text = new StringBuilder(DataHeader.line).append('\n')
    decisions.foreach { case (d, t, p, o) =>
      text.append(codes(d)).append(' ').append(t).append(' ').append(p).append(' ').append(o).append('\n')
    }
    // The name is the task attempt's own (DecisionsWriterFactory): no other writer races for it.
    store.overwrite(new Path(batchDir(batch), name), text.toString)
    name
  }

  /** Makes these files the batch's decisions, replacing an earlier call's. */
  def writeManifest(batch: Long, files: Seq[String], released: TopicPartitionRanges): Unit = {
    val text = new StringBuilder(ManifestHeader.line).append('\n')
    files.foreach(f => text.append("file ").append(f).append('\n'))
    released.byPartition.toSeq.sortBy(_._1).foreach { case ((t, p), ranges) =>
      ranges.ranges.foreach(r => text.append(s"released $t $p ${r.first} ${r.last}\n"))
    }
    store.overwrite(new Path(batchDir(batch), ManifestName), text.toString)
  }

  /** The batch's decisions, or None when foreachBatch gave none. */
  def decisions(batch: Long): Option[Map[(String, Int, Long), Decision]] =
    manifest(batch).map { case (files, _) =>
      files.iterator.flatMap { name =>
        val path = new Path(batchDir(batch), name)
        val lines =
          readText(path).getOrElse(throw ShareSourceErrors.corruptLog(path.toString, "named by the manifest, missing")).split('\n')
        DataHeader.check(lines.headOption.filter(_.nonEmpty), path.toString)
        lines.iterator.drop(1).filter(_.nonEmpty).map { line =>
          line.split(' ') match {
            case Array(code, t, p, o) if decodes.contains(code) =>
              (t, LogHeader.int(p, path.toString, line), LogHeader.long(o, path.toString, line)) -> decodes(code)
            case _ => throw ShareSourceErrors.corruptLog(path.toString, s"cannot read the line '$line'")
          }
        }
      }.toMap
    }

  /**
   * The records of the batch (`inBatch`) that were RELEASEd, by a decision or by `default` for the
   * records that got none: they come back and must be emitted again.
   */
  def released(batch: Long, inBatch: TopicPartitionRanges, default: Decision): TopicPartitionRanges =
    if (default != Decision.Release) manifest(batch).map(_._2).getOrElse(TopicPartitionRanges.empty)
    else {
      val kept = decisions(batch).getOrElse(Map.empty).iterator.collect { case (record, d) if d != Decision.Release => record }
      inBatch.minus(TopicPartitionRanges.ofRecords(kept))
    }

  def purgeBefore(batch: Long): Unit = store.purgeBefore(root, batch)

  private def manifest(batch: Long): Option[(Seq[String], TopicPartitionRanges)] = {
    val path = new Path(batchDir(batch), ManifestName)
    readText(path).map { text =>
      val lines = text.split('\n').toSeq
      ManifestHeader.check(lines.headOption.filter(_.nonEmpty), path.toString)
      val files = lines.collect { case l if l.startsWith("file ") => l.stripPrefix("file ") }
      val released = lines.collect {
        case l if l.startsWith("released ") =>
          l.split(' ') match {
            case Array(_, t, p, first, last) =>
              def long(n: String) = LogHeader.long(n, path.toString, l)
              if (long(first) > long(last)) throw ShareSourceErrors.corruptLog(path.toString, s"the range in '$l' ends before it starts")
              (t, LogHeader.int(p, path.toString, l)) -> OffsetRanges(Seq(OffsetRange(long(first), long(last))))
            case _ => throw ShareSourceErrors.corruptLog(path.toString, s"cannot read the line '$l'")
          }
      }
      files -> released.foldLeft(TopicPartitionRanges.empty)((acc, e) => acc.union(TopicPartitionRanges(Map(e))))
    }
  }

  private def readText(path: Path): Option[String] = store.read(path)
}

object DecisionLog {
  val DataHeader: LogHeader     = LogHeader("decisions", 1)
  val ManifestHeader: LogHeader = LogHeader("decision manifest", 1)
  val ManifestName              = "_manifest"

  private val codes: Map[Decision, String]   = Map(Decision.Accept -> "a", Decision.Release -> "r", Decision.Reject -> "j")
  private val decodes: Map[String, Decision] = codes.map(_.swap)
}
