package io.github.kafkashare.spark.options

/**
 * One option, declared once: its key, the field of the Python builder (`KafkaShareOptions`), what values
 * it takes, its default and meaning. The Scala parser checks values by it, docs/reference/options.md and the
 * Python package's `options_spec.json` are generated from it (OptionsDoc), and tests fail on drift.
 */
final case class OptionDeclaration(key: String, python: String, kind: OptionKind, default: String, meaning: String)

/** What values an option takes. */
sealed abstract class OptionKind(val name: String)
object OptionKind {
  case object Text   extends OptionKind("text")
  case object Regex  extends OptionKind("regex")
  case object Bool   extends OptionKind("boolean")
  case object Topic  extends OptionKind("topic")
  case object Topics extends OptionKind("topics")

  /** `kafka.*`: any other Kafka client setting. */
  case object ClientSettings                   extends OptionKind("client-settings")
  final case class Choice(values: Seq[String]) extends OptionKind("choice")
  final case class Whole(min: Long, max: Long) extends OptionKind("whole")

  /** A whole number, or `auto`: the source chooses. */
  final case class WholeOrAuto(min: Long, max: Long) extends OptionKind("whole-or-auto")

  /** A legal Kafka topic name (Kafka's own rule: these characters, at most 249, not '.' or '..'). */
  def isTopicName(name: String): Boolean = name.matches("[a-zA-Z0-9._-]{1,249}") && name != "." && name != ".."
}

object OptionDeclarations {
  import OptionKind._

  val BootstrapServers     = "kafka.bootstrap.servers"
  val GroupId              = "kafka.share.group.id"
  val Subscribe            = "subscribe"
  val SubscribePattern     = "subscribePattern"
  val AckMode              = "kafka.share.acknowledgment.mode"
  val Strategy             = "kafka.share.exactly.once.strategy"
  val Parallelism          = "kafka.share.parallelism"
  val MinParallelism       = "kafka.share.minParallelism"
  val MaxParallelism       = "kafka.share.maxParallelism"
  val BacklogDrainMs       = "kafka.share.backlog.drain.ms"
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
  val BrokerDeadLetters    = "kafka.share.brokerDeadLetterTopic"

  val DefaultPollTimeoutMs  = 2000L
  val DefaultReadDurationMs = 1000L
  val DefaultBacklogDrainMs = 10000L

