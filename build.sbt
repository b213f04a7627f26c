// The build of the kafka-share source for Spark Structured Streaming.
//   connector   (jvm/)               the product: one jar with kafka-clients shaded inside, no Spark classes
//   harness     (tests/harness/)     test support: a real Kafka broker in its own JVM, topic and group helpers
//   integration (tests/integration/) Scala tests against that broker: client smoke tests, and stream
//                                    suites that run the connector in a Spark session in the test JVM
// Every version comes from versions.properties.

val pins: Map[String, String] = {
  val props = new java.util.Properties
  IO.load(props, file("versions.properties"))
  import scala.jdk.CollectionConverters._
  props.asScala.toMap
}
def pin(key: String): String =
  pins.getOrElse(key, sys.error(s"versions.properties has no '$key'"))

// Every broker line the tests start, oldest first: the floor and the newest, and the lines between.
val brokerVersions: Seq[String] =
  Seq("kafka.broker.versions", "kafka.broker.versions.between").flatMap(pin(_).split("\\s+")).distinct
    .sortBy(v => v.split('.').map(_.toInt) match { case Array(major, minor, patch) => (major, minor, patch) })

ThisBuild / version      := pin("project.version")
ThisBuild / scalaVersion := pin("scala")
ThisBuild / organization := "io.github.kafkashare"
ThisBuild / scalacOptions ++= Seq("-deprecation", "-feature", "-unchecked", "-Xlint", "-release", "17")
ThisBuild / javacOptions ++= Seq("--release", "17")

// Where generated files for the Makefile and the Python tests go (ignored by git).
val buildOut = settingKey[File]("target/ at the root of the project")
ThisBuild / buildOut := (LocalRootProject / baseDirectory).value / "target"

// Spark ships lz4, snappy, zstd and slf4j; the connector uses Spark's copies of them.
val providedBySpark = Seq(
  ExclusionRule("at.yawk.lz4"),
  ExclusionRule("org.lz4"),
  ExclusionRule("org.xerial.snappy"),
  ExclusionRule("com.github.luben"),
  ExclusionRule("org.slf4j")
)

val shadedKafkaPackage = "io.github.kafkashare.shaded.kafka"

val releaseStage = taskKey[File](
  "Writes what Maven Central takes (the jar, sources and Scaladoc jars, the POM; unsigned) to target/release-stage/maven (make release)"
)

