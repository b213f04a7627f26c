package io.github.kafkashare.spark.sparkinternals

import java.lang.reflect.Constructor

import org.apache.spark.internal.Logging

/**
 * Spark's real-time mode (Spark 4.1 and later) and the connector's stream that offers it. The stream is
 * built against 4.1 apart (jvm/realtime/) and implements Spark's real-time interfaces, so it loads only
 * where Spark has them: on Spark 4.0 the interface is missing, and queries run micro-batches only.
 */
object RealTimeMode extends Logging {

  val Interface = "org.apache.spark.sql.connector.read.streaming.SupportsRealTimeMode"
  val Stream    = "io.github.kafkashare.spark.realtime.KafkaShareRealTimeStream"

  /** The simple name of the class of Spark's real-time trigger. */
  val TriggerClass = "RealTimeTrigger"

  /** The real-time stream's constructor, where this Spark has real-time mode. */
  lazy val streamConstructor: Option[Constructor[_]] =
    load(Interface).flatMap(_ => load(Stream)).map(_.getConstructors.head)

  private def load(name: String): Option[Class[_]] =
    try Some(Class.forName(name, true, getClass.getClassLoader))
    catch {
      case _: ClassNotFoundException => None
      case e: LinkageError => // a Spark whose interfaces changed again: micro-batch still runs
        logWarning(s"kafka-share: cannot load $name on this Spark; real-time mode is unavailable", e)
        None
    }
}
