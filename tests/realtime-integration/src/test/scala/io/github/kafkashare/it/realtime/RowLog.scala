package io.github.kafkashare.it.realtime

import java.util.concurrent.{ConcurrentHashMap, ConcurrentLinkedQueue}
import java.util.concurrent.atomic.AtomicLong

import scala.jdk.CollectionConverters._

import org.apache.spark.TaskContext
import org.apache.spark.sql.{ForeachWriter, Row}

/** One row as a real-time query's sink was given it, with the batch (epoch) and task attempt that emitted it. */
final case class EmittedRow(key: String, epoch: Long, partition: Int, attempt: Int, deliveryCount: Int, writer: Long)

/**
 * A sink that keeps every row it is given, a failed attempt's and a re-run's too (real time allows the foreach
 * sink, not foreachBatch), and notes which writers (one per task attempt) ended without an error. Tasks run in
 * the test JVM (local mode), so the writer appends to a log in this JVM, one per query, named by `name`.
 */
object RowLog {
  private val logs    = new ConcurrentHashMap[String, ConcurrentLinkedQueue[EmittedRow]]()
  private val writers = new AtomicLong()
  // (log, epoch, Spark partition) -> the writer of the last attempt there that ended without an error
  private val lastSucceeded = new ConcurrentHashMap[(String, Long, Int), Long]()
  // (log, epoch, Spark partition, attempt) -> when its writer opened: the task attempt's start, as the sink sees it
  private val writerStarts = new ConcurrentHashMap[(String, Long, Int, Int), Long]()

  /** Every row given to the writer, in the order each task gave them. */
  def rows(name: String): Vector[EmittedRow] = Option(logs.get(name)).map(_.asScala.toVector).getOrElse(Vector.empty)

  /**
   * What a sink that keeps one attempt per batch and task (a file per epoch and partition, overwritten) holds:
   * the rows of the last attempt at each that ended without an error; a failed attempt's rows, and those of a
   * run of the batch that Spark ran again (after a stop or a crash), are left out.
   */
  def keptRows(name: String): Vector[EmittedRow] =
    rows(name).filter(r => Option(lastSucceeded.get((name, r.epoch, r.partition))).contains(r.writer))

  def append(name: String, row: EmittedRow): Unit =
    logs.computeIfAbsent(name, _ => new ConcurrentLinkedQueue[EmittedRow]()).add(row)

  /** When the writer of a task attempt opened (ms), the latest such if the batch ran more than once. */
  def writerStart(name: String, epoch: Long, partition: Int, attempt: Int): Option[Long] =
    Option(writerStarts.get((name, epoch, partition, attempt)))

  def distinctKeys(name: String): Int = rows(name).map(_.key).distinct.size

  /** A writer of rows with columns k (string) and deliveryCount into the log `name`. */
  def writer(name: String): ForeachWriter[Row] = new ForeachWriter[Row] {
    private var epoch   = -1L
    private var task    = -1
    private var attempt = -1
    private var id      = -1L
    def open(partitionId: Long, epochId: Long): Boolean = {
      id = writers.incrementAndGet()
      epoch = epochId
      task = partitionId.toInt
      attempt = Option(TaskContext.get()).map(_.attemptNumber()).getOrElse(0)
      writerStarts.put((name, epoch, task, attempt), System.currentTimeMillis)
      true
    }
    def process(row: Row): Unit       = append(name, EmittedRow(row.getString(0), epoch, task, attempt, row.getInt(1), id))
    def close(error: Throwable): Unit = if (error == null) lastSucceeded.put((name, epoch, task), id)
  }
}

/**
 * What a real-time query's sink kept (RowLog.keptRows) against what was produced (keys 0 until produced);
 * `fromFailedAttempts` counts the rows of attempts and runs that were not kept.
 */
final case class Landed(produced: Int, landed: Int, lost: Int, doubled: Int, inTwoBatches: Int, fromFailedAttempts: Int) {
  override def toString: String =
    s"produced $produced landed $landed lost $lost doubled $doubled (in two batches $inTwoBatches), " +
      s"$fromFailedAttempts row(s) of attempts or runs not kept"
}

object Landed {
  def of(name: String, produced: Int): Landed = {
    val kept  = RowLog.keptRows(name)
    val byKey = kept.groupBy(_.key)
    Landed(
      produced = produced,
      landed = byKey.size,
      lost = (0 until produced).count(k => !byKey.contains(k.toString)),
      doubled = kept.size - byKey.size,
      // A record in two epochs is the source emitting it in two batches.
      inTwoBatches = byKey.count(_._2.map(_.epoch).distinct.size > 1),
      fromFailedAttempts = RowLog.rows(name).size - kept.size
    )
  }
}