  val all: Seq[OptionDeclaration] = Seq(
    OptionDeclaration(BootstrapServers, "bootstrap_servers", Text, "(required)", "The Kafka brokers, host:port, comma-separated."),
    OptionDeclaration(
      GroupId,
      "group_id",
      Text,
      "(required)",
      "The share group the query reads as. Other queries and consumers in the same group share its records."
    ),
    OptionDeclaration(
      Subscribe,
      "subscribe",
      Topics,
      "",
      "Topics to read, comma-separated. Exactly one of subscribe and subscribePattern."
    ),
    OptionDeclaration(
      SubscribePattern,
      "subscribe_pattern",
      Regex,
      "",
      "A Java regex matched against the cluster's topics, re-checked at every trigger, so new topics are picked up. While it matches no topic the query waits and runs no batch. A new topic is read from where the group's share.auto.offset.reset puts it when the group first reads it: startingOffsets sets that only while the group has no state, and the broker's default is latest, which skips what was written to the topic before. To read new topics from their first record, set share.auto.offset.reset=earliest on the group (kafka-configs.sh --alter --entity-type groups --entity-name <group> --add-config share.auto.offset.reset=earliest)."
    ),
    OptionDeclaration(
      AckMode,
      "acknowledgment_mode",
      Choice(Seq("implicit", "explicit")),
      "implicit",
      "implicit: the source acknowledges per the strategy. explicit: foreachBatch decides per record (ACCEPT, RELEASE, REJECT) with spark_kafka_share.acknowledge; applied after the batch commits."
    ),
    OptionDeclaration(
      DefaultDecision,
      "acknowledgment_default",
      Choice(Seq("accept", "release")),
      "accept",
      "explicit mode: the decision for records of a committed batch that got none, accept or release."
    ),
    OptionDeclaration(
      Strategy,
      "strategy",
      Choice(ExactlyOnceStrategy.all.map(_.name)),
      "none",
      "none or idempotent (at least once), checkpoint-dedup or two-phase-commit (exactly once with an idempotent sink)."
    ),
    OptionDeclaration(
      Parallelism,
      "parallelism",
      WholeOrAuto(1, 100000),
      "spark.default.parallelism",
      "Share consumers (input partitions) per batch. May exceed the topics' partition count. auto: the source chooses each micro-batch's count from the backlog, between kafka.share.minParallelism and kafka.share.maxParallelism, so that the backlog drains within kafka.share.backlog.drain.ms (docs/guide/scaling.md); real time then runs the maximum."
    ),
    OptionDeclaration(
      MinParallelism,
      "min_parallelism",
      Whole(1, 100000),
      "1",
      "With kafka.share.parallelism=auto: the fewest read tasks a batch gets."
    ),
    OptionDeclaration(
      MaxParallelism,
      "max_parallelism",
      Whole(1, 100000),
      "the application's task slots",
      "With kafka.share.parallelism=auto: the most read tasks a batch gets. The default is the task slots of the executors registered when the query starts: with dynamic allocation, set it. The share group must take that many members (group.share.max.size)."
    ),
    OptionDeclaration(
      BacklogDrainMs,
      "backlog_drain_ms",
      Whole(1000, 86400000),
      DefaultBacklogDrainMs.toString,
      "With kafka.share.parallelism=auto: how soon the backlog should be drained, in milliseconds. The source gives a batch enough read tasks to take what arrives and what waits within this time, at the pace its read tasks showed."
    ),
    OptionDeclaration(
      LockTimeoutMs,
      "lock_timeout_ms",
      Whole(1, 3600000),
      "the group's share.record.lock.duration.ms",
      "The lock duration the source plans with; a batch that holds records longer is reported."
    ),
    OptionDeclaration(IncludeHeaders, "include_headers", Bool, "false", "Adds the headers column."),
    OptionDeclaration(
      MaxRecordsPerTrigger,
      "max_records_per_trigger",
      Whole(1, Long.MaxValue),
      "(none)",
      "Upper bound on records per batch, split evenly over the input partitions. " +
        "Records on their last delivery attempt " +
        "(`share.delivery.count.limit`) are taken even past the bound: going back to the group would get them archived. " +
        "A task's share below 500 also becomes its consumer's max.poll.records (unless kafka.max.poll.records is set), " +
        "so that consumers do not acquire records their task will not take."
    ),
    OptionDeclaration(
      StartingOffsetsKey,
      "starting_offsets",
      Choice(Seq("earliest", "latest")),
      "(the group's)",
      "earliest or latest: sets the group's share.auto.offset.reset, only while the group has no state. Unset, the source leaves the group's setting alone: a group someone configured with kafka-configs.sh keeps it, and a new group starts at the broker's default, latest."
    ),
    OptionDeclaration(
      PollTimeoutMs,
      "poll_timeout_ms",
      Whole(1, 600000),
      DefaultPollTimeoutMs.toString,
      "How long a read task waits for its first record before it ends empty."
    ),
    OptionDeclaration(
      ReadDurationMs,
      "read_duration_ms",
      Whole(0, 600000),
      DefaultReadDurationMs.toString,
      "How long a read task keeps polling while there is a backlog (a poll returned at least half of max.poll.records, or redelivered records, which brokers hand out few at a time), pinning each poll's records before it acknowledges them: longer gives bigger batches that pay Spark's per-batch cost once for more records. 0 polls once. Tasks that hold records until the commit (two-phase-commit, explicit mode) poll once."
    ),
    OptionDeclaration(
      FailOnDataLoss,
      "fail_on_data_loss",
      Bool,
      "true",
      "Fail when a batch that must run again finds its records removed by retention."
    ),
    OptionDeclaration(
      MaxDeliveries,
      "max_deliveries",
      Whole(1, 1000),
      "(none)",
      "Poison records: the highest delivery count the source emits. A record delivered more often is REJECTed (after going to the dead-letter topic, if set). Keep it below the group's share.delivery.count.limit (5 by default), at which the broker drops records by itself."
    ),
    OptionDeclaration(
      DeadLetterTopic,
      "dead_letter_topic",
      Topic,
      "(none)",
      "With kafka.share.maxDeliveries: a topic that receives poison records before they are REJECTed, with headers naming their origin."
    ),
    OptionDeclaration(
      BrokerDeadLetters,
      "broker_dead_letter_topic",
      Topic,
      "(none)",
      "Kafka 4.4+ with share.version=2: the topic of the broker's own dead-letter queue for the share group (KIP-1191). At start the source sets the group's errors.deadletterqueue.topic.name to it (and errors.deadletterqueue.copy.record.enable to true); the broker then copies there every record that is REJECTed (a decision in explicit mode, a poison record past kafka.share.maxDeliveries) or that reaches the group's delivery count limit. The topic must exist with the topic config errors.deadletterqueue.group.enable=true, and its name must start with the broker's errors.deadletterqueue.topic.name.prefix (dlq. by default). Not with kafka.share.deadLetterTopic."
    ),
    OptionDeclaration(
      "kafka.*",
      "kafka",
      ClientSettings,
      "",
      "Any other Kafka client setting (security, fetch sizes), passed to the consumers."
    )
  )

  private lazy val byKey: Map[String, OptionDeclaration] = all.map(d => d.key -> d).toMap

  /** The declared kind of a source option (not of `kafka.*` client settings). */
  def kindOf(key: String): OptionKind = byKey(key).kind

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
