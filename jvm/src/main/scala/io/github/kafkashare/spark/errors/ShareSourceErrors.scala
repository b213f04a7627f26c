package io.github.kafkashare.spark.errors

/**
 * Every error a user can get from the source, one factory each, so the wording lives in one place
 * and docs/troubleshooting can list them. Each message names the option or setting and the fix.
 */
final class ShareSourceException(message: String, cause: Throwable = null)
    extends IllegalArgumentException(message, cause)

object ShareSourceErrors {

  /** Said with every warning about records on their last delivery attempt (executor and driver logs). */
  val LastAttemptAdvice: String = "if they come back to the group once more the broker archives them. Earlier " +
    "attempts ended in failures (crashes, expired locks, RELEASE decisions); raise share.delivery.count.limit (group) " +
    "or group.share.delivery.count.limit (broker) if failures are frequent"

  /** A warning at start: the checkpoint is on a store where two writers of one log file can both win. */
  def checkpointStoreNotAtomic(checkpointDir: String, writtenBy: String): String =
    s"kafka-share: the checkpoint '$checkpointDir' is on a store whose rename is a check followed by a copy, and " +
      s"the source's logs are written by $writtenBy there. If two attempts of one read task run at once (an " +
      "executor lost but still running, a stage retried, two actions of foreachBatch in threads), both can pin " +
      "records in the same log file and the records of the one overwritten are lost. Use a store that can " +
      "create a file only if absent: S3 through S3A on Hadoop 3.4.2 or later (Spark 4.1 and later, with " +
      "fs.s3a.create.conditional.enabled left true), HDFS, ABFS with a hierarchical namespace, or a " +
      "spark.sql.streaming.checkpointFileManagerClass whose createAtomic refuses to overwrite atomically"

  private def error(message: String, cause: Throwable = null) =
    new ShareSourceException(s"kafka-share: $message", cause)

  def missingOption(option: String, example: String): ShareSourceException =
    error(s"option '$option' is required; set it, for example .option(\"$option\", \"$example\")")

  def invalidValue(option: String, value: String, expected: String): ShareSourceException =
    error(s"option '$option' has the invalid value '$value'; expected $expected")

  def subscriptionCount(supplied: Seq[String]): ShareSourceException =
    error(s"set exactly one of 'subscribe' (a comma-separated topic list) or 'subscribePattern' " +
      s"(a Java regex); got ${if (supplied.isEmpty) "neither" else supplied.mkString(" and ")}")

  def refusedKafkaOption(option: String, instead: String): ShareSourceException =
    error(s"option 'kafka.$option' cannot be used with a share group; $instead")

  def builtInKafkaSourceOption(option: String, instead: String): ShareSourceException =
    error(s"option '$option' belongs to Spark's built-in Kafka source, not to kafka-share; $instead")

  def unknownOption(option: String, suggestion: Option[String]): ShareSourceException =
    error(s"option '$option' is not an option of kafka-share" +
      suggestion.fold("")(s => s"; did you mean '$s'?") +
      " (the options are listed in the project's docs/options.md; Kafka client settings go through as " +
      "'kafka.<setting>', but 'kafka.share.*' names belong to this source)")

  def onlyWith(option: String, requirement: String): ShareSourceException =
    error(s"option '$option' applies only with '$requirement'; set that too, or remove '$option'")

  def batchRead(): ShareSourceException =
    error("kafka-share is a streaming source: read it with spark.readStream.format(\"kafka-share\"), not spark.read. " +
      "A share group has no fixed set of records to read as a batch; to read what is there and stop, start the " +
      "stream with .trigger(availableNow=True)")

  def speculationEnabled(): ShareSourceException =
    error("spark.speculation=true would let two attempts of one read task acquire records for the same batch " +
      "partition; set spark.speculation=false for queries that read kafka-share")

