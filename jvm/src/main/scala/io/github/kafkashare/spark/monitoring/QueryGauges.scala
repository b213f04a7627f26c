package io.github.kafkashare.spark.monitoring

import java.util.concurrent.ConcurrentHashMap

import scala.jdk.CollectionConverters._

import com.codahale.metrics.{Gauge, MetricRegistry}

/**
 * The gauges of the running queries in one registry, as `<query>.<metric>`: added at a query's first
 * progress with a kafka-share source, updated at each progress, removed when the query terminates, so a
 * stopped query leaves no series behind. `<query>` is the query's name, else its id (sanitized); a name
 * another running query published first falls back to the id. A metric a later progress no longer has
 * (a topic left the pattern) is removed. Called from Spark's listener thread; gauges are read by the sinks'
 * threads, hence the concurrent maps.
 */
final class QueryGauges(registry: MetricRegistry) {

  private final class Published(val prefix: String) {
    val values = new ConcurrentHashMap[String, java.lang.Long]
  }

  private val byQuery = new ConcurrentHashMap[String, Published]

  registry.register(MetricNames.QueriesPublished, new Gauge[Long] { override def getValue: Long = byQuery.size.toLong })

  /** The progress of query `id` (named `name`, or null): its kafka-share sources' figures ([[ProgressGauges.of]]). */
  def progressed(id: String, name: String, figures: Map[String, Long]): Unit = synchronized {
    if (figures.isEmpty && !byQuery.containsKey(id)) return
    val published = byQuery.computeIfAbsent(id, _ => new Published(prefixFor(id, name)))
    figures.foreach { case (metric, value) =>
      if (published.values.put(metric, value) == null) {
        val values = published.values
        registry.register(
          s"${published.prefix}.$metric",
          new Gauge[Long] {
            override def getValue: Long = Option(values.get(metric)).fold(0L)(_.longValue)
          }
        )
      }
    }
    published.values.keySet.asScala.toSeq.filterNot(figures.contains).foreach { gone =>
      published.values.remove(gone)
      registry.remove(s"${published.prefix}.$gone")
    }
  }

  def terminated(id: String): Unit = synchronized {
    Option(byQuery.remove(id)).foreach { published =>
      published.values.keySet.asScala.toSeq.foreach(metric => registry.remove(s"${published.prefix}.$metric"))
    }
  }

  /** The registered name of a query's metric, for tests and logs. */
  def nameOf(id: String, metric: String): Option[String] = Option(byQuery.get(id)).map(p => s"${p.prefix}.$metric")

  private def prefixFor(id: String, name: String): String = {
    val wanted = MetricNames.sanitize(Option(name).filter(_.nonEmpty).getOrElse(id))
    if (byQuery.values.asScala.exists(_.prefix == wanted)) MetricNames.sanitize(id) else wanted
  }
}
