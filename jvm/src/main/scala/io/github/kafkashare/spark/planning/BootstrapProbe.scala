package io.github.kafkashare.spark.planning

import java.io.IOException
import java.net.{InetAddress, InetSocketAddress, Proxy, Socket}

import scala.util.control.NonFatal

/**
 * A TCP connection to the bootstrap addresses before the Admin client asks anything: the client retries
 * a refused connection until its API timeout (30 s), which is long to wait for a wrong port. A broker's
 * listener accepts a connection whatever its protocol (plaintext, TLS, SASL), so this says only
 * whether something listens there. Refusals are tried again until a deadline, so that a broker in a
 * rolling restart, or one starting beside the application, is waited for a little.
 */
object BootstrapProbe {

  /**
   * None when some address of `bootstrapServers` (comma-separated `[protocol://]host:port`) accepts a
   * connection before `deadlineMs`, or none can be checked (unparsed, unresolved: the client says
   * what is wrong with those); else the last failure.
   */
  def firstRefusal(bootstrapServers: String, deadlineMs: Long): Option[Throwable] = {
    val addresses = bootstrapServers.split(",").iterator.map(_.trim).filter(_.nonEmpty).flatMap(hostAndPort).toSeq
      .flatMap { case (host, port) =>
        try InetAddress.getAllByName(host).toSeq.map(new InetSocketAddress(_, port))
        catch { case NonFatal(_) => Nil }
      }
    if (addresses.isEmpty) return None
    val deadline                = System.nanoTime + deadlineMs * 1000000L
    var last: Option[Throwable] = None
    while (System.nanoTime < deadline) {
      val accepted = addresses.exists { address =>
        val leftMs = ((deadline - System.nanoTime) / 1000000L).max(1L).min(2000L)
        val socket = new Socket(Proxy.NO_PROXY) // as the client's own channels: no SOCKS proxy
        try { socket.connect(address, leftMs.toInt); true }
        catch { case e: IOException => last = Some(e); false }
        finally socket.close()
      }
      if (accepted) return None
      Thread.sleep(500L.min(((deadline - System.nanoTime) / 1000000L).max(0L)))
    }
    last
  }

  private val Address = """^(?:[0-9a-zA-Z\-%._]*://)?\[?([0-9a-zA-Z\-%._:]*)]?:([0-9]+)$""".r

  /** `host:port`, `[v6]:port`, with or without a `PROTOCOL://` prefix (as Kafka's client reads them). */
  private def hostAndPort(address: String): Option[(String, Int)] = address match {
    case Address(host, port) if host.nonEmpty => port.toIntOption.map(host -> _)
    case _                                    => None
  }
}
