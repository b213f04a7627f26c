package io.github.kafkashare.spark.offsets

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import com.fasterxml.jackson.databind.{JsonNode, ObjectMapper}
import io.github.kafkashare.spark.errors.ShareSourceErrors
import org.apache.spark.sql.connector.read.streaming.Offset

/**
 * The source's offset for the end of batch `batch` (Spark's batch id). A share group has no offsets
 * to name, so this is the batch plus what a run (or a re-run after a restart) of the batch must know:
 *  - `tasks`: how many read tasks the batch has, fixed once so a re-run splits it the same way;
 *  - `pinned`: the offsets pinned to batches before `batch`, trimmed at the group's start offsets.
 *    The group may still deliver them again: exactly-once strategies drop those redeliveries. The
 *    driver also looks for holes in them to find records that came back to the group;
 *  - what the offsets mean: the `cluster` id, the share `group` and the id of each topic
 *    (`topicIds`). A topic deleted and created again under its name, another group or another
 *    cluster behind the same checkpoint would otherwise make new records at old offsets look pinned.
 *    Empty in offsets of version 1 (written before they were recorded): then nothing is checked;
 *  - `unemitted` (real-time mode only, absent otherwise): records the batch pinned and ACCEPTed but did
 *    not emit, because Spark ended its tasks on time between two rows of a poll. The next batch emits them
 *    first (from the log, by offset), so that none is lost ([[io.github.kafkashare.spark.reader.RealTimeRecords]]).
 *
 * JSON, deterministic (fields in a fixed order, topics sorted), versioned:
 * {{{ {"version":2,"batch":3,"tasks":4,"cluster":"q1Sh…","group":"orders-processing",
 *      "topicIds":{"orders":"mK3…"},"pinned":{"orders":{"0":[[0,99],[150,180]]}}} }}}
 */
final case class ShareSourceOffset(
    batch: Long,
    tasks: Int,
    pinned: TopicPartitionRanges,
    cluster: String = "",
    group: String = "",
    topicIds: Map[String, String] = Map.empty,
    version: Int = ShareSourceOffset.Version,
    unemitted: Seq[AcquiredRun] = Nil
) extends Offset {

  // Spark compares offsets by their JSON: an offset read from the log must serialize to the same
  // text, or Spark would take an unchanged offset of version 1 for new data and run a batch.
  // An end that names unemitted records is version 3: a connector that reads up to 2 refuses it rather
  // than ignore them (they were ACCEPTed: ignored, they would be lost).
  override def json(): String = if (version == 1) jsonV1
  else {
    import ShareSourceOffset.quote
    val ids     = topicIds.toSeq.sorted.map { case (t, id) => s"${quote(t)}:${quote(id)}" }
    val written = if (unemitted.isEmpty) ShareSourceOffset.Version else ShareSourceOffset.RealTimeVersion
    s"""{"version":$written,"batch":$batch,"tasks":$tasks,"cluster":${quote(cluster)},""" +
      s""""group":${quote(group)},"topicIds":{${ids.mkString(",")}},"pinned":{${pinnedJson.mkString(",")}}""" +
      (if (unemitted.isEmpty) "}"
       else s""","unemitted":${unemitted.map(r => quote(ShareSourceOffset.runText(r))).mkString("[", ",", "]")}}""")
  }

  private def jsonV1: String = s"""{"version":1,"batch":$batch,"tasks":$tasks,"pinned":{${pinnedJson.mkString(",")}}}"""

  private def pinnedJson: Seq[String] =
    pinned.byPartition.groupBy(_._1._1).toSeq.sortBy(_._1).map { case (topic, parts) =>
      val partitions = parts.toSeq.sortBy(_._1._2).map { case ((_, p), ranges) =>
        s""""$p":${ranges.ranges.map(r => s"[${r.first},${r.last}]").mkString("[", ",", "]")}"""
      }
      s"${ShareSourceOffset.quote(topic)}:{${partitions.mkString(",")}}"
    }
}

object ShareSourceOffset {
  val Version = 2

  /** The version of an end that names unemitted records (real time); the newest this connector reads. */
  val RealTimeVersion = 3

  /** Before the first batch: nothing pinned. */
  val initial: ShareSourceOffset = ShareSourceOffset(batch = -1, tasks = 0, TopicPartitionRanges.empty)

  private val mapper = new ObjectMapper()

  /**
   * Any offset Spark hands the source. After a restart Spark may pass what it read back from its
   * offset log as it is (a `SerializedOffset` holding the JSON) to latestOffset, planInputPartitions,
   * commit or metrics, so every incoming offset goes through here, never through a cast.
   */
  def of(offset: Offset): ShareSourceOffset = offset match {
    case ours: ShareSourceOffset => ours
    case other                   => fromJson(other.json())
  }

  def fromJson(json: String): ShareSourceOffset = {
    val root: JsonNode =
      try mapper.readTree(json)
      catch {
        case NonFatal(e) => throw ShareSourceErrors.badOffsetJson(json, e)
      }
    if (root == null || !root.isObject || !root.path("version").isInt || !root.path("batch").canConvertToLong || !root.path("tasks").isInt)
      throw ShareSourceErrors.badOffsetJson(json, null)
    val version = root.get("version").asInt
    if (version < 1 || version > RealTimeVersion) throw ShareSourceErrors.unsupportedOffsetVersion(version, RealTimeVersion, json)
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
      val topicIds  = root.path("topicIds").fields().asScala.map(e => e.getKey -> e.getValue.asText).toMap
      val unemitted = root.path("unemitted").elements().asScala.map(e => parseRun(e.asText)).toSeq
      ShareSourceOffset(
        root.get("batch").asLong,
        root.get("tasks").asInt,
        TopicPartitionRanges(pinned),
        cluster = root.path("cluster").asText(""),
        group = root.path("group").asText(""),
        topicIds = topicIds,
        version = version,
        unemitted = unemitted
      )
    } catch {
      case NonFatal(e) => throw ShareSourceErrors.badOffsetJson(json, e)
    }
  }

  private[offsets] def quote(s: String): String = mapper.writeValueAsString(s)

  /** A run as `topic partition first-last:deliveryCount` (topic names hold no spaces). */
  private def runText(r: AcquiredRun): String = s"${r.topic} ${r.partition} ${r.first}-${r.last}:${r.deliveryCount}"

  private val RunText = """(\S+) (\d+) (\d+)-(\d+):(\d+)""".r

  private def parseRun(text: String): AcquiredRun = text match {
    case RunText(topic, partition, first, last, count) if first.toLong <= last.toLong =>
      AcquiredRun(topic, partition.toInt, first.toLong, last.toLong, count.toInt)
    case _ => throw new IllegalArgumentException(s"an unemitted run is 'topic partition first-last:deliveryCount', got '$text'")
  }
}