lazy val connector = project
  .in(file("jvm"))
  .settings(
    name := "spark-kafka-share",
    libraryDependencies ++= Seq(
      "org.apache.spark" %% "spark-sql"     % pin("spark")     % Provided,
      ("org.apache.kafka" % "kafka-clients" % pin("kafka.clients")).excludeAll(providedBySpark: _*),
      "org.scalatest"    %% "scalatest"     % pin("scalatest") % Test
    ),
    // The project version, readable at run time (diagnostics, error messages).
    Compile / resourceGenerators += Def.task {
      val out = (Compile / resourceManaged).value / "io" / "github" / "kafkashare" / "spark" / "version.properties"
      IO.write(out, s"version=${version.value}\n")
      Seq(out)
    }.taskValue,
    // The project's LICENSE and NOTICE in the jar's META-INF/ (the bundled client's own keep their names, renamed).
    Compile / resourceGenerators += Def.task {
      val root = (LocalRootProject / baseDirectory).value
      Seq("LICENSE", "NOTICE").map { f =>
        val out = (Compile / resourceManaged).value / "META-INF" / f
        IO.copyFile(root / f, out)
        out
      }
    }.taskValue,
    Test / fork := true,
    Test / javaOptions += s"-Dkafkashare.root=${(LocalRootProject / baseDirectory).value}",
    // Why shade: docs/internals/packaging.md. In short, Spark's own Kafka source puts
    // kafka-clients 3.9 (no share consumer) on the class path of the same application.
    assembly / assemblyShadeRules := Seq(
      ShadeRule.rename("org.apache.kafka.**" -> s"$shadedKafkaPackage.@1").inAll,
      // The client reads its own version from the resource /kafka/kafka-version.properties, which the rule
      // above does not move: with another kafka-clients on the class path (Spark's Kafka source brings one),
      // the first copy found would win, and the shaded client would report, and send brokers, that version.
      // jarjar renames a resource by mapping "<its folder>/RESOURCE", and with it the string that names the
      // resource; this rule matches only the folder kafka/ of kafka-clients, so the client's JMX prefixes
      // ("kafka.consumer", ...), which a wider "kafka.**" would rename too, stay as they are (ShadedVersionSuite).
      ShadeRule.rename("kafka.RESOURCE" -> s"$shadedKafkaPackage.RESOURCE").inLibrary(
        "org.apache.kafka" % "kafka-clients" % pin("kafka.clients")
      )
    ),
    assemblyPackageScala / assembleArtifact := false,
    assembly / assemblyJarName              := s"${name.value}_${scalaBinaryVersion.value}-${version.value}.jar",
    // The plain jar (no kafka-clients inside) would have the same name: keep it out of the way.
    Compile / packageBin / artifactPath := crossTarget.value / "plain" / s"${name.value}_${scalaBinaryVersion.value}-${version.value}.jar",
    assembly / test                     := {},
    // The real-time classes (built against Spark 4.1) go into the same jar.
    assembly / fullClasspath ++= {
      val _ = (LocalProject("realTime") / Compile / compile).value
      Seq(Attributed.blank((LocalProject("realTime") / Compile / classDirectory).value))
    },
    // `connector/publish` writes a Maven repository to target/maven-repo (the tests use it with
    // `spark-submit --packages ... --repositories file://...`). The published jar is the shaded one,
    // so the pom names no dependency: kafka-clients is inside, Spark is the cluster's own.
    Compile / packageBin / publishArtifact := false,
    Compile / packageDoc / publishArtifact := false,
    addArtifact(Compile / packageBin / artifact, assembly),
    publishMavenStyle    := true,
    publishConfiguration := publishConfiguration.value.withOverwrite(true), // a rebuild replaces the local copy
    publishTo            := Some(MavenCache("kafka-share-local", buildOut.value / "maven-repo")),
    pomPostProcess := { node =>
      import scala.xml.{Elem, Node => XNode}
      import scala.xml.transform.{RewriteRule, RuleTransformer}
      new RuleTransformer(new RewriteRule {
        override def transform(n: XNode): Seq[XNode] = n match {
          case e: Elem if e.label == "dependencies" => Nil
          case other                                => other
        }
      }).transform(node).head
    },
    // What Maven Central asks of a POM: licence, description, project URL, SCM and developers.
    licenses := Seq("Apache-2.0" -> url("https://www.apache.org/licenses/LICENSE-2.0")),
    homepage := Some(url("https://github.com/kafkashare/spark-kafka-share")),
    scmInfo := Some(ScmInfo(
      url("https://github.com/kafkashare/spark-kafka-share"),
      "scm:git:https://github.com/kafkashare/spark-kafka-share.git"
    )),
    developers := List(
      Developer("kafkashare", "the spark-kafka-share authors", "", url("https://github.com/kafkashare"))
    ),
    description := "Kafka share groups (KIP-932) as a Spark Structured Streaming source: format(\"kafka-share\")",
    // The Maven layout of one coordinate, unsigned: the shaded jar as published, a sources jar of the connector and
    // its real-time classes (both are in the jar), a Scaladoc jar as the javadoc jar Central asks for, the POM.
    // build/release.py adds checksums and signatures (docs/releasing.md).
    releaseStage := {
      val artifactId = s"${moduleName.value}_${scalaBinaryVersion.value}"
      val dir      = organization.value.split('.').foldLeft(buildOut.value / "release-stage" / "maven")(_ / _) / artifactId / version.value
      val base     = s"$artifactId-${version.value}"
      val root     = (LocalRootProject / baseDirectory).value
      val legal    = Seq("LICENSE", "NOTICE").map(f => root / f -> s"META-INF/$f")
      val manifest = new java.util.jar.Manifest
      manifest.getMainAttributes.put(java.util.jar.Attributes.Name.MANIFEST_VERSION, "1.0")
      def jar(entries: Seq[(File, String)], out: File): Unit = {
        val unique = (entries ++ legal).groupBy(_._2).values.map(_.head).toSeq.sortBy(_._2)
        IO.jar(unique, out, manifest, None)
      }
      IO.delete(dir)
      IO.createDirectory(dir)
      IO.copyFile(assembly.value, dir / s"$base.jar")
      jar(
        (Compile / packageSrc / mappings).value ++ (LocalProject("realTime") / Compile / packageSrc / mappings).value,
        dir / s"$base-sources.jar"
      )
      jar(Path.allSubpaths((Compile / doc).value).toSeq, dir / s"$base-javadoc.jar")
      IO.copyFile(makePom.value, dir / s"$base.pom")
      streams.value.log.info(s"Release stage: $dir")
      dir
    },
    assembly / assemblyMergeStrategy := {
      // The project's own LICENSE and NOTICE keep their names (the default would suffix the jar's name).
      case PathList("META-INF", "LICENSE" | "NOTICE")               => MergeStrategy.first
      case PathList("module-info.class")                            => MergeStrategy.discard
      case PathList("META-INF", "versions", _, "module-info.class") => MergeStrategy.discard
      case PathList("META-INF", "services", _*)                     => MergeStrategy.filterDistinctLines
      case PathList("META-INF", f) if f.endsWith(".SF") || f.endsWith(".DSA") || f.endsWith(".RSA") =>
        MergeStrategy.discard
      case other => (assembly / assemblyMergeStrategy).value(other)
    }
  )

