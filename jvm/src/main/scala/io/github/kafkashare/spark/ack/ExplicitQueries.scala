package io.github.kafkashare.spark.ack

import java.util.concurrent.ConcurrentHashMap

import io.github.kafkashare.spark.errors.ShareSourceErrors
import io.github.kafkashare.spark.offsets.{AcquisitionLog, DecisionLog}

/**
 * The explicit-mode queries running in this driver, by share group. An acknowledge call from
 * foreachBatch names its group and batch; this is how it finds the query's checkpoint. One
 * explicit-mode query per group per application keeps that unambiguous.
 */
object ExplicitQueries {

  /** A running explicit-mode query: where its logs are, and the last batch it planned a read for. */
  final class Registration(val groupId: String, val acquisitions: AcquisitionLog, val decisions: DecisionLog) {
    @volatile var runningBatch: Long = -1L
  }

  private val running = new ConcurrentHashMap[String, Registration]()

  def register(registration: Registration): Unit =
    if (running.putIfAbsent(registration.groupId, registration) != null)
      throw ShareSourceErrors.explicitGroupTaken(registration.groupId)

  def unregister(registration: Registration): Unit = running.remove(registration.groupId, registration)

  /**
   * The query of `groupId`, checked not to be past `batch` already. A batch id above the last one
   * this source planned is fine: Spark runs batches the source takes no part in (their decisions can
   * name no record), and an acknowledge call may be the first action of a batch, before the source
   * was asked for its read tasks.
   */
  def lookup(groupId: String, batch: Long): Registration = {
    val registration = Option(running.get(groupId)).getOrElse(throw ShareSourceErrors.noExplicitQuery(groupId))
    if (batch < registration.runningBatch) throw ShareSourceErrors.wrongDecisionBatch(groupId, batch, registration.runningBatch)
    registration
  }
}
