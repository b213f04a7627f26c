package io.github.kafkashare.spark.monitoring

import java.util

import com.codahale.metrics.{Gauge, MetricRegistry}
import org.apache.spark.SparkContext
import org.apache.spark.api.plugin.{DriverPlugin, ExecutorPlugin, PluginContext}

/**
 * The driver's part of [[io.github.kafkashare.spark.KafkaSharePlugin]]: the queries' figures, from their
 * progress. Spark takes a plugin's registry into its metrics system only if it holds a metric when the
 * plugin has started (PluginContextImpl.registerMetrics), and from then on forwards what is added to it or
 * removed (Dropwizard's MetricRegistry.register of a registry adds a listener): so [[QueryGauges]] registers
 * one gauge at once, and the queries' gauges come and go later.
 */
final class MetricsDriverPlugin extends DriverPlugin {
  private var context: Option[SparkContext]           = None
  private var listener: Option[QueryProgressListener] = None

  override def init(sc: SparkContext, ctx: PluginContext): util.Map[String, String] = {
    val added = new QueryProgressListener(new QueryGauges(ctx.metricRegistry()))
    sc.addSparkListener(added)
    context = Some(sc)
    listener = Some(added)
    util.Collections.emptyMap()
  }

  override def shutdown(): Unit = for (sc <- context; l <- listener) sc.removeSparkListener(l)
}

/** The executors' part: what the source does in this JVM ([[JvmActivity]]); in local mode also in the driver's JVM. */
final class MetricsExecutorPlugin extends ExecutorPlugin {
  override def init(ctx: PluginContext, extraConf: util.Map[String, String]): Unit =
    MetricsExecutorPlugin.registerJvmGauges(ctx.metricRegistry())
}

object MetricsExecutorPlugin {
  def registerJvmGauges(registry: MetricRegistry): Unit = {
    def gauge(name: String)(value: => Long): Unit = registry.register(name, new Gauge[Long] { override def getValue: Long = value })
    gauge(MetricNames.ShareConsumers)(JvmActivity.shareConsumers)
    gauge(MetricNames.ReadTasks)(JvmActivity.readTasks)
    registry.register(MetricNames.RecordsRenewed, JvmActivity.recordsRenewed)
  }
}