// Spark's real-time mode (Spark 4.1 and later): the stream and reader that implement its interfaces, built
// against Spark 4.1 and put into the connector's jar; the connector loads them only where Spark has the
// interfaces (docs/guide/real-time.md).
lazy val realTime = project
  .in(file("jvm/realtime"))
  .dependsOn(connector)
  .settings(
    name                                      := "spark-kafka-share-realtime",
    publish / skip                            := true,
    libraryDependencies += "org.apache.spark" %% "spark-sql" % pin("spark.realtime") % Provided
  )

val fetchBrokers = taskKey[Seq[File]](
  "Resolves each test broker version (kafka_2.13 plus an SLF4J binding) and writes target/brokers/<version>/classpath.txt"
)
val fetchBenchTools = taskKey[File](
  "Resolves kafka-tools (ShareConsumerPerformance) of the newest test broker and writes target/bench/tools.classpath"
)
val fetchS3Jars = taskKey[File](
  "Resolves Hadoop's S3A (hadoop-aws and the AWS SDK modules it uses) and writes target/s3/jars for the object-store tests"
)
val fetchSparkKafkaClients = taskKey[File](
  "Resolves Spark's own Kafka source (spark-sql-kafka-0-10 of the Spark pinned) and writes the path of the kafka-clients jar it brings to target/spark-kafka-clients.path"
)
val exportHarnessClasspath = taskKey[File](
  "Writes the harness class path to target/harness.classpath for the Makefile and the Python tests"
)

