package io.github.kafkashare.spark.options

/** The name, default and meaning of every option; docs/options.md is written from this list. */
final case class OptionDeclaration(key: String, default: String, meaning: String)

object OptionDeclarations {
  val BootstrapServers     = "kafka.bootstrap.servers"
  val GroupId              = "kafka.share.group.id"
  val Subscribe            = "subscribe"
  val SubscribePattern     = "subscribePattern"
  val AckMode              = "kafka.share.acknowledgment.mode"
  val Strategy             = "kafka.share.exactly.once.strategy"
  val Parallelism          = "kafka.share.parallelism"
  val LockTimeoutMs        = "kafka.share.lock.timeout.ms"
  val IncludeHeaders       = "includeHeaders"
  val MaxRecordsPerTrigger = "maxRecordsPerTrigger"
  val StartingOffsetsKey   = "startingOffsets"
  val PollTimeoutMs        = "kafka.share.poll.timeout.ms"
  val ReadDurationMs       = "kafka.share.read.duration.ms"
  val FailOnDataLoss       = "failOnDataLoss"
  val DefaultDecision      = "kafka.share.acknowledgment.default"
  val MaxDeliveries        = "kafka.share.maxDeliveries"
  val DeadLetterTopic      = "kafka.share.deadLetterTopic"

  val DefaultPollTimeoutMs  = 2000L
  val DefaultReadDurationMs = 1000L

  val all: Seq[OptionDeclaration] = Seq(
    OptionDeclaration(BootstrapServers, "(required)", "The Kafka brokers, host:port, comma-separated."),
    OptionDeclaration(
      GroupId,
      "(required)",
      "The share group the query reads as. Other queries and consumers in the same group share its records."
    ),
    OptionDeclaration(Subscribe, "", "Topics to read, comma-separated. Exactly one of subscribe and subscribePattern."),
    OptionDeclaration(
      SubscribePattern,
      "",
      "A Java regex matched against the cluster's topics, re-checked at every trigger, so new topics are picked up. While it matches no topic the query waits and runs no batch. A new topic is read from where the group's share.auto.offset.reset puts it when the group first reads it: startingOffsets sets that only while the group has no state, and the broker's default is latest, which skips what was written to the topic before. To read new topics from their first record, set share.auto.offset.reset=earliest on the group (kafka-configs.sh --alter --entity-type groups --entity-name <group> --add-config share.auto.offset.reset=earliest)."
    ),
    OptionDeclaration(
      AckMode,
      "implicit",
      "implicit: the source acknowledges per the strategy. explicit: foreachBatch decides per record (ACCEPT, RELEASE, REJECT) with spark_kafka_share.acknowledge; applied after the batch commits."
    ),
    OptionDeclaration(
      DefaultDecision,
      "accept",
      "explicit mode: the decision for records of a committed batch that got none, accept or release."
    ),
    OptionDeclaration(
      Strategy,
      "none",
      "none or idempotent (at least once), checkpoint-dedup or two-phase-commit (exactly once with an idempotent sink)."
    ),
    OptionDeclaration(
      Parallelism,
      "spark.default.parallelism",
      "Share consumers (input partitions) per batch. May exceed the topics' partition count."
    ),
    OptionDeclaration(
      LockTimeoutMs,
      "the group's share.record.lock.duration.ms",
      "The lock duration the source plans with; a batch that holds records longer is reported."
    ),
    OptionDeclaration(IncludeHeaders, "false", "Adds the headers column."),
    OptionDeclaration(
      MaxRecordsPerTrigger,
      "(none)",
      "Upper bound on records per batch, split evenly over the input partitions. " +
        "Records on their last delivery attempt " +
        "(`share.delivery.count.limit`) are taken even past the bound: going back to the group would get them archived."
    ),
    OptionDeclaration(
      StartingOffsetsKey,
      "latest",
      "earliest or latest: sets the group's share.auto.offset.reset, only while the group has no state."
    ),
    OptionDeclaration(
      PollTimeoutMs,
      DefaultPollTimeoutMs.toString,
      "How long a read task waits for its first record before it ends empty."
    ),
    OptionDeclaration(
      ReadDurationMs,
      DefaultReadDurationMs.toString,
      "How long a read task keeps polling while there is a backlog (a poll returned at least half of max.poll.records, or redelivered records, which brokers hand out few at a time), pinning each poll's records before it acknowledges them: longer gives bigger batches that pay Spark's per-batch cost once for more records. 0 polls once. Tasks that hold records until the commit (two-phase-commit, explicit mode) poll once."
    ),
    OptionDeclaration(FailOnDataLoss, "true", "Fail when a batch that must run again finds its records removed by retention."),
    OptionDeclaration(
      MaxDeliveries,
      "(none)",
      "Poison records: the highest delivery count the source emits. A record delivered more often is REJECTed (after going to the dead-letter topic, if set). Keep it below the group's share.delivery.count.limit (5 by default), at which the broker drops records by itself."
    ),
    OptionDeclaration(
      DeadLetterTopic,
      "(none)",
      "With kafka.share.maxDeliveries: a topic that receives poison records before they are REJECTed, with headers naming their origin."
    ),
    OptionDeclaration("kafka.*", "", "Any other Kafka client setting (security, fetch sizes), passed to the consumers.")
  )

