package io.github.kafkashare.spark.monitoring

import java.util.UUID

import scala.jdk.CollectionConverters._

import com.codahale.metrics.MetricRegistry
import org.apache.spark.sql.streaming.FakeQueryEvents
import org.scalatest.funsuite.AnyFunSuite

class QueryGaugesSuite extends AnyFunSuite {

  private val source = "KafkaShareMicroBatchStream[g]"

  private def gauges(registry: MetricRegistry): Map[String, Any] =
    registry.getGauges.asScala.map { case (n, g) => n -> g.getValue }.toMap - MetricNames.QueriesPublished

  test("a query's gauges come with its first kafka-share progress, follow each progress, and go when it terminates") {
    val registry = new MetricRegistry
    val listener = new QueryProgressListener(new QueryGauges(registry))
    val id       = UUID.randomUUID()
    listener.onOtherEvent(FakeQueryEvents.progress(id, "orders daily", "FileSource[x]" -> Map("n" -> "1")))
    assert(gauges(registry).isEmpty, "a query without a kafka-share source publishes nothing")
    listener.onOtherEvent(FakeQueryEvents.progress(id, "orders daily", source -> Map("backlogRecords" -> "10")))
    assert(gauges(registry) == Map("orders_daily.backlogRecords" -> 10L))
    assert(registry.getGauges.get(MetricNames.QueriesPublished).getValue == 1L)
    listener.onOtherEvent(FakeQueryEvents.progress(id, "orders daily", source -> Map("backlogRecords" -> "0")))
    assert(gauges(registry) == Map("orders_daily.backlogRecords" -> 0L))
    listener.onOtherEvent(FakeQueryEvents.terminated(id))
    assert(gauges(registry).isEmpty, "a stopped query leaves no series behind")
    assert(registry.getGauges.get(MetricNames.QueriesPublished).getValue == 0L)
  }

  test("a query without a name is published by its id; a name taken by a running query falls back to the id") {
    val registry  = new MetricRegistry
    val queries   = new QueryGauges(registry)
    val (a, b, c) = (UUID.randomUUID(), UUID.randomUUID(), UUID.randomUUID())
    queries.progressed(a.toString, null, Map("backlogRecords" -> 1L))
    queries.progressed(b.toString, "q", Map("backlogRecords" -> 2L))
    queries.progressed(c.toString, "q", Map("backlogRecords" -> 3L))
    assert(gauges(registry) == Map(s"$a.backlogRecords" -> 1L, "q.backlogRecords" -> 2L, s"$c.backlogRecords" -> 3L))
  }

  test("a metric a later progress no longer has (a topic left the pattern) is removed") {
    val registry = new MetricRegistry
    val queries  = new QueryGauges(registry)
    queries.progressed("id", "q", Map("topic.a.backlogRecords" -> 1L, "topic.b.backlogRecords" -> 2L))
    queries.progressed("id", "q", Map("topic.a.backlogRecords" -> 1L))
    assert(gauges(registry).keySet == Set("q.topic.a.backlogRecords"))
  }

  // What Spark does with a plugin's registry (MetricsSystem.registerSource: parent.register(name, child)). With
  // Dropwizard 4 (Spark 4.0 ships 4.2.30) that adds a listener to the child: later additions and removals reach
  // the parent, which the sinks report from. The stream suite MetricsSystemSuite checks the same through JMX.
  test("gauges added to the plugin's registry after Spark took it reach Spark's registry, and their removal too") {
    val spark   = new MetricRegistry
    val plugin  = new MetricRegistry
    val queries = new QueryGauges(plugin) // registers its gauge at once: Spark takes no empty registry
    spark.register("app.driver.plugin.io.github.kafkashare.spark.KafkaSharePlugin", plugin)
    queries.progressed("id", "q", Map("backlogRecords" -> 7L))
    val name = "app.driver.plugin.io.github.kafkashare.spark.KafkaSharePlugin.q.backlogRecords"
    assert(spark.getGauges.get(name).getValue == 7L)
    queries.terminated("id")
    assert(!spark.getGauges.containsKey(name))
  }

  test("the executor's registry has the JVM-wide gauges and counter from the start") {
    val registry = new MetricRegistry
    MetricsExecutorPlugin.registerJvmGauges(registry)
    assert(registry.getGauges.keySet.asScala == Set(MetricNames.ShareConsumers, MetricNames.ReadTasks))
    assert(registry.getCounters.get(MetricNames.RecordsRenewed) eq JvmActivity.recordsRenewed)
  }
}
