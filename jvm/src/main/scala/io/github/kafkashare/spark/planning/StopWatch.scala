package io.github.kafkashare.spark.planning

import scala.util.control.NonFatal

import io.github.kafkashare.spark.offsets.SourceMarkers
import io.github.kafkashare.spark.sparkinternals.StreamThread
import org.apache.spark.internal.Logging

/**
 * Notices that Spark began to stop the query, before the source's own stop() is called.
 *
 * Why: Spark's stop interrupts the query's stream thread and waits for it to end; the source's stop()
 * runs only then. A foreachBatch that runs goes on meanwhile (a Python one does not see the interrupt:
 * its py4j call waits on a socket), and the reads it starts would acquire records for a batch that will
 * never commit. Pinned, and ACCEPTed at once by the strategies that do so, those records would be out of
 * reach of every other reader, a new checkpoint's query included, while the job that reads them fails on
 * the interrupted thread before the sink has them. So the driver watches the stream thread (noted when
 * Spark calls the source from it): once it is interrupted, the `stopping` marker goes up
 * ([[SourceMarkers]]) and read tasks that would acquire refuse. Spark interrupts a stream thread only to
 * stop its query.
 *
 * A thread interrupted while it sleeps between triggers has its flag cleared at once; it then runs no batch,
 * so nothing is missed.
 */
private[planning] final class StopWatch(markers: SourceMarkers) extends Logging {
  @volatile private var streamThread: Thread = null
  @volatile private var watcher: Thread      = null
  @volatile private var ended                = false

  /** Called on the query's stream thread (before each batch); the first call starts the watch. */
  def noteStreamThread(): Unit =
    if (streamThread == null && StreamThread.is(Thread.currentThread)) synchronized {
      if (streamThread == null && !ended) {
        streamThread = Thread.currentThread
        val w = new Thread(() => watch(streamThread), "kafka-share-stop-watch")
        w.setDaemon(true)
        w.start()
        watcher = w
      }
    }

  /** The source stops: the watch ends, and no marker is written after this returns (a restart clears it). */
  def end(): Unit = {
    synchronized { ended = true }
    Option(watcher).foreach { w => w.interrupt(); w.join(5000L) }
  }

  private def watch(thread: Thread): Unit =
    try {
      while (!ended && thread.isAlive && !thread.isInterrupted) Thread.sleep(StopWatch.PeriodMs)
      if (!ended && thread.isInterrupted) {
        logInfo("kafka-share: Spark is stopping the query; reads that would acquire records refuse from now on")
        markers.markStopping()
      }
    } catch {
      case _: InterruptedException => ()
      case NonFatal(e)             => logWarning("kafka-share: could not mark the query as stopping", e)
    }
}

private object StopWatch {

  /** How often the stream thread is looked at: a foreachBatch's next read comes later than this. */
  val PeriodMs = 20L
}
