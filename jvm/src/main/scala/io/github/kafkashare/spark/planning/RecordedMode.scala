package io.github.kafkashare.spark.planning

import io.github.kafkashare.spark.errors.ShareSourceErrors
import io.github.kafkashare.spark.offsets.store.CheckpointStore
import io.github.kafkashare.spark.options.AcknowledgmentMode
import org.apache.hadoop.fs.Path

/**
 * The acknowledgement mode a checkpoint was written in, in `<checkpointLocation>/sources/<id>/acknowledgment-mode`
 * (`implicit` or `explicit`), written by the first start. A restart in the other mode is refused: the
 * previous batches' records were acknowledged as their own mode decided, and the other mode reads them
 * otherwise. Measured before this check (UpgradeContractSuite's scenarios): explicit to implicit took the
 * records the last explicit batch RELEASEd for pinned redeliveries and dropped them when they came back
 * (31 of 900 lost); the other way, the decisions of a batch pinned in implicit mode, whose records were
 * ACCEPTed when pinned, could not be applied (21 of 900 lost: its RELEASEs). A new checkpoint on the same
 * group takes over instead: the group, not the checkpoint, holds every record's position.
 */
private[planning] object RecordedMode {

  val FileName = "acknowledgment-mode"

  def nameOf(mode: AcknowledgmentMode): String = mode match {
    case AcknowledgmentMode.Implicit    => "implicit"
    case AcknowledgmentMode.Explicit(_) => "explicit"
  }

  /** Records the mode on a checkpoint's first start; refuses a start in another mode than the recorded one. */
  def check(store: CheckpointStore, checkpointDir: String, mode: AcknowledgmentMode): Unit = {
    val now = nameOf(mode)
    store.createIfAbsent(new Path(checkpointDir, FileName), s"$now\n").map(_.trim).filter(_ != now).foreach { recorded =>
      throw ShareSourceErrors.acknowledgmentModeChanged(recorded, now)
    }
  }
}
