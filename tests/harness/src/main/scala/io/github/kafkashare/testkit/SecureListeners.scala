package io.github.kafkashare.testkit

import java.io.IOException
import java.nio.file.{Files, Path}
import java.util.UUID
import java.util.concurrent.TimeUnit

/**
 * Two more listeners for a test broker: SASL_PLAINTEXT with the PLAIN mechanism (user `alice`) and
 * SSL (a self-signed key made here with keytool). Passwords are random and distinctive, so a test can
 * search logs and query progress for them. Everything a client needs is noted in server.properties
 * (`kafkashare.sasl.*`, `kafkashare.ssl.*`) and read back with [[KafkaBroker.note]].
 */
final case class SecureListeners(
    saslPort: Int,
    sslPort: Int,
    userPassword: String,
    storePassword: String,
    keystore: Path,
    truststore: Path
) {

  def listeners: String = s"SASL_PLAINTEXT://127.0.0.1:$saslPort,SSL://127.0.0.1:$sslPort"

  def brokerSettings: Map[String, String] = Map(
    "sasl.enabled.mechanisms" -> "PLAIN",
    // The broker's own PLAIN user list: admin for itself, alice for the tests.
    "listener.name.sasl_plaintext.plain.sasl.jaas.config" ->
      ("org.apache.kafka.common.security.plain.PlainLoginModule required " +
        s"""username="admin" password="$userPassword" user_admin="$userPassword" user_alice="$userPassword";"""),
    "ssl.keystore.type"                  -> "PKCS12",
    "ssl.keystore.location"              -> keystore.toString,
    "ssl.keystore.password"              -> storePassword,
    "ssl.key.password"                   -> storePassword,
    "kafkashare.sasl.bootstrap"          -> s"127.0.0.1:$saslPort",
    "kafkashare.sasl.user"               -> "alice",
    "kafkashare.sasl.password"           -> userPassword,
    "kafkashare.ssl.bootstrap"           -> s"127.0.0.1:$sslPort",
    "kafkashare.ssl.truststore"          -> truststore.toString,
    "kafkashare.ssl.truststore.password" -> storePassword
  )
}

object SecureListeners {

  /** Chooses ports and makes the broker's key and the clients' trust store in `dir`. */
  def create(dir: Path): SecureListeners = {
    Files.createDirectories(dir)
    val keystore   = dir.resolve("broker.p12")
    val certFile   = dir.resolve("broker.crt")
    val truststore = dir.resolve("truststore.p12")
    val storePass  = s"store-secret-${UUID.randomUUID().toString.take(8)}"
    keytool(
      "-genkeypair",
      "-alias",
      "broker",
      "-keyalg",
      "RSA",
      "-keysize",
      "2048",
      "-validity",
      "30",
      "-dname",
      "CN=localhost",
      "-ext",
      "SAN=IP:127.0.0.1,DNS:localhost",
      "-storetype",
      "PKCS12",
      "-keystore",
      keystore.toString,
      "-storepass",
      storePass,
      "-keypass",
      storePass
    )
    keytool("-exportcert", "-alias", "broker", "-keystore", keystore.toString, "-storepass", storePass, "-file", certFile.toString)
    keytool(
      "-importcert",
      "-noprompt",
      "-alias",
      "broker",
      "-file",
      certFile.toString,
      "-storetype",
      "PKCS12",
      "-keystore",
      truststore.toString,
      "-storepass",
      storePass
    )
    SecureListeners(
      KafkaBroker.freePort(),
      KafkaBroker.freePort(),
      s"user-secret-${UUID.randomUUID().toString.take(8)}",
      storePass,
      keystore,
      truststore
    )
  }

  private def keytool(args: String*): Unit = {
    val bin     = new java.io.File(new java.io.File(sys.props("java.home"), "bin"), "keytool").getAbsolutePath
    val process = new ProcessBuilder((bin +: args): _*).redirectErrorStream(true).start()
    val output  = new String(process.getInputStream.readAllBytes())
    if (!process.waitFor(60, TimeUnit.SECONDS) || process.exitValue() != 0)
      throw new IOException(s"keytool ${args.head} failed:\n$output")
  }
}