lazy val harness = project
  .in(file("tests/harness"))
  .settings(
    name           := "kafka-share-test-harness",
    publish / skip := true,
    libraryDependencies ++= Seq(
      "org.apache.kafka" % "kafka-clients" % pin("kafka.clients"),
      "org.slf4j"        % "slf4j-simple"  % pin("slf4j")
    ),
    fetchBrokers := {
      val resolver = dependencyResolution.value
      val log      = streams.value.log
      brokerVersions.map { v =>
        val dir       = buildOut.value / "brokers" / v
        val classpath = dir / "classpath.txt"
        if (!classpath.exists) {
          // kafka-tools-api holds command-line tool interfaces the broker does not load, and
          // 4.4.0's pom is missing from Maven Central: leave it out for every version.
          val modules = Seq(
            ("org.apache.kafka" % "kafka_2.13"   % v).exclude("org.apache.kafka", "kafka-tools-api"),
            "org.slf4j"         % "slf4j-simple" % pin("slf4j")
          )
          val jars = modules.flatMap { m =>
            resolver.retrieve(m, scalaModuleInfo = None, dir / "retrieved", log) match {
              case Left(warning) => throw warning.resolveException
              case Right(files)  => files.filter(_.getName.endsWith(".jar"))
            }
          }
          // slf4j-api may come twice (Kafka's and the binding's): keep one file per artifact name.
          val unique = jars.groupBy(_.getName.replaceAll("-[0-9][^-]*\\.jar$", "")).values.map(_.maxBy(_.getName))
          IO.write(classpath, unique.map(_.getAbsolutePath).toSeq.sorted.mkString("\n") + "\n")
          log.info(s"Kafka broker $v: ${unique.size} jars")
        }
        dir
      }
    },
    // The benchmark's baseline: Kafka's own share consumer tool in its own JVM, with its own class
    // path (kafka-tools of the version pinned as kafka.tools: 4.4.0 is not on Maven Central).
    fetchBenchTools := {
      val out = buildOut.value / "bench" / "tools.classpath"
      val jars = Seq("org.apache.kafka" % "kafka-tools" % pin("kafka.tools"), "org.slf4j" % "slf4j-simple" % pin("slf4j")).flatMap { m =>
        dependencyResolution.value.retrieve(m, scalaModuleInfo = None, buildOut.value / "bench" / "retrieved", streams.value.log) match {
          case Left(warning) => throw warning.resolveException
          case Right(files)  => files.filter(_.getName.endsWith(".jar"))
        }
      }
      val unique = jars.groupBy(_.getName.replaceAll("-[0-9][^-]*\\.jar$", "")).values.map(_.maxBy(_.getName))
      IO.write(out, unique.map(_.getAbsolutePath).toSeq.sorted.mkString(java.io.File.pathSeparator))
      out
    },
    // S3A for tests/python/test_object_store.py, on pyspark's own Hadoop (hadoop-client-api and -runtime):
    // hadoop-aws without its Hadoop dependencies and without the AWS SDK's 600 MB bundle jar, which it
    // names as its SDK; the SDK modules S3A calls instead. Netty comes with Spark. Two sets: the newest
    // pyspark's Hadoop (target/s3/jars) and the oldest's (target/s3/jars-oldest, for `make test-compat`).
    fetchS3Jars := {
      val resolver = dependencyResolution.value
      val log      = streams.value.log
      val dir      = buildOut.value / "s3"
      def fetch(hadoopAws: String, sdk: String, out: File): File = {
        val hadoopDeps = Seq("org.apache.hadoop", "software.amazon.awssdk", "io.netty")
        val modules = Seq(
          hadoopDeps.foldLeft("org.apache.hadoop" % "hadoop-aws" % hadoopAws)((m, org) => m.excludeAll(ExclusionRule(org))),
          ("software.amazon.awssdk" % "s3"                  % sdk).excludeAll(ExclusionRule("io.netty")),
          ("software.amazon.awssdk" % "s3-transfer-manager" % sdk).excludeAll(ExclusionRule("io.netty")),
          ("software.amazon.awssdk" % "sts"                 % sdk).excludeAll(ExclusionRule("io.netty"))
        ).map(_.excludeAll(providedBySpark: _*))
        val jars = modules.flatMap { m =>
          resolver.retrieve(m, scalaModuleInfo = None, dir / "retrieved", log) match {
            case Left(warning) => throw warning.resolveException
            case Right(files)  => files.filter(_.getName.endsWith(".jar"))
          }
        }
        val unique = jars.groupBy(_.getName.replaceAll("-[0-9][^-]*\\.jar$", "")).values.map(_.maxBy(_.getName))
        IO.write(out, unique.map(_.getAbsolutePath).toSeq.sorted.mkString(","))
        out
      }
      fetch(pin("hadoop-aws.oldest"), pin("aws-sdk.oldest"), dir / "jars-oldest")
      fetch(pin("hadoop-aws"), pin("aws-sdk"), dir / "jars")
    },
    // ShadedVersionSuite puts the connector jar beside the kafka-clients that Spark's own Kafka source brings.
    fetchSparkKafkaClients := {
      val out = buildOut.value / "spark-kafka-clients.path"
      val module = ("org.apache.spark" % "spark-sql-kafka-0-10_2.13" % pin("spark"))
        .excludeAll(
          ExclusionRule("org.apache.hadoop"),
          ExclusionRule("org.apache.spark", "spark-tags_2.13"),
          ExclusionRule("org.apache.spark", "spark-token-provider-kafka-0-10_2.13")
        )
      val jars = dependencyResolution.value.retrieve(
        module,
        scalaModuleInfo = None,
        buildOut.value / "spark-kafka" / "retrieved",
        streams.value.log
      ) match {
        case Left(warning) => throw warning.resolveException
        case Right(files)  => files.filter(f => f.getName.startsWith("kafka-clients-") && f.getName.endsWith(".jar"))
      }
      IO.write(out, jars.headOption.getOrElse(sys.error(s"spark-sql-kafka-0-10 ${pin("spark")} brought no kafka-clients")).getAbsolutePath)
      out
    },
    exportHarnessClasspath := {
      val out = buildOut.value / "harness.classpath"
      IO.write(out, (Runtime / fullClasspath).value.files.map(_.getAbsolutePath).mkString(java.io.File.pathSeparator))
      fetchBrokers.value
      out
    }
  )

