package io.github.kafkashare.spark.planning

import java.io.IOException
import java.net.{InetAddress, InetSocketAddress, Socket}

import scala.util.control.NonFatal

/**
 * A TCP connection to each bootstrap address before the Admin client asks anything: the client retries
 * a refused connection until its API timeout (30 s), which is long to wait for a wrong port. A broker's
 * listener accepts a connection whatever its protocol (plaintext, TLS, SASL), so this says only
 * whether something listens there.
 */
object BootstrapProbe {

  /**
   * None when some address of `bootstrapServers` (comma-separated host:port) accepts a connection
   * within `timeoutMs`, or cannot be checked; else the failure of the last one tried.
   */
  def firstRefusal(bootstrapServers: String, timeoutMs: Long): Option[Throwable] = {
    val addresses               = bootstrapServers.split(",").iterator.map(_.trim).filter(_.nonEmpty).flatMap(hostAndPort).toSeq
    var last: Option[Throwable] = None
    val connected = addresses.exists { case (host, port) =>
      try {
        InetAddress.getAllByName(host).exists { address =>
          val socket = new Socket()
          try { socket.connect(new InetSocketAddress(address, port), timeoutMs.toInt); true }
          catch { case e: IOException => last = Some(e); false }
          finally socket.close()
        }
      } catch { case NonFatal(e) => last = Some(e); false }
    }
    // Addresses the client reads differently (none parsed here) are left to the client.
    if (connected || addresses.isEmpty) None else last
  }

  /** `host:port`, `[v6]:port` or `v6:port`; None when there is no numeric port. */
  private def hostAndPort(address: String): Option[(String, Int)] = {
    val colon = address.lastIndexOf(':')
    if (colon <= 0) None
    else address.substring(colon + 1).toIntOption.map(port => (address.substring(0, colon).stripPrefix("[").stripSuffix("]"), port))
  }
}
