package io.github.kafkashare.spark.metrics

import java.nio.file.{Files, Paths}

import org.apache.spark.sql.connector.metric.CustomMetric
import org.scalatest.funsuite.AnyFunSuite

class ShareSourceMetricsSuite extends AnyFunSuite {
  import ShareSourceMetrics._

  test("every metric aggregates as declared when Spark creates its class again by name, as the SQL UI does") {
    declared.zip(supported).foreach { case (m, metric) =>
      assert(metric.name == m.name && metric.description == m.description)
      val again = Class.forName(metric.getClass.getName).getConstructor().newInstance().asInstanceOf[CustomMetric]
      assert(again.aggregateTaskMetrics(Array(3L, 5L)) == (if (m.largest) "5" else "8"), m.name)
    }
    assert(declared.map(_.name).distinct.size == declared.size, "metric names are unique")
  }

  test("a task's counters: sums add up, the largest keeps the larger; every task metric is reported") {
    val counters = new TaskCounters
    counters.add(Acquired, 4); counters.add(Acquired, 3)
    counters.add(MaxDeliveryCount, 3); counters.add(MaxDeliveryCount, 2)
    assert(counters(Acquired) == 7 && counters(MaxDeliveryCount) == 3)
    val reported = counters.toTaskMetrics.map(m => m.name -> m.value).toMap
    assert(reported.keySet == declared.filterNot(_.driver).map(_.name).toSet)
    assert(reported(Acquired.name) == 7 && reported(LockUsedPercent.name) == 0)
    assertThrows[IllegalArgumentException](counters.add(Backlog, 1)) // a driver metric has no task value
  }

  test("docs/reference/metrics.md describes every metric, every query total, the time lag and the plugin's names") {
    val root = sys.props.getOrElse("kafkashare.root", "..")
    val doc  = new String(Files.readAllBytes(Paths.get(root, "docs/reference/metrics.md")), "UTF-8")
    val plugin = {
      import io.github.kafkashare.spark.monitoring.MetricNames._
      Seq(ShareConsumers, ReadTasks, RecordsRenewed, QueriesPublished, "<query>.<metric>", "<query>.topic.<topic>.backlogRecords")
    }
    val names   = declared.map(_.name) ++ declared.filter(m => m.queryTotal && !m.driver).map(_.totalName) ++ timeLag ++ plugin
    val missing = names.filterNot(n => doc.contains(s"`$n`"))
    assert(missing.isEmpty, s"docs/reference/metrics.md does not describe: ${missing.mkString(", ")}")
  }
}
