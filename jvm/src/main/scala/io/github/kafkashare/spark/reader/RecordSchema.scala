package io.github.kafkashare.spark.reader

import org.apache.spark.sql.types._

/**
 * The rows the source emits. Follows Spark's built-in Kafka source (timestamp is a TimestampType,
 * not a long), plus `deliveryCount`, which only share groups have.
 */
object RecordSchema {

  val headersType: ArrayType = ArrayType(
    StructType(Seq(StructField("key", StringType), StructField("value", BinaryType)))
  )

  private val base = Seq(
    StructField("key", BinaryType),
    StructField("value", BinaryType),
    StructField("topic", StringType),
    StructField("partition", IntegerType),
    StructField("offset", LongType),
    StructField("timestamp", TimestampType),
    StructField("timestampType", IntegerType),
    StructField("deliveryCount", IntegerType)
  )

  def apply(includeHeaders: Boolean): StructType =
    StructType(if (includeHeaders) base :+ StructField("headers", headersType) else base)
}
