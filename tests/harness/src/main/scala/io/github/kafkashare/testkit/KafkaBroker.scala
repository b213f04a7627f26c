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
final class KafkaBroker private (val dir: Path, val version: String, recipe: KafkaBroker.Recipe = KafkaBroker.Recipe()) {

  val logFile: Path     = dir.resolve("broker.log")
  private val pidFile   = dir.resolve("broker.pid")
  private val propsFile = dir.resolve("server.properties")

  def bootstrapServers: String = s"127.0.0.1:${KafkaBroker.loadProperties(propsFile).getProperty("kafkashare.port")}"

  /** The harness's notes in server.properties (`kafkashare.*`): ports of the secure listeners, trust store. */
  def note(name: String): Option[String] = Option(KafkaBroker.loadProperties(propsFile).getProperty(s"kafkashare.$name"))

  def pid: Option[Long] =
    if (Files.exists(pidFile)) Some(new String(Files.readAllBytes(pidFile), UTF_8).trim.toLong) else None

  def isAlive: Boolean = pid.flatMap(p => toOption(ProcessHandle.of(p))).exists(_.isAlive)

  /** Starts the broker (formatting the data dir the first time) and waits until it serves. */
  def start(timeoutMs: Long = 60000): this.type = launch().awaitServing(timeoutMs)

  /** Starts the JVM without waiting: the nodes of a cluster serve only once a quorum of them runs. */
  def launch(): this.type = {
    if (isAlive) return this
    if (!Files.exists(propsFile)) format()
    val cmd = new java.util.ArrayList[String]()
    Seq(
      KafkaBroker.javaBin,
      "-Xms256m",
      if (clusterSize > 1) "-Xmx512m" else "-Xmx1g",
      "-XX:+UseG1GC"
    ).foreach(cmd.add)
    KafkaBroker.extraJavaOptions.foreach(cmd.add)
    Seq(
      "-Djava.awt.headless=true",
      "-Dorg.slf4j.simpleLogger.showDateTime=true",
      "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
      "-Dorg.slf4j.simpleLogger.log.org.apache.kafka.coordinator=info",
      "-cp",
      ProjectPaths.brokerClasspath(version),
      "kafka.Kafka",
      propsFile.toString
    ).foreach(cmd.add)
    val process = new ProcessBuilder(cmd)
      .redirectErrorStream(true)
      .redirectOutput(ProcessBuilder.Redirect.appendTo(logFile.toFile))
      .start()
    Files.write(pidFile, process.pid.toString.getBytes(UTF_8))
    this
  }

  /** Stops the broker cleanly (SIGTERM: controlled shutdown) and waits for its exit. */
  def stop(timeoutMs: Long = 30000): Unit = terminate(force = false, timeoutMs)

  /** Kills the broker with SIGKILL, as a crash would. */
  def kill(): Unit = terminate(force = true, 30000)

  def admin(): Admin = KafkaBroker.admin(bootstrapServers)

  private def clusterSize: Int =
    if (Files.exists(propsFile)) note("nodes").map(_.toInt).getOrElse(1) else recipe.nodes

  private def format(): Unit = {
    Files.createDirectories(dir)
    val props = KafkaBroker.serverProperties(version, recipe, dir)
    val out   = Files.newOutputStream(propsFile)
    try props.store(out, s"KRaft node ${recipe.nodeId} (Kafka $version) for tests")
    finally out.close()
    // Kafka 4.1 formats with share.version=0 (share groups off): ask for 1. Newer versions turn
    // share groups on by default, and we test that default. The error tests want them off.
    val shareFeature =
      if (!recipe.shareGroups) Seq("--feature", "share.version=0")
      else if (version.startsWith("4.1.")) Seq("--feature", "share.version=1")
      else Nil
    val args = Seq(
      KafkaBroker.javaBin,
      "-cp",
      ProjectPaths.brokerClasspath(version),
      "kafka.tools.StorageTool",
      "format",
      "-t",
      recipe.clusterId,
      "-c",
      propsFile.toString
    ) ++ shareFeature
    val process = new ProcessBuilder(args: _*)
      .redirectErrorStream(true)
      .redirectOutput(ProcessBuilder.Redirect.appendTo(logFile.toFile))
      .start()
    if (!process.waitFor(120, TimeUnit.SECONDS) || process.exitValue() != 0)
      throw new IOException(s"formatting the Kafka $version data dir failed; see $logFile:\n${logTail()}")
  }

