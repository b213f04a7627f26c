package io.github.kafkashare.testkit

import java.io.{File, IOException}
import java.net.{InetSocketAddress, ServerSocket}
import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.{Files, Path}
import java.util.Properties
import java.util.concurrent.TimeUnit

import scala.util.control.NonFatal

import org.apache.kafka.clients.admin.{Admin, AdminClientConfig}
import org.apache.kafka.common.Uuid

/**
 * A single-node KRaft Kafka broker (broker and controller in one process) in its own JVM.
 *
 * Its own JVM because Kafka's Jackson, Scala and LZ4 versions differ from Spark's, and because
 * the failure tests kill it (SIGKILL) and start it again on the same data dir.
 *
 * Everything lives in `dir`: `server.properties` (ports chosen once, on loopback), `data/`,
 * `broker.log` (what a failing test shows) and `broker.pid`. `start` on a dir that already holds
 * `server.properties` restarts that broker with its data and ports.
 */
final class KafkaBroker private (val dir: Path, val version: String, shareGroups: Boolean = true) {

  val logFile: Path     = dir.resolve("broker.log")
  private val pidFile   = dir.resolve("broker.pid")
  private val propsFile = dir.resolve("server.properties")

  def bootstrapServers: String = s"127.0.0.1:${KafkaBroker.loadProperties(propsFile).getProperty("kafkashare.port")}"

  def pid: Option[Long] =
    if (Files.exists(pidFile)) Some(new String(Files.readAllBytes(pidFile), UTF_8).trim.toLong) else None

  def isAlive: Boolean = pid.flatMap(p => toOption(ProcessHandle.of(p))).exists(_.isAlive)

  /** Starts the broker (formatting the data dir the first time) and waits until it serves. */
  def start(timeoutMs: Long = 60000): this.type = {
    if (isAlive) return this
    if (!Files.exists(propsFile)) format()
    val cmd = new java.util.ArrayList[String]()
    Seq(KafkaBroker.javaBin, "-Xms256m", "-Xmx1g", "-XX:+UseG1GC", "-Djava.awt.headless=true",
      "-Dorg.slf4j.simpleLogger.showDateTime=true",
      "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
      "-Dorg.slf4j.simpleLogger.log.org.apache.kafka.coordinator=info",
      "-cp", ProjectPaths.brokerClasspath(version), "kafka.Kafka", propsFile.toString).foreach(cmd.add)
    val process = new ProcessBuilder(cmd)
      .redirectErrorStream(true)
      .redirectOutput(ProcessBuilder.Redirect.appendTo(logFile.toFile))
      .start()
    Files.write(pidFile, process.pid.toString.getBytes(UTF_8))
    awaitServing(process, timeoutMs)
    this
  }

  /** Stops the broker cleanly (SIGTERM: controlled shutdown) and waits for its exit. */
  def stop(timeoutMs: Long = 30000): Unit = terminate(force = false, timeoutMs)

  /** Kills the broker with SIGKILL, as a crash would. */
  def kill(): Unit = terminate(force = true, 30000)

  def admin(): Admin = KafkaBroker.admin(bootstrapServers)

  private def format(): Unit = {
    Files.createDirectories(dir)
    val port           = KafkaBroker.freePort()
    val controllerPort = KafkaBroker.freePort()
    val props          = KafkaBroker.serverProperties(version, port, controllerPort, dir.resolve("data"))
    val out            = Files.newOutputStream(propsFile)
    try props.store(out, s"single-node KRaft broker $version for tests") finally out.close()
    // Kafka 4.1 formats with share.version=0 (share groups off): ask for 1. Newer versions turn
    // share groups on by default, and we test that default. The error tests want them off.
    val shareFeature =
      if (!shareGroups) Seq("--feature", "share.version=0")
      else if (version.startsWith("4.1.")) Seq("--feature", "share.version=1")
      else Nil
    val args = Seq(KafkaBroker.javaBin, "-cp", ProjectPaths.brokerClasspath(version), "kafka.tools.StorageTool",
      "format", "-t", Uuid.randomUuid().toString, "-c", propsFile.toString) ++ shareFeature
    val process = new ProcessBuilder(args: _*)
      .redirectErrorStream(true)
      .redirectOutput(ProcessBuilder.Redirect.appendTo(logFile.toFile))
      .start()
    if (!process.waitFor(120, TimeUnit.SECONDS) || process.exitValue() != 0)
      throw new IOException(s"formatting the Kafka $version data dir failed; see $logFile:\n${logTail()}")
  }

