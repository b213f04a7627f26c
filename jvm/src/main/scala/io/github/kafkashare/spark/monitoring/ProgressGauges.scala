package io.github.kafkashare.spark.monitoring

/**
 * The gauge values one progress of a query gives: every numeric metric of each kafka-share source, by
 * the metric's own name, as numbers (the progress has them as strings).
 *  - `deliveryCountLimit` of "-" (no record is lost at a limit, or it cannot be read) is -1;
 *  - `backlogRecordsByTopic` becomes one gauge per topic, `topic.<topic>.backlogRecords`;
 *  - any other value that is not a number is left out.
 * A query that reads several kafka-share sources (a union) names the first source's gauges as they are and
 * the others' under `source1.`, `source2.`, ... in the order of the progress (the plan's order): their
 * figures are of different groups or topics, and a sum would hide which one falls behind.
 */
object ProgressGauges {

  /** How the stream describes itself (its toString), which the progress gives as the source's description. */
  val SourcePrefix = "KafkaShareMicroBatchStream["

  def isKafkaShare(sourceDescription: String): Boolean = sourceDescription.startsWith(SourcePrefix)

  /** `sources`: each source's description and metrics, in the progress's order. Names are relative to the query's prefix. */
  def of(sources: Seq[(String, Map[String, String])]): Map[String, Long] =
    sources.collect { case (description, metrics) if isKafkaShare(description) => metrics }.zipWithIndex.flatMap {
      case (metrics, i) =>
        val prefix = if (i == 0) "" else s"source$i."
        ofSource(metrics).map { case (name, value) => prefix + name -> value }
    }.toMap

  private def ofSource(metrics: Map[String, String]): Map[String, Long] = metrics.flatMap {
    case ("backlogRecordsByTopic", byTopic) => perTopic(byTopic)
    case ("deliveryCountLimit", "-")        => Map("deliveryCountLimit" -> -1L)
    case (name, value)                      => number(value).map(MetricNames.sanitize(name) -> _)
  }

  // `orders=1200,payments=0`; a topic name has no '=' or ','.
  private def perTopic(byTopic: String): Map[String, Long] =
    byTopic.split(',').iterator.flatMap { pair =>
      pair.split('=') match {
        case Array(topic, n) if topic.nonEmpty => number(n).map(MetricNames.topicBacklog(topic) -> _)
        case _                                 => None
      }
    }.toMap

  private def number(s: String): Option[Long] =
    s.trim.toLongOption.orElse(s.trim.toDoubleOption.filterNot(d => d.isNaN || d.isInfinite).map(math.round))
}
