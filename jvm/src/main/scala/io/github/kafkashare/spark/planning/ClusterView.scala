package io.github.kafkashare.spark.planning

/**
 * What a running stream asks the cluster at each trigger. [[ClusterAccess]] answers through Kafka's
 * Admin client; the stream's unit suite answers with a fake, so that the planning loop (when a batch
 * runs, what it pins, which offsets it refuses) is tested without a broker.
 */
trait ClusterView extends AutoCloseable {

  /** The topics the subscription names now; a fixed list must exist. */
  def resolveTopics(): Seq[String]

  /** The log end offset of every partition of `topics`, and each topic's id, in one look. */
  def topicsNow(topics: Seq[String]): TopicsNow

  /** The log end offset of every partition of `topics`. */
  def endOffsets(topics: Seq[String]): Map[(String, Int), Long] = topicsNow(topics).ends

  /** Each topic's id, without the ends: a check that a look taken earlier still holds ([[LookAhead]]). */
  def topicIds(topics: Seq[String]): Map[String, String] = topicsNow(topics).ids

  /** The id of the cluster the bootstrap servers lead to. */
  def clusterId(): String

  /** The group's start offset per partition, with the broker's lag where it reports one. Empty before the group has state. */
  def groupOffsets(): Map[(String, Int), GroupPartitionOffset]

  /** How many deliveries the group allows before a record is archived, where that loses it (None: no record is lost so). */
  def deliveryCountLimit(): Option[Int]

  /**
   * The timestamp (epoch ms) of the record at each of these offsets, or of the next record there; a partition
   * that gives none in time is left out. For backlogAgeMs ([[BacklogAge]]); a fake cluster reads none.
   */
  def recordTimestamps(offsets: Map[(String, Int), Long]): Map[(String, Int), Long] = Map.empty
}
