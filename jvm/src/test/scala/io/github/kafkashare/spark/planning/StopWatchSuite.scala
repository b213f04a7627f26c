package io.github.kafkashare.spark.planning

import io.github.kafkashare.spark.UnitTestDirs
import io.github.kafkashare.spark.offsets.{SerializableHadoopConf, SourceMarkers}
import org.apache.hadoop.conf.Configuration
import org.scalatest.funsuite.AnyFunSuite

class StopWatchSuite extends AnyFunSuite {

  private def markers() =
    new SourceMarkers(UnitTestDirs.create("stop-watch").resolve("source").toString, new SerializableHadoopConf(new Configuration))

  /** A thread that notes itself as the stream thread, then waits (as one blocked in a foreachBatch does) until told. */
  private def streamThread(
      watch: StopWatch,
      name: String = "stream execution thread for [id = test]"
  ): (Thread, java.util.concurrent.CountDownLatch) = {
    val noted = new java.util.concurrent.CountDownLatch(1)
    val done  = new java.util.concurrent.CountDownLatch(1)
    val t = new Thread(
      () => {
        watch.noteStreamThread()
        noted.countDown()
        // Busy, not sleeping: a blocked socket read keeps the interrupt flag set, as this loop does.
        while (done.getCount > 0) Thread.onSpinWait()
      },
      name
    )
    t.start()
    noted.await()
    (t, done)
  }

  private def eventually(cond: => Boolean): Boolean = {
    val deadline = System.nanoTime + 2000L * 1000000L
    while (!cond && System.nanoTime < deadline) Thread.sleep(10)
    cond
  }

  test("an interrupt of the stream thread puts the stopping marker up") {
    val m         = markers()
    val watch     = new StopWatch(m)
    val (t, done) = streamThread(watch)
    Thread.sleep(100)
    assert(!m.stopping, "no stop yet")
    t.interrupt()
    assert(eventually(m.stopping))
    done.countDown(); t.join(); watch.end()
  }

  test("only Spark's stream thread is watched: another thread's interrupt says nothing of a stop") {
    val m         = markers()
    val watch     = new StopWatch(m)
    val (t, done) = streamThread(watch, name = "a test's own thread")
    t.interrupt()
    Thread.sleep(200)
    assert(!m.stopping)
    done.countDown(); t.join(); watch.end()
  }

  test("after the source's stop, no marker is written, and a restart's clearing stays") {
    val m         = markers()
    val watch     = new StopWatch(m)
    val (t, done) = streamThread(watch)
    watch.end()
    t.interrupt()
    Thread.sleep(200)
    assert(!m.stopping)
    done.countDown(); t.join()
  }

  test("the source's own stop marks it stopping too, and a restart clears both") {
    val m = markers()
    m.markStopped()
    assert(m.stopping && m.stopped)
    m.clearStopped()
    assert(!m.stopping && !m.stopped)
  }
}
