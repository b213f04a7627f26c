package io.github.kafkashare.spark

import io.github.kafkashare.spark.monitoring.{MetricsDriverPlugin, MetricsExecutorPlugin}
import org.apache.spark.api.plugin.{DriverPlugin, ExecutorPlugin, SparkPlugin}

/**
 * Publishes the source's figures to Spark's metrics system, and so to every sink configured there (JMX, the
 * Prometheus servlet, Graphite, CSV): `spark.plugins=io.github.kafkashare.spark.KafkaSharePlugin`.
 * The names: docs/reference/metrics.md.
 */
class KafkaSharePlugin extends SparkPlugin {
  override def driverPlugin(): DriverPlugin     = new MetricsDriverPlugin
  override def executorPlugin(): ExecutorPlugin = new MetricsExecutorPlugin
}