// Spark on Java 17 needs these (as Spark's own launcher passes them): the in-JVM stream suites run Spark.
val sparkJavaOptions = Seq(
  "-XX:+IgnoreUnrecognizedVMOptions",
  "-Djdk.reflect.useDirectMethodHandle=false",
  "-Dio.netty.tryReflectionSetAccessible=true"
) ++ Seq(
  "java.lang",
  "java.lang.invoke",
  "java.lang.reflect",
  "java.io",
  "java.net",
  "java.nio",
  "java.util",
  "java.util.concurrent",
  "java.util.concurrent.atomic",
  "jdk.internal.ref",
  "sun.nio.ch",
  "sun.nio.cs",
  "sun.security.action",
  "sun.util.calendar"
).map(p => s"--add-opens=java.base/$p=ALL-UNNAMED")

// The test brokers without the C2 compiler (KafkaBroker.extraJavaOptions; tests/python/conftest.py says why).
val testBrokerEnv = Map("KAFKASHARE_BROKER_JAVA_OPTIONS" -> "-XX:TieredStopAtLevel=1")

lazy val integration = project
  .in(file("tests/integration"))
  .dependsOn(harness, connector)
  .settings(
    name           := "kafka-share-integration-tests",
    publish / skip := true,
    libraryDependencies ++= Seq(
      "org.scalatest" %% "scalatest" % pin("scalatest") % Test,
      // The stream suites run the connector (unshaded, from its classes) in a real Spark session, on the
      // Spark line the connector compiles against; pytest runs the shaded jar on the newest pyspark.
      "org.apache.spark" %% "spark-sql" % pin("spark") % Test
    ),
    // Spark brings its own SLF4J binding (log4j); the harness's simple one would be a second.
    excludeDependencies += ExclusionRule("org.slf4j", "slf4j-simple"),
    Test / fork := true,
    Test / javaOptions ++= sparkJavaOptions ++ Seq(
      "-Xmx3g",
      // sbt's forked runner runs as many suites at once as the JVM sees processors: 4 on the 2-core machine,
      // since most of a stream suite's time is waiting (see testForkedParallel below; docs/internals/testing.md).
      "-XX:ActiveProcessorCount=4",
      s"-Dkafkashare.root=${(LocalRootProject / baseDirectory).value}",
      s"-Dkafkashare.broker.versions=${brokerVersions.mkString(",")}",
      s"-Dkafkashare.spark=${pin("spark")}"
    ),
    Test / testOptions += Tests.Argument(TestFrameworks.ScalaTest, "-oD"),
    Test / envVars ++= testBrokerEnv,
    // Suites run side by side in the one test JVM (tests within a suite one after another): most of a
    // stream test is waiting for batches, locks and polls, and each test has its own topic and group.
    Test / testForkedParallel := true,
    Test / test               := (Test / test).dependsOn(harness / fetchBrokers, harness / fetchSparkKafkaClients).value
  )

