package io.github.kafkashare.spark.monitoring

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import org.apache.spark.internal.Logging
import org.apache.spark.scheduler.{SparkListener, SparkListenerEvent}
import org.apache.spark.sql.streaming.StreamingQueryListener.{QueryProgressEvent, QueryTerminatedEvent}

/**
 * Spark posts the streaming queries' events on the SparkContext's listener bus too (every session's), so
 * one SparkListener sees the progress of every query of the application, whichever session started it.
 */
final class QueryProgressListener(gauges: QueryGauges) extends SparkListener with Logging {

  override def onOtherEvent(event: SparkListenerEvent): Unit =
    try event match {
        case e: QueryProgressEvent =>
          val p       = e.progress
          val sources = p.sources.toSeq.map(s => s.description -> s.metrics.asScala.toMap)
          gauges.progressed(p.id.toString, p.name, ProgressGauges.of(sources))
        case e: QueryTerminatedEvent => gauges.terminated(e.id.toString)
        case _                       =>
      }
    catch { case NonFatal(e) => logWarning("kafka-share: could not publish a query's progress to the metrics system", e) }
}