  /**
   * Kafka client settings that a share consumer rejects or that the source owns, with what to use instead.
   * Keys are without the `kafka.` prefix.
   */
  val RefusedKafkaOptions: Map[String, String] = Map(
    "group.id"                      -> "use option 'kafka.share.group.id'",
    "auto.offset.reset"             -> "use option 'startingOffsets' (earliest or latest), which sets the group's share.auto.offset.reset",
    "enable.auto.commit"            -> "the source acknowledges records itself, per 'kafka.share.exactly.once.strategy'",
    "group.instance.id"             -> "share groups have no static membership; remove it",
    "isolation.level"               -> "set the group config share.isolation.level on the share group instead",
    "partition.assignment.strategy" -> "the broker assigns partitions to share consumers; remove it",
    "group.remote.assignor"         -> "the broker assigns partitions to share consumers; remove it",
    "group.protocol"                -> "share consumers always use the share protocol; remove it",
    "interceptor.classes"           -> "share consumers do not support interceptors; remove it",
    "session.timeout.ms"            -> "set the group config share.session.timeout.ms on the share group instead",
    "heartbeat.interval.ms"         -> "set the group config share.heartbeat.interval.ms on the share group instead",
    "key.deserializer"              -> "the source reads keys as bytes; deserialize in the query (for example CAST(key AS STRING))",
    "value.deserializer"            -> "the source reads values as bytes; deserialize in the query (for example from_json)",
    "share.acknowledgement.mode"    -> "the source drives acknowledgement itself; use 'kafka.share.acknowledgment.mode'"
  )

  /**
   * Options of Spark's built-in Kafka source that mean nothing to a share group, with what to use
   * instead. Users switching sources bring them along; silently ignored, they would seem to work.
   */
  val BuiltInKafkaSourceOptions: Map[String, String] = Map(
    "maxOffsetsPerTrigger"               -> s"use '$MaxRecordsPerTrigger' (a share group hands out records, not offset ranges)",
    "minOffsetsPerTrigger"               -> s"a share group has no offset ranges to wait for; use '$MaxRecordsPerTrigger' to bound batches",
    "maxTriggerDelay"                    -> "a share group has no offset ranges to wait for; remove it",
    "minPartitions"                      -> s"use '$Parallelism' (share consumers per batch; it may exceed the topics' partition count)",
    "maxRecordsPerPartition"             -> s"use '$MaxRecordsPerTrigger' to bound batches and '$Parallelism' for the number of read tasks",
    "assign"                             -> s"use '$Subscribe' (the broker assigns partitions to share consumers)",
    "startingTimestamp"                  -> s"a share group starts where the group is; use '$StartingOffsetsKey' (earliest or latest)",
    "startingOffsetsByTimestamp"         -> s"a share group starts where the group is; use '$StartingOffsetsKey' (earliest or latest)",
    "startingOffsetsByTimestampStrategy" -> s"a share group starts where the group is; use '$StartingOffsetsKey' (earliest or latest)",
    "endingOffsets"                      -> "a stream has no end offsets; use Trigger.AvailableNow to read what is there and stop",
    "endingTimestamp"                    -> "a stream has no end offsets; use Trigger.AvailableNow to read what is there and stop",
    "endingOffsetsByTimestamp"           -> "a stream has no end offsets; use Trigger.AvailableNow to read what is there and stop",
    "groupIdPrefix"                      -> s"use '$GroupId' (the share group's name)",
    "kafkaConsumer.pollTimeoutMs"        -> s"use '$PollTimeoutMs'",
    "fetchOffset.numRetries"             -> "the source fetches no offsets to retry; remove it",
    "fetchOffset.retryIntervalMs"        -> "the source fetches no offsets to retry; remove it"
  )
}