  /** Waits until this node answers; with a cluster, until the cluster shows all its nodes. */
  def awaitServing(timeoutMs: Long = 60000): this.type = {
    val deadline = System.nanoTime + TimeUnit.MILLISECONDS.toNanos(timeoutMs)
    var serving  = false
    val process  = pid.flatMap(p => toOption(ProcessHandle.of(p)))
    while (!serving) {
      if (!process.exists(_.isAlive))
        throw new IOException(s"Kafka $version exited while starting:\n${logTail()}")
      if (System.nanoTime > deadline) {
        process.foreach(_.destroyForcibly())
        throw new IOException(s"Kafka $version did not serve within $timeoutMs ms:\n${logTail()}")
      }
      serving =
        try {
          val admin = this.admin()
          try admin.describeCluster().nodes().get(2, TimeUnit.SECONDS).size >= clusterSize
          finally admin.close(java.time.Duration.ofSeconds(2))
        } catch { case NonFatal(_) => false }
      if (!serving) Thread.sleep(200)
    }
    this
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
   * JVM options for the brokers this JVM starts, from KAFKASHARE_BROKER_JAVA_OPTIONS (space-separated): the
   * test suites set them, the benchmarks do not.
   */
  def extraJavaOptions: Seq[String] =
    sys.env.getOrElse("KAFKASHARE_BROKER_JAVA_OPTIONS", "").split("\\s+").toSeq.filter(_.nonEmpty)

  /**
   * How a new data dir is formatted. A single node by default; `nodes` > 1 makes node `nodeId` of a
   * cluster whose nodes all run broker and controller, with `ports(i)` = (client port, controller
   * port) of node i+1. `secure` adds a SASL/PLAIN and an SSL listener (see [[SecureListeners]]).
   */
  final case class Recipe(
      shareGroups: Boolean = true,
      nodeId: Int = 1,
      nodes: Int = 1,
      ports: Seq[(Int, Int)] = Nil,
      clusterId: String = Uuid.randomUuid().toString,
      secure: Boolean = false
  )

  /**
   * Starts a broker of `version` in `dir`, or restarts the one whose data is already there.
   * `shareGroups = false` formats a new data dir with share groups off (share.version=0).
   */
  def start(version: String, dir: Path, shareGroups: Boolean = true, secure: Boolean = false): KafkaBroker =
    new KafkaBroker(dir, version, Recipe(shareGroups = shareGroups, secure = secure)).start()

  /**
   * Starts a cluster of `nodes` nodes in `dir`/node-1.. (or restarts it): replication factor
   * `nodes` and min ISR 2 for topics and the internal topics. Returns the nodes.
   */
  def startCluster(version: String, dir: Path, nodes: Int): Seq[KafkaBroker] = {
    val nodeDirs = (1 to nodes).map(i => dir.resolve(s"node-$i"))
    val recipes =
      if (nodeDirs.forall(d => Files.exists(d.resolve("server.properties")))) nodeDirs.map(_ => Recipe(nodes = nodes))
      else {
        val ports     = (1 to nodes).map(_ => (freePort(), freePort()))
        val clusterId = Uuid.randomUuid().toString
        (1 to nodes).map(i => Recipe(nodeId = i, nodes = nodes, ports = ports, clusterId = clusterId))
      }
    val brokers = nodeDirs.zip(recipes).map { case (d, r) => new KafkaBroker(d, version, r).launch() }
    brokers.foreach(_.awaitServing(120000))
    brokers
  }

  /**
   * Starts the single-node broker whose directory was copied to `dir` (a test fixture's, or another
   * machine's: `server.properties` and `data/`), with the same cluster id, topics and groups. Its
   * `server.properties` still names the old ports and paths: they are rewritten first, with new free
   * ports (clients find the broker by its new bootstrap address) and `dir`'s own `data/`.
   */
  def startCopied(dir: Path, version: String): KafkaBroker = {
    val propsFile = dir.resolve("server.properties")
    val props     = loadProperties(propsFile)
    require(props.getProperty("kafkashare.nodes", "1") == "1", s"$dir holds a node of a cluster; only a single node can be moved")
    val (port, controllerPort) = (freePort(), freePort())
    props.setProperty("listeners", s"PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$controllerPort")
    props.setProperty("advertised.listeners", s"PLAINTEXT://127.0.0.1:$port")
    // A static quorum (the voters in the configuration, as format wrote them): its address may change.
    props.setProperty("controller.quorum.voters", s"${props.getProperty("node.id")}@127.0.0.1:$controllerPort")
    props.setProperty("log.dirs", dir.resolve("data").toString)
    props.setProperty("kafkashare.port", port.toString)
    props.setProperty("kafkashare.version", version)
    Files.deleteIfExists(dir.resolve("broker.pid"))
    val out = Files.newOutputStream(propsFile)
    try props.store(out, s"KRaft node moved to $dir (Kafka $version) for tests")
    finally out.close()
    new KafkaBroker(dir, version).start()
  }

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

  private def serverProperties(version: String, recipe: Recipe, dir: Path): Properties = {
    val ports                  = if (recipe.ports.nonEmpty) recipe.ports else Seq((freePort(), freePort()))
    val (port, controllerPort) = ports(recipe.nodeId - 1)
    val replicas               = recipe.nodes.toString
    val minIsr                 = math.min(2, recipe.nodes).toString
    val voters                 = ports.zipWithIndex.map { case ((_, c), i) => s"${i + 1}@127.0.0.1:$c" }.mkString(",")
    val secure                 = if (recipe.secure) Some(SecureListeners.create(dir)) else None
    val p                      = new Properties
    (Map(
      "process.roles"            -> "broker,controller",
      "node.id"                  -> recipe.nodeId.toString,
      "controller.quorum.voters" -> voters,
      "listeners" -> (Seq(s"PLAINTEXT://127.0.0.1:$port", s"CONTROLLER://127.0.0.1:$controllerPort") ++ secure.map(_.listeners)).mkString(
        ","
      ),
      "advertised.listeners"                     -> (Seq(s"PLAINTEXT://127.0.0.1:$port") ++ secure.map(_.listeners)).mkString(","),
      "controller.listener.names"                -> "CONTROLLER",
      "inter.broker.listener.name"               -> "PLAINTEXT",
      "listener.security.protocol.map"           -> "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL",
      "log.dirs"                                 -> dir.resolve("data").toString,
      "num.partitions"                           -> "1",
      "default.replication.factor"               -> replicas,
      "min.insync.replicas"                      -> minIsr,
      "offsets.topic.replication.factor"         -> replicas,
      "offsets.topic.num.partitions"             -> "3",
      "transaction.state.log.replication.factor" -> replicas,
      "transaction.state.log.min.isr"            -> minIsr,
      "share.coordinator.state.topic.replication.factor" -> replicas,
      "share.coordinator.state.topic.min.isr"            -> minIsr,
      "share.coordinator.state.topic.num.partitions"     -> "3",
      "group.initial.rebalance.delay.ms"                 -> "0",
      "auto.create.topics.enable"                        -> "false",
      // Lower bounds only (the defaults stay): lets a test give a group a short session or lock,
      // so a paused consumer's session expires (F7) in seconds rather than 45 s.
      "group.share.min.session.timeout.ms"    -> "6000",
      "group.share.min.heartbeat.interval.ms" -> "1000",
      // An upper bound only (Kafka 4.3+; older brokers ignore it): lets a group raise its own lock limit
      // (share.partition.max.record.locks) to 10,000, as `make bench --lock-limit` does for two-phase-commit.
      "group.share.max.partition.max.record.locks" -> "10000",
      // Not broker settings: the harness's own notes, ignored by Kafka.
      "kafkashare.port"    -> port.toString,
      "kafkashare.nodes"   -> recipe.nodes.toString,
      "kafkashare.version" -> version
    ) ++ secure.map(_.brokerSettings).getOrElse(Map.empty)).foreach { case (k, v) => p.setProperty(k, v) }
    p
  }

  private[testkit] def loadProperties(file: Path): Properties = {
    val p  = new Properties
    val in = Files.newInputStream(file)
    try p.load(in)
    finally in.close()
    p
  }

  // Ports this JVM handed out: the system may give a port it just freed again, and a broker whose
  // two listeners got the same port fails to format ("two listeners on the same port"; seen in CI).
  private val handedOut = scala.collection.mutable.Set.empty[Int]

  private[testkit] def freePort(): Int = handedOut.synchronized {
    var port = 0
    while (port == 0 || handedOut(port)) {
      val socket = new ServerSocket()
      try { socket.bind(new InetSocketAddress("127.0.0.1", 0)); port = socket.getLocalPort }
      finally socket.close()
    }
    handedOut += port
    port
  }

  private[testkit] val javaBin: String =
    new File(new File(sys.props("java.home"), "bin"), "java").getAbsolutePath
}
