package io.github.kafkashare.spark.offsets

import org.apache.hadoop.conf.Configuration
import org.apache.spark.SparkConf
import org.apache.spark.serializer.{JavaSerializer, KryoSerializer}
import org.apache.spark.sql.SparkSession
import org.apache.spark.util.SerializableConfiguration
import org.scalatest.funsuite.AnyFunSuite

/**
 * The checkpoint's Hadoop configuration goes to executors as a broadcast (SerializableHadoopConf), whose value
 * Spark serializes with spark.serializer: with Kryo too, an executor must get the configuration, not an empty one.
 */
class HadoopConfBroadcastSuite extends AnyFunSuite {

  test("the broadcast configuration survives Spark's Java and Kryo serializers, as an executor fetches it") {
    val spark = SparkSession.builder().master("local[1]").appName("conf-broadcast").config("spark.ui.enabled", "false").getOrCreate()
    try {
      val conf = new Configuration(false)
      conf.set("kafkashare.test.marker", "shipped")
      val shipped = SerializableHadoopConf.broadcast(conf, spark.sparkContext).shared.get.value
      Seq(new JavaSerializer(new SparkConf()), new KryoSerializer(new SparkConf())).foreach { serializer =>
        val instance = serializer.newInstance()
        val back     = instance.deserialize[SerializableConfiguration](instance.serialize(shipped))
        assert(back.value.get("kafkashare.test.marker") == "shipped", serializer.getClass.getSimpleName)
      }
    } finally spark.stop()
  }
}
