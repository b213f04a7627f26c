package io.github.kafkashare.spark.errors

import scala.jdk.CollectionConverters._

import org.apache.spark.SparkThrowable

/**
 * An error of the source, as Spark raises its own: an error condition of the source's catalogue
 * (error/kafka-share-error-conditions.json, [[ErrorCatalogue]]), its SQLSTATE and its parameters.
 * PySpark shows it as a captured exception whose getCondition() names the condition, under classic
 * Spark and Spark Connect alike.
 */
trait ShareSourceException extends Throwable with SparkThrowable {
  def condition: String
  def parameters: Map[String, String]
  override def getCondition: String                                = condition
  override def getSqlState: String                                 = ErrorCatalogue(condition).sqlState
  override def getMessageParameters: java.util.Map[String, String] = parameters.asJava
}

/** A query that is set up wrongly (options, sink, Spark settings, decisions): the user's fix. */
final class ShareSourceUsageException(val condition: String, val parameters: Map[String, String], cause: Throwable)
    extends IllegalArgumentException(ErrorCatalogue.message(condition, parameters), cause) with ShareSourceException

/** The cluster, the data or the checkpoint is not as the query needs it. */
final class ShareSourceStateException(val condition: String, val parameters: Map[String, String], cause: Throwable)
    extends IllegalStateException(ErrorCatalogue.message(condition, parameters), cause) with ShareSourceException

