package io.github.kafkashare.spark

import java.nio.file.{Files, Path}
import java.util.Comparator

import scala.util.Try

/** Temporary directories of the unit tests: one root per test JVM, deleted when it ends, so runs leave nothing in /tmp. */
object UnitTestDirs {

  private lazy val root: Path = {
    val dir = Files.createTempDirectory("kafka-share-unit-tests-")
    sys.addShutdownHook(deleteRecursively(dir))
    dir
  }

  def create(prefix: String): Path = Files.createTempDirectory(root, prefix)

  private def deleteRecursively(dir: Path): Unit = if (Files.exists(dir)) {
    val all = Files.walk(dir)
    try all.sorted(Comparator.reverseOrder[Path]()).forEach(p => Try(Files.delete(p)))
    finally all.close()
  }
}
