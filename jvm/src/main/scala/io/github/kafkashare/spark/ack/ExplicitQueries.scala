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

  /** A running explicit-mode query: where its logs are, and the batch it runs now. */
  final class Registration(val groupId: String, val acquisitions: AcquisitionLog, val decisions: DecisionLog) {
    @volatile var runningBatch: Long = -1L
    @volatile var runningTasks: Int  = 0
  }

  private val running = new ConcurrentHashMap[String, Registration]()

  def register(registration: Registration): Unit =
    if (running.putIfAbsent(registration.groupId, registration) != null)
      throw ShareSourceErrors.explicitGroupTaken(registration.groupId)

  def unregister(registration: Registration): Unit = running.remove(registration.groupId, registration)

  /** The query of `groupId`, checked to be running `batch`. */
  def lookup(groupId: String, batch: Long): Registration = {
    val registration = Option(running.get(groupId)).getOrElse(throw ShareSourceErrors.noExplicitQuery(groupId))
    if (registration.runningBatch != batch) throw ShareSourceErrors.wrongDecisionBatch(groupId, batch, registration.runningBatch)
    registration
  }
}
