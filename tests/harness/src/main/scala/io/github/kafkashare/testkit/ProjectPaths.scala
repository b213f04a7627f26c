package io.github.kafkashare.testkit

import java.nio.file.{Files, Path, Paths}

import scala.jdk.CollectionConverters._

/** Files the build prepares for the harness (see `fetchBrokers` in build.sbt). */
object ProjectPaths {

  /** The project root: `-Dkafkashare.root`, else the working directory. */
  def root: Path = Paths.get(sys.props.getOrElse("kafkashare.root", ".")).toAbsolutePath.normalize

  /** The broker versions the build fetched, oldest first (`-Dkafkashare.broker.versions`). */
  def brokerVersions: Seq[String] =
    sys.props.get("kafkashare.broker.versions").map(_.split(",").toSeq).getOrElse {
      val dir = root.resolve("target/brokers")
      if (Files.isDirectory(dir)) Files.list(dir).iterator.asScala.map(_.getFileName.toString).toSeq.sorted
      else Nil
    }

  /** The class path of one broker version, as written by the build. */
  def brokerClasspath(version: String): String = {
    val file = root.resolve(s"target/brokers/$version/classpath.txt")
    require(Files.exists(file), s"$file is missing: run `make build` (sbt harness/fetchBrokers) first")
    Files.readAllLines(file).asScala.filter(_.nonEmpty).mkString(java.io.File.pathSeparator)
  }
}
