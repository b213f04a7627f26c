package io.github.kafkashare.spark.offsets

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import com.fasterxml.jackson.databind.{JsonNode, ObjectMapper}
import io.github.kafkashare.spark.errors.ShareSourceErrors
import org.apache.spark.sql.connector.read.streaming.Offset

/**
 * The source's offset for the end of batch `batch`. A share group has no offsets to name, so this is
 * a batch counter plus what a run (or a re-run after a restart) of the batch must know:
 *  - `tasks`: how many read tasks the batch has, fixed once so a re-run splits it the same way;
 *  - `pinned`: the offsets pinned to batches before `batch`, trimmed at the group's start offsets.
 *    The group may still deliver them again: exactly-once strategies drop those redeliveries. The
 *    driver also looks for holes in them to find records that came back to the group.
 *
 * JSON, deterministic (sorted keys), versioned:
 * {{{ {"version":1,"batch":3,"tasks":4,"pinned":{"orders":{"0":[[0,99],[150,180]]}}} }}}
 */
final case class ShareSourceOffset(batch: Long, tasks: Int, pinned: TopicPartitionRanges) extends Offset {

  override def json(): String = {
    val topics = pinned.byPartition.groupBy(_._1._1).toSeq.sortBy(_._1).map { case (topic, parts) =>
      val partitions = parts.toSeq.sortBy(_._1._2).map { case ((_, p), ranges) =>
        s""""$p":${ranges.ranges.map(r => s"[${r.first},${r.last}]").mkString("[", ",", "]")}"""
      }
      s"${ShareSourceOffset.quote(topic)}:{${partitions.mkString(",")}}"
    }
    s"""{"version":${ShareSourceOffset.Version},"batch":$batch,"tasks":$tasks,"pinned":{${topics.mkString(",")}}}"""
  }
}

object ShareSourceOffset {
  val Version = 1

  /** Before the first batch: nothing pinned. */
  val initial: ShareSourceOffset = ShareSourceOffset(batch = -1, tasks = 0, TopicPartitionRanges.empty)

  private val mapper = new ObjectMapper()

  def fromJson(json: String): ShareSourceOffset = {
    val root: JsonNode = try mapper.readTree(json) catch {
      case NonFatal(e) => throw ShareSourceErrors.badOffsetJson(json, e)
    }
    if (root == null || !root.isObject || !root.path("version").isInt || !root.path("batch").canConvertToLong || !root.path("tasks").isInt)
      throw ShareSourceErrors.badOffsetJson(json, null)
    val version = root.get("version").asInt
    if (version != Version) throw ShareSourceErrors.unsupportedOffsetVersion(version, json)
    try {
      val pinned = root.path("pinned").fields().asScala.flatMap { topic =>
        topic.getValue.fields().asScala.map { partition =>
          val ranges = partition.getValue.elements().asScala.map { pair =>
            require(pair.isArray && pair.size == 2, s"a range is [first,last], got $pair")
            OffsetRange(pair.get(0).asLong, pair.get(1).asLong)
          }.toSeq
          (topic.getKey, partition.getKey.toInt) -> OffsetRanges(ranges)
        }
      }.toMap
      ShareSourceOffset(root.get("batch").asLong, root.get("tasks").asInt, TopicPartitionRanges(pinned))
    } catch {
      case NonFatal(e) => throw ShareSourceErrors.badOffsetJson(json, e)
    }
  }

  private[offsets] def quote(s: String): String = mapper.writeValueAsString(s)
}