// The real-time cells (docs/internals/real-time-measurements.md) in a test JVM of their own, on the oldest Spark line with real-time
// mode (spark.realtime): the stream suites' broker and helpers, the connector with its real-time classes.
lazy val realTimeIntegration = project
  .in(file("tests/realtime-integration"))
  .dependsOn(harness, realTime, integration % "test->test")
  .settings(
    name           := "kafka-share-real-time-tests",
    publish / skip := true,
    libraryDependencies ++= Seq(
      "org.scalatest"    %% "scalatest" % pin("scalatest")      % Test,
      "org.apache.spark" %% "spark-sql" % pin("spark.realtime") % Test
    ),
    excludeDependencies += ExclusionRule("org.slf4j", "slf4j-simple"),
    Test / fork := true,
    Test / javaOptions ++= sparkJavaOptions ++ Seq(
      "-Xmx3g",
      s"-Dkafkashare.root=${(LocalRootProject / baseDirectory).value}",
      s"-Dkafkashare.broker.versions=${brokerVersions.mkString(",")}",
      s"-Dkafkashare.spark.realtime=${pin("spark.realtime")}"
    ),
    Test / testOptions += Tests.Argument(TestFrameworks.ScalaTest, "-oD"),
    Test / envVars ++= testBrokerEnv,
    Test / test := (Test / test).dependsOn(harness / fetchBrokers).value
  )

val fetchScalafmt = taskKey[File](
  "Resolves scalafmt's command line (the version pinned as scalafmt) and writes target/scalafmt.classpath"
)

// Test JVMs one at a time (the Makefile runs them in turn; a bare `sbt test` would otherwise run the stream suites'
// and the real-time suites' JVMs, each with its brokers and Spark, at once on a 2-core machine).
Global / concurrentRestrictions += Tags.limit(Tags.ForkedTestGroup, 1)

lazy val root = project
  .in(file("."))
  .aggregate(connector, realTime, harness, integration, realTimeIntegration)
  .settings(
    publish / skip := true,
    // The formatter runs as its own command line (`make lint`, `make format`): no sbt plugin, so that
    // its version does not tie the sbt version.
    fetchScalafmt := {
      val out = buildOut.value / "scalafmt.classpath"
      val jars = dependencyResolution.value.retrieve(
        "org.scalameta" % "scalafmt-cli_2.13" % pin("scalafmt"),
        scalaModuleInfo = None,
        buildOut.value / "scalafmt" / "retrieved",
        streams.value.log
      ) match {
        case Left(warning) => throw warning.resolveException
        case Right(files)  => files.filter(_.getName.endsWith(".jar"))
      }
      IO.write(out, jars.map(_.getAbsolutePath).sorted.mkString(java.io.File.pathSeparator))
      out
    }
  )
