package io.github.kafkashare.spark.options

/** What the source promises about duplicates, and when it ACCEPTs: docs/internals/delivery-semantics.md. */
sealed abstract class ExactlyOnceStrategy(val name: String) {

  /** Whether redeliveries of pinned records are dropped (acknowledged quietly, not emitted). */
  def dropsRedeliveries: Boolean

  /** Whether records stay acquired until the batch commits (ACCEPT after commit log N). */
  def acceptsAfterCommit: Boolean
}

object ExactlyOnceStrategy {

  /** At least once; ACCEPT right after the batch partition is pinned. */
  case object None extends ExactlyOnceStrategy("none") {
    val dropsRedeliveries = false; val acceptsAfterCommit = false
  }

  /** At least once, for sinks that upsert on (topic, partition, offset); same mechanics as none. */
  case object Idempotent extends ExactlyOnceStrategy("idempotent") {
    val dropsRedeliveries = false; val acceptsAfterCommit = false
  }

  /** Exactly once with an idempotent sink: ACCEPT right after pinning, redeliveries dropped. */
  case object CheckpointDedup extends ExactlyOnceStrategy("checkpoint-dedup") {
    val dropsRedeliveries = true; val acceptsAfterCommit = false
  }

  /** Exactly once, and records stay with the group until the sink has them: ACCEPT after commit. */
  case object TwoPhaseCommit extends ExactlyOnceStrategy("two-phase-commit") {
    val dropsRedeliveries = true; val acceptsAfterCommit = true
  }

  val all: Seq[ExactlyOnceStrategy] = Seq(None, Idempotent, CheckpointDedup, TwoPhaseCommit)
}
