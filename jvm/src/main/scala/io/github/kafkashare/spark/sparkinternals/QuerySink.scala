package io.github.kafkashare.spark.sparkinternals

import scala.util.Try

import org.apache.spark.sql.SparkSession

/**
 * The kind of sink, and the trigger, of the streaming query being started, where Spark lets us see
 * them: explicit mode needs foreachBatch, which real time does not have, and saying so at start beats a
 * query whose decisions never come.
 *
 * The source is built on the query's own thread, which carries the query id. The query is
 * registered with the session that started it, not with the clone Spark runs the stream in
 * (`SparkSession.active` here), so every candidate session is asked. The sink is a field of Spark's
 * internal query object (so is the trigger), reached by name because its package moved between Spark 4 releases. When
 * any step fails, None: the check is skipped, never a reason to refuse a query.
 */
object QuerySink {

  /** StreamExecution.QUERY_ID_KEY, by value: the id of the query whose thread this is. */
  val QueryIdProperty = "sql.streaming.queryId"

  /** The simple class name of foreachBatch's sink. */
  val ForeachBatch = "ForeachBatchSink"

  def ofCurrentQuery(spark: SparkSession): Option[String] =
    currentQuery(spark).flatMap(query =>
      Try(query.getClass.getMethod("sink").invoke(query).getClass.getSimpleName.stripSuffix("$")).toOption
    )

  /** The simple class name of the trigger of the query being started (`ProcessingTimeTrigger`, say). */
  def triggerOfCurrentQuery(spark: SparkSession): Option[String] =
    currentQuery(spark).flatMap(query => Try(query.getClass.getMethod("trigger").invoke(query).getClass.getSimpleName).toOption)

  /** Whether the query being started runs Spark's real-time trigger (Spark 4.1 and later); false when unknown. */
  def isRealTime(spark: SparkSession): Boolean = triggerOfCurrentQuery(spark).contains(RealTimeMode.TriggerClass)

  private def currentQuery(spark: SparkSession): Option[AnyRef] = {
    val id = Option(spark.sparkContext.getLocalProperty(QueryIdProperty)).flatMap(s =>
      Try(java.util.UUID.fromString(s)).toOption
    )
    val sessions = Seq(Some(spark), SparkSession.getDefaultSession, SparkSession.getActiveSession).flatten.distinct
    id.flatMap { queryId =>
      sessions.iterator.flatMap(s => Try(Option(s.streams.get(queryId))).toOption.flatten).nextOption()
    }.flatMap(wrapper => Try(wrapper.getClass.getMethod("streamingQuery").invoke(wrapper)).toOption)
  }
}
