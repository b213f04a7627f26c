package io.github.kafkashare.it.features

import java.lang.management.ManagementFactory
import java.util.concurrent.atomic.AtomicLong
import javax.management.ObjectName

import scala.concurrent.duration._
import scala.jdk.CollectionConverters._

import io.github.kafkashare.it.stream._
import org.apache.spark.sql.DataFrame
import org.apache.spark.sql.streaming.Trigger

/**
 * The source's figures in Spark's metrics system (issue 41): the shared session runs KafkaSharePlugin and Spark's
 * JmxSink (SharedSpark), so what this reads from the platform MBean server is what any sink gets. A backlog of
 * 2,000 records drains at 200 a batch: the query's backlogRecords gauge shows it, agrees with the progress,
 * falls to 0, and is gone once the query stops. The gauges are added after Spark took the plugin's registry
 * (at the query's first progress): this is also the proof that later additions reach the sinks.
 */
final class MetricsSystemSuite extends ShareStreamTest {

  private val mbeans = ManagementFactory.getPlatformMBeanServer

  /** The plugin's gauges under `[<app>.<executor>.]plugin.io.github.kafkashare.spark.KafkaSharePlugin.`, by their own name. */
  private def pluginGauges(): Map[String, Long] =
    mbeans.queryNames(new ObjectName("metrics:type=gauges,*"), null).asScala.flatMap { o =>
      val raw  = Option(o.getKeyProperty("name")).getOrElse("")
      val name = if (raw.startsWith("\"")) ObjectName.unquote(raw) else raw
      // Spark registers the local executor before it knows the application's id: its names have no prefix.
      val marker = "plugin.io.github.kafkashare.spark.KafkaSharePlugin."
      val at     = name.indexOf(marker)
      if (at < 0 || (at > 0 && name(at - 1) != '.')) None
      else
        try Some(name.substring(at + marker.length) -> mbeans.getAttribute(o, "Value").toString.toLong)
        catch { case _: javax.management.InstanceNotFoundException => None } // removed meanwhile
    }.toMap

  test("a query's gauges in JMX: backlogRecords as in the progress, 0 once drained, gone after the stop") {
    val prepared = prepare(partitions = 2)
    val records  = 2000
    prepared.kafka.produce(prepared.topic, records)
    val name                             = fresh("metrics")
    val options                          = prepared.query("checkpoint-dedup", "maxRecordsPerTrigger" -> "200").options
    val rows                             = new AtomicLong
    val write: (DataFrame, Long) => Unit = (df, _) => rows.addAndGet(df.count())
    val query = spark.readStream.format("kafka-share").options(options).load()
      .writeStream.queryName(name).foreachBatch(write)
      .option("checkpointLocation", TestDirs.create("checkpoint-").toString)
      .trigger(Trigger.ProcessingTime(200)).start()
    def progressed(metric: String): Option[String] =
      Option(query.lastProgress).flatMap(p => Option(p.sources.head.metrics.get(metric)))
    try {
      var sawBacklog = false
      var agreed     = 0
      eventually(180.seconds, s"$records rows read, and a backlog of 0 in the progress and in JMX") {
        query.exception.foreach(e => throw e)
        // The listener bus delivers a progress a moment after lastProgress has it: the gauge holds the newest
        // progress's value or the one before.
        val gauge  = pluginGauges().get(s"$name.backlogRecords")
        val recent = query.recentProgress.takeRight(2).flatMap(p => Option(p.sources.head.metrics.get("backlogRecords")))
        if (gauge.nonEmpty && recent.nonEmpty) {
          assert(recent.map(_.toLong).contains(gauge.get), s"JMX $gauge, the last progresses ${recent.mkString(", ")}")
          agreed += 1
        }
        sawBacklog ||= gauge.exists(_ > 0)
        rows.get >= records && gauge.contains(0L)
      }
      assert(sawBacklog, "the gauge never showed the backlog")
      assert(agreed > 0)
      Thread.sleep(1000) // the bus has delivered the newest progress: the two agree exactly
      assert(pluginGauges().get(s"$name.backlogRecords") == progressed("backlogRecords").map(_.toLong))
      val gauges = pluginGauges()
      info(s"the query's gauges: ${gauges.keys.filter(_.startsWith(name)).toSeq.sorted.mkString(", ")}")
      assert(progressed("backlogAgeMs").exists(_.toLong >= 0) && progressed("lockUsedPercent").nonEmpty)
      assert(progressed("emittedAgeMaxMs").nonEmpty && progressed("emittedAgeP99Ms").nonEmpty)
      assert(
        query.recentProgress.exists(p => Option(p.sources.head.metrics.get("backlogAgeMs")).exists(_.toLong > 0)),
        "a backlog of records produced before the start has an age"
      )
      Seq("backlogAgeMs", "lockUsedPercent", "recordsAcquiredTotal", s"topic.${prepared.topic}.backlogRecords", "deliveryCountLimit")
        .foreach(m => assert(gauges.contains(s"$name.$m"), s"no gauge $name.$m"))
      val named =
        mbeans.queryNames(new ObjectName("metrics:*"), null).asScala.map(_.getKeyProperty("name")).filter(_.contains("KafkaSharePlugin"))
      info(s"the plugin's names not of the query: ${named.filterNot(_.contains(name)).toSeq.sorted.mkString(", ")}")
      assert(gauges.contains("jvm.shareConsumers") && gauges.contains("jvm.readTasks"), "the executor plugin's gauges (local mode)")
      assert(gauges("jvm.shareConsumers") > 0, "the query's consumers are open in this JVM")
    } finally query.stop()
    eventually(30.seconds, "the query's gauges gone after its stop") {
      !pluginGauges().keys.exists(_.startsWith(s"$name."))
    }
  }
}