/**
 * Every error a user can get from the source, one factory each, each with its condition: the wording
 * lives in the catalogue, and docs/reference/errors.md is generated from it. Each message names the
 * option or setting and the fix.
 */
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
      "create a file only if absent: S3 through S3A (with fs.s3a.create.conditional.enabled left true, on a store " +
      "that honours If-None-Match), GCS through Hadoop's GCS connector, HDFS, ABFS with a hierarchical namespace, or a " +
      "spark.sql.streaming.checkpointFileManagerClass whose createAtomic refuses to overwrite atomically"

  // Conditions whose fix is in how the query is set up: IllegalArgumentException, as Spark's own.
  private val UsageConditions = Set("KAFKA_SHARE_INVALID_OPTION", "KAFKA_SHARE_UNSUPPORTED_USE", "KAFKA_SHARE_INVALID_DECISIONS")

  private def error(condition: String, cause: Throwable, parameters: (String, Any)*): ShareSourceException = {
    val values = parameters.map { case (k, v) => k -> String.valueOf(v) }.toMap
    if (UsageConditions(ErrorCatalogue(condition).main)) new ShareSourceUsageException(condition, values, cause)
    else new ShareSourceStateException(condition, values, cause)
  }

  private def error(condition: String, parameters: (String, Any)*): ShareSourceException = error(condition, null, parameters: _*)

  def missingOption(option: String, example: String): ShareSourceException =
    error("KAFKA_SHARE_INVALID_OPTION.MISSING", "option" -> option, "example" -> example)

  def invalidValue(option: String, value: String, expected: String): ShareSourceException =
    error("KAFKA_SHARE_INVALID_OPTION.INVALID_VALUE", "option" -> option, "value" -> value, "expected" -> expected)

  def subscriptionCount(supplied: Seq[String]): ShareSourceException =
    error("KAFKA_SHARE_INVALID_OPTION.SUBSCRIPTION", "supplied" -> (if (supplied.isEmpty) "neither" else supplied.mkString(" and ")))

  def refusedKafkaOption(option: String, instead: String): ShareSourceException =
    error("KAFKA_SHARE_INVALID_OPTION.REFUSED_KAFKA_SETTING", "setting" -> option, "instead" -> instead)

  def builtInKafkaSourceOption(option: String, instead: String): ShareSourceException =
    error("KAFKA_SHARE_INVALID_OPTION.BUILT_IN_KAFKA_SOURCE_OPTION", "option" -> option, "instead" -> instead)

  def unknownOption(option: String, suggestion: Option[String]): ShareSourceException =
    error("KAFKA_SHARE_INVALID_OPTION.UNKNOWN", "option" -> option, "suggestion" -> suggestion.fold("")(s => s"; did you mean '$s'?"))

  def onlyWith(option: String, requirement: String): ShareSourceException =
    error("KAFKA_SHARE_INVALID_OPTION.ONLY_WITH", "option" -> option, "requirement" -> requirement)

  def notTogether(option: String, other: String): ShareSourceException =
    error("KAFKA_SHARE_INVALID_OPTION.NOT_TOGETHER", "option" -> option, "other" -> other)

  def brokerDeadLettersUnavailable(bootstrap: String, why: String): ShareSourceException =
    error("KAFKA_SHARE_BROKER_DEAD_LETTERS.UNAVAILABLE", "bootstrap" -> bootstrap, "why" -> why)

  def brokerDeadLetterTopicPrefix(topic: String, prefix: String): ShareSourceException =
    error("KAFKA_SHARE_BROKER_DEAD_LETTERS.TOPIC_PREFIX", "topic" -> topic, "prefix" -> prefix)

  def brokerDeadLetterTopicNotEnabled(topic: String, bootstrap: String): ShareSourceException =
    error("KAFKA_SHARE_BROKER_DEAD_LETTERS.TOPIC_NOT_ENABLED", "topic" -> topic, "bootstrap" -> bootstrap)

  def batchRead(): ShareSourceException = error("KAFKA_SHARE_UNSUPPORTED_USE.BATCH_READ")

  def speculationEnabled(): ShareSourceException = error("KAFKA_SHARE_UNSUPPORTED_USE.SPECULATION")

  def queryStopped(batch: Long): ShareSourceException = error("KAFKA_SHARE_UNSUPPORTED_USE.QUERY_STOPPED", "batch" -> batch)

  def parallelismAboveGroupSize(option: String, parallelism: Int, maxSize: Int, group: String): ShareSourceException =
    error(
      "KAFKA_SHARE_INVALID_OPTION.PARALLELISM_ABOVE_GROUP_SIZE",
      "option"      -> option,
      "parallelism" -> parallelism,
      "maxSize"     -> maxSize,
      "group"       -> group
    )

  def missingTopics(topics: Seq[String], bootstrap: String): ShareSourceException =
    error("KAFKA_SHARE_MISSING_TOPICS", "topics" -> topics.mkString(", "), "bootstrap" -> bootstrap)

  def brokerUnreachable(bootstrap: String, timeoutMs: Long, cause: Throwable): ShareSourceException =
    error("KAFKA_SHARE_BROKER_UNREACHABLE.NO_ANSWER", cause, "bootstrap" -> bootstrap, "timeoutMs" -> timeoutMs)

  def bootstrapUnresolvable(bootstrap: String, cause: Throwable): ShareSourceException =
    error("KAFKA_SHARE_BROKER_UNREACHABLE.UNRESOLVABLE", cause, "bootstrap" -> bootstrap)

  // The broker's own message says which mechanism failed; it never holds the password.
  def authenticationFailed(bootstrap: String, cause: Throwable): ShareSourceException =
    error(
      "KAFKA_SHARE_AUTHENTICATION_FAILED",
      cause,
      "bootstrap" -> bootstrap,
      "reason"    -> s"${cause.getClass.getSimpleName}: ${cause.getMessage}"
    )

  def notAuthorized(bootstrap: String, group: String, cause: Throwable): ShareSourceException =
    error("KAFKA_SHARE_NOT_AUTHORIZED", cause, "bootstrap" -> bootstrap, "group" -> group, "reason" -> cause.getMessage)

  def shareGroupsDisabled(bootstrap: String, cause: Throwable): ShareSourceException =
    error("KAFKA_SHARE_GROUPS_DISABLED", cause, "bootstrap" -> bootstrap)

  def dataLost(topic: String, partition: Int, from: Long, to: Long, earliest: Long): ShareSourceException =
    error(
      "KAFKA_SHARE_DATA_LOSS.RECORDS_REMOVED",
      "topic"     -> topic,
      "partition" -> partition,
      "from"      -> from,
      "to"        -> to,
      "earliest"  -> earliest
    )

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
      "KAFKA_SHARE_DATA_LOSS.REPLAY_STALLED",
      cause,
      "topic"     -> topic,
      "partition" -> partition,
      "from"      -> from,
      "to"        -> to,
      "bootstrap" -> bootstrap,
      "seconds"   -> seconds
    )

  def corruptLog(path: String, detail: String): ShareSourceException =
    error("KAFKA_SHARE_CHECKPOINT_DAMAGED.CORRUPT_LOG", "path" -> path, "detail" -> detail)

  def newerLogFormat(path: String, kind: String, version: Int, writer: String, newest: Int): ShareSourceException =
    error(
      "KAFKA_SHARE_CHECKPOINT_DAMAGED.NEWER_LOG_FORMAT",
      "path"    -> path,
      "kind"    -> kind,
      "version" -> version,
      "writer"  -> writer,
      "newest"  -> newest,
      "ours"    -> io.github.kafkashare.spark.diagnostics.ConnectorInfo.version
    )

  def unsupportedOffsetVersion(version: Int, newest: Int, json: String): ShareSourceException =
    error(
      "KAFKA_SHARE_CHECKPOINT_DAMAGED.UNSUPPORTED_OFFSET_VERSION",
      "version" -> version,
      "newest"  -> newest,
      "json"    -> json
    )

  def badOffsetJson(json: String, cause: Throwable): ShareSourceException =
    error("KAFKA_SHARE_CHECKPOINT_DAMAGED.BAD_OFFSET_JSON", cause, "json" -> json)

  def groupChanged(recorded: String, now: String): ShareSourceException =
    error("KAFKA_SHARE_CHECKPOINT_MISMATCH.GROUP_CHANGED", "recorded" -> recorded, "now" -> now)

  def clusterChanged(recorded: String, now: String, bootstrap: String): ShareSourceException =
    error("KAFKA_SHARE_CHECKPOINT_MISMATCH.CLUSTER_CHANGED", "recorded" -> recorded, "now" -> now, "bootstrap" -> bootstrap)

  def acknowledgmentModeChanged(recorded: String, now: String): ShareSourceException =
    error("KAFKA_SHARE_CHECKPOINT_MISMATCH.ACKNOWLEDGMENT_MODE_CHANGED", "recorded" -> recorded, "now" -> now)

  def topicRecreated(topic: String, recorded: String, now: String, batch: Long): ShareSourceException =
    error("KAFKA_SHARE_DATA_LOSS.TOPIC_RECREATED", "topic" -> topic, "recorded" -> recorded, "now" -> now, "batch" -> batch)

  def explicitModeNeedsForeachBatch(sink: String): ShareSourceException =
    error("KAFKA_SHARE_UNSUPPORTED_USE.EXPLICIT_NEEDS_FOREACH_BATCH", "sink" -> sink)

  def realTimeHoldsRecords(option: String, value: String): ShareSourceException =
    error("KAFKA_SHARE_UNSUPPORTED_USE.REAL_TIME_HOLDS_RECORDS", "option" -> option, "value" -> value)

  def realTimeMaxRecords(): ShareSourceException = error("KAFKA_SHARE_UNSUPPORTED_USE.REAL_TIME_MAX_RECORDS")

  def realTimeTooFewSlots(parallelism: Int, slots: Int): ShareSourceException =
    error("KAFKA_SHARE_UNSUPPORTED_USE.REAL_TIME_TOO_FEW_SLOTS", "parallelism" -> parallelism, "slots" -> slots)

  def explicitGroupTaken(group: String): ShareSourceException =
    error("KAFKA_SHARE_UNSUPPORTED_USE.EXPLICIT_GROUP_TAKEN", "group" -> group)

  def noExplicitQuery(group: String): ShareSourceException =
    error("KAFKA_SHARE_INVALID_DECISIONS.NO_EXPLICIT_QUERY", "group" -> group)

  def wrongDecisionBatch(group: String, requested: Long, running: Long): ShareSourceException =
    error("KAFKA_SHARE_INVALID_DECISIONS.WRONG_BATCH", "group" -> group, "requested" -> requested, "running" -> running)

  def decisionColumns(found: String): ShareSourceException =
    error("KAFKA_SHARE_INVALID_DECISIONS.COLUMNS", "found" -> found)

  def unknownDecision(value: String, topic: String, partition: Int, offset: Long): ShareSourceException =
    error(
      "KAFKA_SHARE_INVALID_DECISIONS.UNKNOWN_DECISION",
      "value"     -> value,
      "topic"     -> topic,
      "partition" -> partition,
      "offset"    -> offset
    )

  def recordNotInBatch(topic: String, partition: Int, offset: Long, batch: Long): ShareSourceException =
    error(
      "KAFKA_SHARE_INVALID_DECISIONS.RECORD_NOT_IN_BATCH",
      "topic"     -> topic,
      "partition" -> partition,
      "offset"    -> offset,
      "batch"     -> batch
    )

  def deadLetterFailed(topic: String, cause: Throwable): ShareSourceException =
    error("KAFKA_SHARE_DEAD_LETTER_FAILED", cause, "topic" -> topic)
}
