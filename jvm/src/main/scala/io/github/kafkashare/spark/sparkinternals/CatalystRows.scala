package io.github.kafkashare.spark.sparkinternals

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow
import org.apache.spark.sql.catalyst.util.{ArrayData, GenericArrayData}
import org.apache.spark.unsafe.types.UTF8String

/**
 * The values of a row as Spark's engine holds them (Catalyst's classes: a data source hands Spark
 * InternalRow, and Spark has no public way to build one).
 */
object CatalystRows {
  def row(values: Array[Any]): InternalRow = new GenericInternalRow(values)
  def array(values: Array[Any]): ArrayData = new GenericArrayData(values)
  def string(value: String): UTF8String    = UTF8String.fromString(value)
}
