package io.github.kafkashare.spark.offsets

import java.util.regex.Pattern

import io.github.kafkashare.spark.diagnostics.ConnectorInfo
import io.github.kafkashare.spark.errors.ShareSourceErrors

/**
 * The first line of each of the source's own checkpoint files: what the file is, the version of its
 * format, and the connector version that wrote it, e.g. `kafka-share acquisitions v1 by 0.2.0`.
 *
 * Why the writer's version: a checkpoint outlives the connector that wrote it, in both directions. A
 * file of a newer format, met by an older connector (a rollback, a cluster library not yet upgraded),
 * must be refused as "upgrade to X", not as a damaged checkpoint the user would then delete. Files of
 * format 1 written before the writer was recorded have no `by` part; they read as before.
 */
final case class LogHeader(kind: String, format: Int) {

  /** The line this connector writes. */
  def line: String = s"kafka-share $kind v$format by ${ConnectorInfo.version}"

  private val Written = s"kafka-share ${Pattern.quote(kind)} v(\\d{1,9})(?: by (\\S+))?".r

  /** Checks a file's first line (None: the file is empty); throws the catalogued error. */
  def check(firstLine: Option[String], path: String): Unit = firstLine match {
    case None => throw ShareSourceErrors.corruptLog(path, "the file is empty")
    case Some(Written(version, writer)) if version.toInt > format =>
      throw ShareSourceErrors.newerLogFormat(path, kind, version.toInt, Option(writer).getOrElse("a newer one"), format)
    case Some(Written(version, _)) if version.toInt >= 1 => ()
    case Some(other) =>
      throw ShareSourceErrors.corruptLog(path, s"the first line is '${other.take(60)}', expected 'kafka-share $kind v$format'")
  }
}

object LogHeader {

  /** A number in a log line, or the catalogued damaged-checkpoint error naming the file and the line. */
  def int(text: String, path: String, line: String): Int =
    text.toIntOption.getOrElse(throw ShareSourceErrors.corruptLog(path, s"'$text' in the line '${line.take(80)}' is not a number"))

  def long(text: String, path: String, line: String): Long =
    text.toLongOption.getOrElse(throw ShareSourceErrors.corruptLog(path, s"'$text' in the line '${line.take(80)}' is not a number"))
}
