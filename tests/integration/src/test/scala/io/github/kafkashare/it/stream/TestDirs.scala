package io.github.kafkashare.it.stream

import java.nio.file.{Files, Path}
import java.util.Comparator

import scala.util.Try

/**
 * Where the stream suites keep broker data and checkpoints: one temporary directory for the test JVM,
 * deleted when it ends, after the brokers stopped (see SharedBrokers), so that runs leave nothing behind.
 */
object TestDirs {

  private lazy val root: Path = Files.createTempDirectory("kafka-share-stream-suites-")

  def create(prefix: String): Path = Files.createTempDirectory(root, prefix)

  /** Where the connector's log lines go (src/test/resources/log4j2.properties). */
  def connectorLog: Path =
    java.nio.file.Paths.get(sys.props.getOrElse("kafkashare.root", "."), "target", "test-results", "stream-suites.log")

  def deleteAll(): Unit = deleteRecursively(root)

  def deleteRecursively(dir: Path): Unit = if (Files.exists(dir)) {
    val all = Files.walk(dir)
    try all.sorted(Comparator.reverseOrder[Path]()).forEach(p => Try(Files.delete(p)))
    finally all.close()
  }
}