  def parallelismAboveGroupSize(parallelism: Int, maxSize: Int, group: String): ShareSourceException =
    error(s"option 'kafka.share.parallelism' = $parallelism asks for more share consumers than share group '$group' " +
      s"may have: the broker's group.share.max.size ($maxSize). Each read task is a member of the group; set " +
      s"'kafka.share.parallelism' to at most $maxSize, or raise group.share.max.size on the brokers")

  def missingTopics(topics: Seq[String], bootstrap: String): ShareSourceException =
    error(s"topic(s) ${topics.mkString(", ")} do not exist on $bootstrap; create them, or fix option 'subscribe'")

  def brokerUnreachable(bootstrap: String, timeoutMs: Long, cause: Throwable): ShareSourceException =
    error(
      s"no Kafka broker answered at '$bootstrap' (option 'kafka.bootstrap.servers') within $timeoutMs ms; " +
        "check the address and that the broker is running",
      cause
    )

  def bootstrapUnresolvable(bootstrap: String, cause: Throwable): ShareSourceException =
    error(
      s"no host of '$bootstrap' (option 'kafka.bootstrap.servers') resolves to an address; check the host names " +
        "(and the DNS of the driver and executors)",
      cause
    )

  // The broker's own message says which mechanism failed; it never holds the password.
  def authenticationFailed(bootstrap: String, cause: Throwable): ShareSourceException =
    error(
      s"the Kafka cluster at '$bootstrap' refused the credentials (${cause.getClass.getSimpleName}: " +
        s"${cause.getMessage}). Check options 'kafka.security.protocol', 'kafka.sasl.mechanism' and the user name and " +
        "password in 'kafka.sasl.jaas.config' (or the 'kafka.ssl.*' key and trust stores)",
      cause
    )

  def notAuthorized(bootstrap: String, group: String, cause: Throwable): ShareSourceException =
    error(
      s"the Kafka cluster at '$bootstrap' denied an operation (${cause.getMessage}). The user needs READ and " +
        s"DESCRIBE on the topics, READ and DESCRIBE_CONFIGS on group '$group', and ALTER_CONFIGS on it when the query sets startingOffsets",
      cause
    )

  def shareGroupsDisabled(bootstrap: String, cause: Throwable): ShareSourceException =
    error(
      s"the Kafka cluster at '$bootstrap' does not serve share groups (KIP-932). Kafka 4.2 and later enable " +
        "them by default; on Kafka 4.1 run `kafka-features.sh --bootstrap-server <broker> upgrade --feature share.version=1` " +
        "(or format new storage with --feature share.version=1). Kafka 4.0 and earlier cannot serve this source",
      cause
    )

  def dataLost(topic: String, partition: Int, from: Long, to: Long, earliest: Long): ShareSourceException =
    error(s"records $topic-$partition offsets $from..$to, pinned to a batch that must run again, are no longer in " +
      s"the topic (its earliest offset is now $earliest: retention or compaction removed them). The batch cannot be " +
      "replayed as it was; raise the topic's retention, or set failOnDataLoss=false to replay what is left")

  def replayStalled(
      topic: String,
      partition: Int,
      from: Long,
      to: Long,
      bootstrap: String,
      seconds: Long,
      cause: Throwable = null
  ): ShareSourceException =
    error(
      s"replaying records $topic-$partition offsets $from..$to, pinned to a batch that must run again, got no record " +
        s"for $seconds s from '$bootstrap' (option 'kafka.bootstrap.servers'). Check that the brokers are up and that the " +
        "topic still exists; a deleted topic's records cannot be replayed (start the query with a new checkpointLocation)",
      cause
    )

  def corruptLog(path: String, detail: String): ShareSourceException =
    error(s"the acquisition log file $path is not valid ($detail). It belongs to the query's checkpoint; " +
      "restore the checkpoint from a copy, or start the query with a new checkpointLocation")

  def unsupportedOffsetVersion(version: Int, json: String): ShareSourceException =
    error(s"the checkpoint holds a kafka-share offset of version $version, newer than this connector reads (1 to " +
      s"${io.github.kafkashare.spark.offsets.ShareSourceOffset.Version}): " +
      s"$json. Run the query with the connector version that wrote the checkpoint, or a newer one")

