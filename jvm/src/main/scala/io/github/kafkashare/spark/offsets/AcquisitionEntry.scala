package io.github.kafkashare.spark.offsets

import io.github.kafkashare.spark.errors.ShareSourceErrors

/** Consecutive offsets `first..last` of one partition, acquired with the same delivery count. */
final case class AcquiredRun(topic: String, partition: Int, first: Long, last: Long, deliveryCount: Int) {
  def size: Long = last - first + 1
}

/**
 * What one read task of one batch acquired and pinned: the identity of each record, compressed into
 * runs. A few bytes per run, never one line per record.
 *
 * Text format, one file per (batch, task):
 * {{{
 *   kafka-share acquisitions v1 by 0.1.0
 *   orders 0 0-99:1 120-130:2
 *   orders 1 7-7:1
 * }}}
 * Topic names cannot hold spaces (Kafka allows [a-zA-Z0-9._-]), so spaces separate fields.
 */
final case class AcquisitionEntry(runs: Seq[AcquiredRun]) {

  def recordCount: Long = runs.iterator.map(_.size).sum

  def offsets: TopicPartitionRanges = TopicPartitionRanges(
    runs.groupBy(r => (r.topic, r.partition)).map { case (tp, rs) =>
      tp -> OffsetRanges(rs.map(r => OffsetRange(r.first, r.last)))
    }
  )

  def serialize: String = {
    val lines = runs.groupBy(r => (r.topic, r.partition)).toSeq.sortBy(_._1).map { case ((topic, partition), rs) =>
      (Seq(topic, partition.toString) ++ rs.sortBy(_.first).map(r => s"${r.first}-${r.last}:${r.deliveryCount}")).mkString(" ")
    }
    (AcquisitionEntry.Header.line +: lines).mkString("", "\n", "\n")
  }
}

object AcquisitionEntry {
  val Header: LogHeader = LogHeader("acquisitions", 1)

  val empty: AcquisitionEntry = AcquisitionEntry(Nil)

  /** The offsets of `entries` added to `into`: what a batch's tasks, or a task's siblings, pinned. */
  def offsetsOf(entries: Iterable[AcquisitionEntry], into: TopicPartitionRanges = TopicPartitionRanges.empty): TopicPartitionRanges =
    entries.foldLeft(into)((acc, e) => acc.union(e.offsets))

  /** Runs from records given as (topic, partition, offset, deliveryCount), in any order. */
  def of(records: Iterable[(String, Int, Long, Int)]): AcquisitionEntry = {
    // A poll's records come partition after partition, in offset order: TimSort sees those runs and
    // merges them in linear time. Called for every poll, so no key tuple per record.
    val sorted           = records.toArray.sortInPlace()(RecordOrder)
    val runs             = Vector.newBuilder[AcquiredRun]
    var run: AcquiredRun = null
    sorted.foreach { case (t, p, o, d) =>
      if (run != null && run.partition == p && run.last + 1 == o && run.deliveryCount == d && run.topic == t) run = run.copy(last = o)
      else {
        if (run != null) runs += run
        run = AcquiredRun(t, p, o, o, d)
      }
    }
    if (run != null) runs += run
    AcquisitionEntry(runs.result())
  }

  /** The order of records in an entry, and of a part's rows (fresh and replayed): topic, partition, offset. */
  def compareRecords(topicA: String, partitionA: Int, offsetA: Long, topicB: String, partitionB: Int, offsetB: Long): Int = {
    val byTopic = topicA.compareTo(topicB)
    if (byTopic != 0) byTopic
    else if (partitionA != partitionB) Integer.compare(partitionA, partitionB)
    else java.lang.Long.compare(offsetA, offsetB)
  }

  private object RecordOrder extends Ordering[(String, Int, Long, Int)] {
    def compare(a: (String, Int, Long, Int), b: (String, Int, Long, Int)): Int = compareRecords(a._1, a._2, a._3, b._1, b._2, b._3)
  }

  def parse(text: String, path: String): AcquisitionEntry = {
    val lines = text.split("\n").toSeq.filter(_.nonEmpty)
    Header.check(lines.headOption, path)
    AcquisitionEntry(lines.tail.flatMap { line =>
      line.split(" ").toSeq match {
        case topic +: partition +: runs if runs.nonEmpty =>
          val p = LogHeader.int(partition, path, line)
          runs.map {
            case run @ AcquisitionEntry.RunFormat(first, last, count) =>
              val (from, to) = (LogHeader.long(first, path, line), LogHeader.long(last, path, line))
              if (from > to) throw ShareSourceErrors.corruptLog(path, s"'$run' ends before it starts")
              AcquiredRun(topic, p, from, to, LogHeader.int(count, path, line))
            case run => throw ShareSourceErrors.corruptLog(path, s"'$run' is not first-last:deliveryCount")
          }
        case _ => throw ShareSourceErrors.corruptLog(path, s"the line '${line.take(80)}' is not 'topic partition runs...'")
      }
    })
  }

  private val RunFormat = """(\d+)-(\d+):(\d+)""".r
}