  private def awaitServing(process: Process, timeoutMs: Long): Unit = {
    val deadline = System.nanoTime + TimeUnit.MILLISECONDS.toNanos(timeoutMs)
    var serving  = false
    while (!serving) {
      if (!process.isAlive)
        throw new IOException(s"Kafka $version exited with ${process.exitValue()} while starting:\n${logTail()}")
      if (System.nanoTime > deadline) {
        process.destroyForcibly()
        throw new IOException(s"Kafka $version did not serve within $timeoutMs ms:\n${logTail()}")
      }
      serving = try {
        val admin = this.admin()
        try { admin.describeCluster().nodes().get(2, TimeUnit.SECONDS); true }
        finally admin.close(java.time.Duration.ofSeconds(2))
      } catch { case NonFatal(_) => Thread.sleep(200); false }
    }
  }

  private def terminate(force: Boolean, timeoutMs: Long): Unit =
    pid.flatMap(p => toOption(ProcessHandle.of(p))).foreach { handle =>
      if (force) handle.destroyForcibly() else handle.destroy()
      try handle.onExit().get(timeoutMs, TimeUnit.MILLISECONDS)
      catch { case NonFatal(_) => handle.destroyForcibly(); handle.onExit().get(10, TimeUnit.SECONDS) }
      Files.deleteIfExists(pidFile)
    }

  /** The last lines of the broker log, for error messages. */
  def logTail(lines: Int = 40): String =
    if (!Files.exists(logFile)) "(no broker log)"
    else {
      val all = Files.readAllLines(logFile)
      all.subList(math.max(0, all.size - lines), all.size).toArray.mkString("\n")
    }

  private def toOption[T](o: java.util.Optional[T]): Option[T] = if (o.isPresent) Some(o.get) else None

  override def toString: String = s"Kafka $version at $bootstrapServers ($dir)"
}

object KafkaBroker {

  /**
   * Starts a broker of `version` in `dir`, or restarts the one whose data is already there.
   * `shareGroups = false` formats a new data dir with share groups off (share.version=0).
   */
  def start(version: String, dir: Path, shareGroups: Boolean = true): KafkaBroker =
    new KafkaBroker(dir, version, shareGroups).start()

  /** A handle to the broker in `dir` without starting it (for stop and kill from another process). */
  def at(dir: Path): KafkaBroker = {
    val version = loadProperties(dir.resolve("server.properties")).getProperty("kafkashare.version")
    new KafkaBroker(dir, version)
  }

  def admin(bootstrapServers: String): Admin = {
    val props = new Properties
    props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers)
    props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000")
    props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000")
    Admin.create(props)
  }

  private def serverProperties(version: String, port: Int, controllerPort: Int, dataDir: Path): Properties = {
    val p = new Properties
    Map(
      "process.roles"                                    -> "broker,controller",
      "node.id"                                          -> "1",
      "controller.quorum.voters"                         -> s"1@127.0.0.1:$controllerPort",
      "listeners"                                        -> s"PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$controllerPort",
      "advertised.listeners"                             -> s"PLAINTEXT://127.0.0.1:$port",
      "controller.listener.names"                        -> "CONTROLLER",
      "inter.broker.listener.name"                       -> "PLAINTEXT",
      "listener.security.protocol.map"                   -> "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
      "log.dirs"                                         -> dataDir.toString,
      "num.partitions"                                   -> "1",
      "offsets.topic.replication.factor"                 -> "1",
      "offsets.topic.num.partitions"                     -> "3",
      "transaction.state.log.replication.factor"         -> "1",
      "transaction.state.log.min.isr"                    -> "1",
      "share.coordinator.state.topic.replication.factor" -> "1",
      "share.coordinator.state.topic.min.isr"            -> "1",
      "share.coordinator.state.topic.num.partitions"     -> "3",
      "group.initial.rebalance.delay.ms"                 -> "0",
      "auto.create.topics.enable"                        -> "false",
      // Not broker settings: the harness's own notes, ignored by Kafka.
      "kafkashare.port"                                  -> port.toString,
      "kafkashare.version"                               -> version
    ).foreach { case (k, v) => p.setProperty(k, v) }
    p
  }

  private def loadProperties(file: Path): Properties = {
    val p  = new Properties
    val in = Files.newInputStream(file)
    try p.load(in) finally in.close()
    p
  }

  private[testkit] def freePort(): Int = {
    val socket = new ServerSocket()
    try { socket.bind(new InetSocketAddress("127.0.0.1", 0)); socket.getLocalPort }
    finally socket.close()
  }

  private[testkit] val javaBin: String =
    new File(new File(sys.props("java.home"), "bin"), "java").getAbsolutePath
}
