package io.github.kafkashare.spark.planning

import io.github.kafkashare.spark.errors.ShareSourceErrors
import io.github.kafkashare.spark.offsets.{AcquisitionLog, ShareSourceOffset, TopicPartitionRanges}
import io.github.kafkashare.spark.options.ShareSourceOptions
import org.apache.spark.internal.Logging

/**
 * Whether an offset still names the records it pinned: the same group, the same cluster, and topics
 * that were not deleted and created again under their names since (which start again at offset 0).
 */
private[planning] final class OffsetIdentity(options: ShareSourceOptions, cluster: ClusterView, acquisitions: AcquisitionLog)
    extends Logging {

  lazy val clusterId: String = cluster.clusterId()

  /** Refuses offsets of another group or cluster: their pinned records and replays name other records. */
  def check(offset: ShareSourceOffset): Unit = {
    if (offset.group.nonEmpty && offset.group != options.groupId) throw ShareSourceErrors.groupChanged(offset.group, options.groupId)
    if (offset.cluster.nonEmpty && offset.cluster != clusterId)
      throw ShareSourceErrors.clusterChanged(offset.cluster, clusterId, options.bootstrapServers)
  }

  /**
   * A topic deleted and created again under its name starts at offset 0 again: the offsets pinned for
   * the old topic name none of the new one's records, and left in the set they would drop them as
   * redeliveries. The new topic is read from the group's start, like any new topic.
   */
  def withoutRecreatedTopics(pinned: TopicPartitionRanges, start: ShareSourceOffset, ids: Map[String, String]): TopicPartitionRanges = {
    val recreated = start.topicIds.collect { case (t, id) if ids.get(t).exists(_ != id) => t }.toSet
    if (recreated.isEmpty) pinned
    else {
      logWarning(s"kafka-share: topic(s) ${recreated.mkString(", ")} were deleted and created again since batch " +
        s"${start.batch}; forgetting the offsets pinned for the old topic(s), which name none of the new records")
      TopicPartitionRanges(pinned.byPartition.filter { case ((t, _), _) => !recreated(t) })
    }
  }

  /**
   * A batch planned before a restart runs again: its pinned records are replayed by topic, partition
   * and offset, which must still name the same records.
   */
  def checkReplayable(batchEnd: ShareSourceOffset, topics: Seq[String]): Unit = {
    check(batchEnd)
    val pinnedTopics = acquisitions.partsOf(batchEnd.batch).flatMap(_.runs.map(_.topic)).toSet
    val recorded     = batchEnd.topicIds.filter { case (t, _) => pinnedTopics(t) }
    val ids          = cluster.topicsNow(recorded.keys.toSeq.filter(topics.contains)).ids
    recorded.foreach { case (t, id) =>
      ids.get(t).filter(_ != id).foreach(now => throw ShareSourceErrors.topicRecreated(t, id, now, batchEnd.batch))
    }
  }
}
