package io.github.kafkashare.spark.offsets

import java.io.{ObjectInputStream, ObjectOutputStream}

import org.apache.hadoop.conf.Configuration
import org.apache.spark.SparkContext
import org.apache.spark.broadcast.Broadcast
import org.apache.spark.util.SerializableConfiguration

/**
 * Ships the driver's Hadoop configuration to executors, which read and write the acquisition log. A query's
 * ships it once per executor, as a broadcast ([[SerializableHadoopConf.broadcast]]): the configuration is some
 * 120 KB, and Spark serializes each read task, and the stage with all of them, at every batch's start. Sent in
 * each task, it held a real-time batch's boundary some 50 ms on 2 cores (docs/internals/real-time-measurements.md).
 * Built from a configuration alone (tests, tools without Spark), it travels in each task.
 *
 * The broadcast's value is Spark's own `SerializableConfiguration` (a developer API), not this class: Spark
 * serializes broadcast values with `spark.serializer`, and registers that class with Kryo as Java-serialized;
 * Kryo's default for a class of ours would skip the transient configuration.
 */
final class SerializableHadoopConf private (
    @transient private var conf: Configuration,
    private[spark] val shared: Option[Broadcast[SerializableConfiguration]]
) extends Serializable {

  def this(conf: Configuration) = this(conf, None)

  def value: Configuration = {
    if (conf == null) conf = shared.get.value.value // one copy per executor: Spark keeps the broadcast's value
    conf
  }

  private def writeObject(out: ObjectOutputStream): Unit = {
    out.defaultWriteObject()
    if (shared.isEmpty) value.write(out)
  }

  private def readObject(in: ObjectInputStream): Unit = {
    in.defaultReadObject()
    if (shared.isEmpty) {
      conf = new Configuration(false)
      conf.readFields(in)
    }
  }
}

object SerializableHadoopConf {

  /** The configuration, with executors' copies fetched once per executor from a broadcast of `spark`. */
  def broadcast(conf: Configuration, spark: SparkContext): SerializableHadoopConf =
    new SerializableHadoopConf(conf, Some(spark.broadcast(new SerializableConfiguration(conf))))
}
