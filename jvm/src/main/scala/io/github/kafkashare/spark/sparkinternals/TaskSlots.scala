package io.github.kafkashare.spark.sparkinternals

import org.apache.spark.sql.SparkSession

/**
 * The tasks the application can run at once, where it can be told: the master's cores in local and
 * local-cluster mode (parsed from the master string: Spark has no public call for them), else the
 * registered executors times spark.executor.cores (Spark's default parallelism without it), divided by
 * the cores a task takes.
 */
object TaskSlots {

  private val LocalN        = """local\[(\d+|\*)(?:,\d+)?\]""".r
  private val LocalClusterN = """local-cluster\[\s*(\d+)\s*,\s*(\d+)\s*,.*\]""".r

  def of(spark: SparkSession): Option[Int] = {
    val sc       = spark.sparkContext
    val taskCpus = math.max(1, sc.getConf.getInt("spark.task.cpus", 1))
    val cores = sc.master match {
      case "local"                     => Some(1)
      case LocalN("*")                 => Some(Runtime.getRuntime.availableProcessors)
      case LocalN(n)                   => Some(n.toInt)
      case LocalClusterN(workers, per) => Some(workers.toInt * per.toInt)
      case _ =>
        val executors = sc.getExecutorMemoryStatus.size - 1 // the driver's block manager is listed too
        if (executors <= 0) None
        else Some(sc.getConf.getOption("spark.executor.cores").map(_.toInt * executors).getOrElse(sc.defaultParallelism))
    }
    cores.map(_ / taskCpus)
  }
}
