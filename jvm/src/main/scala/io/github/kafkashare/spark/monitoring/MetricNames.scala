package io.github.kafkashare.spark.monitoring

/**
 * The names the plugin registers with Spark's metrics system (docs/reference/metrics.md). Spark prefixes
 * them with `<app id>.<executor id>.plugin.io.github.kafkashare.spark.KafkaSharePlugin.`.
 */
object MetricNames {
  val ShareConsumers = "jvm.shareConsumers"
  val ReadTasks      = "jvm.readTasks"
  val RecordsRenewed = "jvm.recordsRenewed"

  /** The driver's: queries whose figures the plugin publishes now (also what makes Spark take the registry). */
  val QueriesPublished = "driver.queriesPublished"

  /**
   * A name part from something users or topics chose: every character outside `[A-Za-z0-9_-]` becomes `_`,
   * so a dot cannot add a level to the name and no sink has to escape anything.
   */
  def sanitize(part: String): String = part.map(c => if (c.isLetterOrDigit && c < 128 || c == '_' || c == '-') c else '_')

  def topicBacklog(topic: String): String = s"topic.${sanitize(topic)}.backlogRecords"
}