  def badOffsetJson(json: String, cause: Throwable): ShareSourceException =
    error(
      s"cannot read the kafka-share offset '$json' from the checkpoint; expected for example " +
        """{"version":2,"batch":3,"tasks":4,"cluster":"q1ShRk0VQ3aZ","group":"orders-processing",""" +
        """"topicIds":{"orders":"mK3vKQ3xT9Kc"},"pinned":{"orders":{"0":[[0,99]]}}}""",
      cause
    )

  def groupChanged(recorded: String, now: String): ShareSourceException =
    error(s"the checkpoint belongs to share group '$recorded', but option 'kafka.share.group.id' is now '$now'. The " +
      "checkpoint's pinned records and replays are those of the other group; set 'kafka.share.group.id' back to " +
      s"'$recorded', or start the query with a new checkpointLocation for group '$now'")

  def clusterChanged(recorded: String, now: String, bootstrap: String): ShareSourceException =
    error(s"the checkpoint belongs to the Kafka cluster with id '$recorded', but '$bootstrap' (option " +
      s"'kafka.bootstrap.servers') is the cluster '$now'. Offsets of one cluster name other records on another; point " +
      "'kafka.bootstrap.servers' at the original cluster, or start the query with a new checkpointLocation")

  def topicRecreated(topic: String, recorded: String, now: String, batch: Long): ShareSourceException =
    error(s"topic '$topic' was deleted and created again (its id was $recorded, now $now) after batch $batch pinned " +
      "records of it. The batch must run again and would read the new topic's records at the old offsets; the old " +
      "records are gone. Start the query with a new checkpointLocation (the new topic is read from the group's start)")

  def explicitModeNeedsForeachBatch(sink: String): ShareSourceException =
    error(s"option 'kafka.share.acknowledgment.mode' = 'explicit' needs a query whose foreachBatch gives the decisions " +
      s"(spark_kafka_share.acknowledge / KafkaShareDecisions.acknowledge); this query writes to $sink. Use " +
      ".writeStream.foreachBatch(...), or the implicit mode")

  def explicitGroupTaken(group: String): ShareSourceException =
    error(s"another running query of this Spark application reads share group '$group' in explicit mode; decisions " +
      "are matched to queries by group, so give each explicit-mode query its own 'kafka.share.group.id', or stop the other")

  def noExplicitQuery(group: String): ShareSourceException =
    error(s"no running query of this Spark application reads share group '$group' with " +
      "'kafka.share.acknowledgment.mode' = 'explicit'; acknowledge from inside that query's foreachBatch, with its group id")

  def wrongDecisionBatch(group: String, requested: Long, running: Long): ShareSourceException =
    error(s"decisions for batch $requested of share group '$group', but its query is running batch $running; pass the " +
      "batch id that foreachBatch received")

  def decisionColumns(found: String): ShareSourceException =
    error(s"decisions need the columns topic (string), partition (int), offset (long) and decision (string: " +
      s"accept, release or reject); got $found. Select them from the batch DataFrame, for example " +
      "batch.select(\"topic\", \"partition\", \"offset\", decision_column.alias(\"decision\"))")

  def unknownDecision(value: String, topic: String, partition: Int, offset: Long): ShareSourceException =
    error(s"unknown decision '$value' for $topic-$partition offset $offset; use accept, release or reject")

  def recordNotInBatch(topic: String, partition: Int, offset: Long, batch: Long): ShareSourceException =
    error(s"a decision for $topic-$partition offset $offset, which is not a record of batch $batch; decide only on " +
      "records of the batch DataFrame that foreachBatch received")

  def deadLetterFailed(topic: String, cause: Throwable): ShareSourceException =
    error(
      s"writing poison records to the dead-letter topic '$topic' (option 'kafka.share.deadLetterTopic') failed; " +
        "check that the topic exists and the client may write to it. The records stay with the group",
      cause
    )
}
