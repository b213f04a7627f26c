package io.github.kafkashare.spark

import io.github.kafkashare.spark.reader.RecordSchema

import org.apache.spark.sql.types._
import org.apache.spark.sql.util.CaseInsensitiveStringMap
import org.scalatest.funsuite.AnyFunSuite

import scala.jdk.CollectionConverters._

class RecordSchemaSuite extends AnyFunSuite {

  test("the columns of Spark's Kafka source, plus deliveryCount, in that order") {
    val schema = RecordSchema(includeHeaders = false)
    assert(schema.fieldNames.toSeq ==
      Seq("key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "deliveryCount"))
    assert(schema("timestamp").dataType == TimestampType, "a timestamp, as in Spark's Kafka source, not a long")
    assert(schema("offset").dataType == LongType)
    assert(schema("deliveryCount").dataType == IntegerType)
  }

  test("headers only when includeHeaders is true, as array<struct<key string, value binary>>") {
    val provider = new KafkaShareSourceProvider
    val required = Map("kafka.bootstrap.servers" -> "localhost:9092", "kafka.share.group.id" -> "g", "subscribe" -> "t")
    def schemaFor(options: Map[String, String]) =
      provider.inferSchema(new CaseInsensitiveStringMap((required ++ options).asJava))

    assert(!schemaFor(Map.empty).fieldNames.contains("headers"))
    val withHeaders = schemaFor(Map("INCLUDEHEADERS" -> "true"))
    assert(withHeaders.fieldNames.last == "headers")
    assert(withHeaders("headers").dataType ==
      ArrayType(StructType(Seq(StructField("key", StringType), StructField("value", BinaryType)))))
  }

  test("the provider registers the short name users write") {
    assert(new KafkaShareSourceProvider().shortName() == "kafka-share")
  }
}
