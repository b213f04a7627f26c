package io.github.kafkashare.spark.sparkinternals

/**
 * Spark's thread that runs a streaming query (StreamExecution's QueryExecutionThread), known by its name:
 * Spark builds the source and asks it for offsets there, and stops the query by interrupting it.
 */
object StreamThread {

  val NamePrefix = "stream execution thread"

  def is(thread: Thread): Boolean = thread.getName.startsWith(NamePrefix)
}
