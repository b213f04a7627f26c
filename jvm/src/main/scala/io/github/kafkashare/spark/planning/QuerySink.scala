package io.github.kafkashare.spark.planning

import scala.util.Try

import org.apache.spark.sql.SparkSession

/**
 * The kind of sink of the streaming query being started, where Spark lets us see it: explicit mode
 * needs foreachBatch, and saying so at start beats a query whose decisions never come.
 *
 * The source is built on the query's own thread, which carries the query id. The query is
 * registered with the session that started it, not with the clone Spark runs the stream in
 * (`SparkSession.active` here), so every candidate session is asked. The sink is a field of Spark's
 * internal query object, reached by name because its package moved between Spark 4 releases. When
 * any step fails, None: the check is skipped, never a reason to refuse a query.
 */
object QuerySink {
  def ofCurrentQuery(spark: SparkSession): Option[String] = {
    val id = Option(spark.sparkContext.getLocalProperty("sql.streaming.queryId")).flatMap(s =>
      Try(java.util.UUID.fromString(s)).toOption
    )
    val sessions = Seq(Some(spark), SparkSession.getDefaultSession, SparkSession.getActiveSession).flatten.distinct
    id.flatMap { queryId =>
      sessions.iterator.flatMap(s => Try(Option(s.streams.get(queryId))).toOption.flatten).nextOption()
    }.flatMap { wrapper =>
      Try {
        val query = wrapper.getClass.getMethod("streamingQuery").invoke(wrapper)
        query.getClass.getMethod("sink").invoke(query).getClass.getSimpleName.stripSuffix("$")
      }.toOption
    }
  }
}
