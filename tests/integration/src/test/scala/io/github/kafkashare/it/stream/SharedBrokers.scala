package io.github.kafkashare.it.stream

import scala.collection.concurrent.TrieMap

import io.github.kafkashare.testkit.{KafkaBroker, ProjectPaths}

/**
 * One real broker per Kafka version for the whole test JVM, started on first use and stopped when
 * the JVM ends (then the suites' directories are deleted): every stream suite shares them (topics and
 * groups are fresh per test).
 */
object SharedBrokers {

  private val started = TrieMap.empty[String, KafkaBroker]

  /** The versions the build fetched, oldest first. */
  def versions: Seq[String] = {
    val fetched = ProjectPaths.brokerVersions
    require(fetched.nonEmpty, "no broker version fetched: run sbt harness/fetchBrokers")
    fetched
  }

  def newest: KafkaBroker = of(versions.last)

  /** The oldest line supported and the newest: every strategy runs on these; the lines between hold the cells that differ by broker. */
  def floorAndNewest: Seq[String] = Seq(versions.head, versions.last).distinct

  /** The fetched versions of Kafka `line` ("4.2") or later. */
  def since(line: String): Seq[String] = {
    def majorMinor(v: String) = v.split('.').map(_.toInt) match { case Array(major, minor, _*) => (major, minor) }
    versions.filter(v => Ordering[(Int, Int)].gteq(majorMinor(v), majorMinor(line)))
  }

  /** The brokers started so far (for their logs when a test fails). */
  def running: Seq[KafkaBroker] = started.values.toSeq

  def of(version: String): KafkaBroker = synchronized {
    started.get(version).filter(_.isAlive).getOrElse {
      val broker = started.get(version) match {
        case Some(stopped) => stopped.start() // a test killed it: same data, same port
        case None          => KafkaBroker.start(version, TestDirs.create(s"kafka-$version-"))
      }
      if (started.isEmpty) sys.addShutdownHook {
        started.values.foreach(b => if (b.isAlive) b.stop())
        TestDirs.deleteAll()
      }
      started.put(version, broker)
      broker
    }
  }
}
