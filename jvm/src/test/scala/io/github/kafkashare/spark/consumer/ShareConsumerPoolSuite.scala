package io.github.kafkashare.spark.consumer

import java.time.Duration
import java.util.UUID
import java.util.concurrent.{CountDownLatch, TimeUnit}

import io.github.kafkashare.spark.UnitTestDirs
import io.github.kafkashare.spark.offsets.{AcquisitionLog, SerializableHadoopConf, SourceMarkers}
import org.apache.hadoop.conf.Configuration
import org.apache.kafka.clients.consumer.{ConsumerRecords, MockShareConsumer}
import org.scalatest.funsuite.AnyFunSuite
import io.github.kafkashare.spark.options.LockBudget

/** The pool's reuse rules. A share consumer connects only when it polls, so no broker is needed. */
class ShareConsumerPoolSuite extends AnyFunSuite {

  // One pool for the tests below, as a JVM has one (without its evictor: they take no time to be evicted).
  private val shared = new ShareConsumerPool(Clock.System, new PooledShareConsumer(_))

  // Nothing listens on port 1: these consumers never poll.
  private def freshKey() =
    ConsumerKey(
      s"pool-suite-${UUID.randomUUID}",
      Map("bootstrap.servers" -> "127.0.0.1:1"),
      LockBudget(120000L),
      "subscribe=t",
      "/tmp/checkpoint"
    )

  test("a consumer given back is handed out again; only the first borrow creates one") {
    val key   = freshKey()
    val first = shared.borrow(key)
    assert(first.newlyCreated)
    shared.giveBack(first)
    val again = shared.borrow(key)
    try {
      assert(again eq first)
      assert(!again.newlyCreated)
    } finally shared.discard(again)
  }

  test("a borrower waits for a consumer that a commit watcher is about to give back, instead of creating one") {
    val key  = freshKey()
    val held = shared.borrow(key)
    shared.expectBack(held) // as CommitWatcher.holdUntilCommitted does
    val giver = new Thread(() => { Thread.sleep(300); shared.giveBack(held) })
    giver.start()
    val borrowed = shared.borrow(key)
    giver.join()
    try {
      assert(borrowed eq held) // not a new consumer
    } finally shared.discard(borrowed)
  }

  test("without consumers out with a commit watcher, an empty pool creates one at once") {
    val key     = freshKey()
    val started = System.nanoTime
    val c       = shared.borrow(key)
    try {
      assert(c.newlyCreated)
      assert((System.nanoTime - started) / 1000000L < ShareConsumerPool.MaxWaitForHeldMs)
    } finally shared.discard(c)
  }

  test("a consumer discarded by the watcher ends the wait too: the borrower then creates one") {
    val key  = freshKey()
    val held = shared.borrow(key)
    shared.expectBack(held)
    shared.discard(held)
    val started = System.nanoTime
    val c       = shared.borrow(key)
    try {
      assert(c ne held)
      assert((System.nanoTime - started) / 1000000L < ShareConsumerPool.MaxWaitForHeldMs)
    } finally shared.discard(c)
  }

  private val conf = new SerializableHadoopConf(new Configuration)

  /** A query's markers and acquisition log, both under its source's checkpoint directory. */
  private def queryFiles(): (SourceMarkers, AcquisitionLog) = {
    val dir = UnitTestDirs.create("pool-suite").toString
    (new SourceMarkers(dir, conf), new AcquisitionLog(dir, conf))
  }

  // A pool of its own with a clock the test moves: eviction without waiting for it.
  private def poolWithClock() = {
    val clock = new ManualClock
    (new ShareConsumerPool(clock, new PooledShareConsumer(_)), clock)
  }

  test("a consumer idle longer than its key's locks.idleCloseMs is closed by the evictor, and one idle less is kept") {
    val (pool, clock) = poolWithClock()
    val key           = freshKey().copy(locks = LockBudget(2000L))
    val first         = pool.borrow(key)
    pool.giveBack(first)
    clock.advanceMs(999)
    pool.evictIdle()
    assert(pool.idleCount(key) == 1)
    val kept = pool.borrow(key)
    assert(kept eq first)
    pool.giveBack(kept)
    clock.advanceMs(1001)
    pool.evictIdle()
    assert(pool.idleCount(key) == 0) // closed by the evictor's round, before any borrower looks
    val after = pool.borrow(key)
    try {
      assert(after ne first)
      assert(after.newlyCreated)
    } finally pool.discard(after)
  }

  test("a borrower waits for a consumer the evictor has out to collect what its client fetched, instead of creating one") {
    // A bench run saw it: the next batch's tasks found the queue empty during the evictor's collect, opened
    // four consumers, waited 12 s for their assignment, and the four they replaced kept their partitions.
    val entered, release = new CountDownLatch(1)
    val task             = Thread.currentThread
    // Polls of the evictor's thread (its collect) wait until released.
    final class CollectWaits extends MockShareConsumer[Array[Byte], Array[Byte]] {
      override def poll(timeout: Duration): ConsumerRecords[Array[Byte], Array[Byte]] = {
        if (Thread.currentThread ne task) { entered.countDown(); release.await(5, TimeUnit.SECONDS) }
        super.poll(timeout)
      }
    }
    @volatile var opened = 0
    val pool             = new ShareConsumerPool(new ManualClock, k => { opened += 1; new PooledShareConsumer(k, _ => new CollectWaits) })
    val key              = freshKey()
    val (markers, log)   = queryFiles()
    val first            = pool.borrow(key)
    pool.watch(key, markers, log)
    assert(first.poll(Seq("t"), 10, waitForJoin = false).records.isEmpty && first.stillFetching, "an empty poll leaves the client fetching")
    pool.giveBack(first)
    val evictor = new Thread(() => pool.evictIdle())
    evictor.start()
    assert(entered.await(5, TimeUnit.SECONDS), "the evictor did not collect from the idle consumer")
    val releaser = new Thread(() => { Thread.sleep(200); release.countDown() })
    releaser.start()
    val borrowed = pool.borrow(key)
    evictor.join()
    releaser.join()
    try assert((borrowed eq first) && opened == 1, s"a new consumer was opened ($opened in all) while the idle one was with the evictor")
    finally pool.discard(borrowed)
  }

  /** A pool with one query, watched through its markers, and the consumer its first task borrowed. */
  private def watchedQuery() = {
    val (pool, _)      = poolWithClock()
    val key            = freshKey()
    val (markers, log) = queryFiles()
    val first          = pool.borrow(key)
    pool.watch(key, markers, log)
    (pool, key, markers, first)
  }

  test("the idle consumers of a query whose stopped marker appears are closed at the evictor's next round") {
    val (pool, key, markers, first) = watchedQuery()
    pool.giveBack(first)
    pool.evictIdle()
    val running = pool.borrow(key)
    assert(running eq first) // not stopped yet: kept
    pool.giveBack(running)
    markers.markStopped()
    pool.evictIdle()
    assert(pool.idleCount(key) == 0)
    assert(pool.queriesKnown == 0, "a stopped query with nothing idle or held is forgotten")
    val after = pool.borrow(key)
    try assert(after ne first)
    finally pool.discard(after)
  }

  test("a query is forgotten only once no consumer of it is out with a read task or a commit watcher") {
    val (pool, key, markers, out) = watchedQuery()
    markers.markStopped()
    pool.evictIdle()
    assert(pool.queriesKnown == 1, "a read task has its consumer")
    pool.expectBack(out)
    pool.evictIdle()
    assert(pool.queriesKnown == 1, "out with the commit watcher")
    pool.giveBack(out) // phase 2 done
    pool.evictIdle()   // stopped: the consumer is closed, then the query forgotten
    assert(pool.idleCount(key) == 0 && pool.queriesKnown == 0)
  }

  test("a running query whose consumers were all closed is forgotten, and watched again by its next read task") {
    val (pool, clock)  = poolWithClock()
    val key            = freshKey().copy(locks = LockBudget(2000L))
    val (markers, log) = queryFiles()
    pool.watch(key, markers, log)
    pool.giveBack(pool.borrow(key))
    clock.advanceMs(1001)
    pool.evictIdle()
    assert(pool.idleCount(key) == 0 && pool.queriesKnown == 0)
    val next = pool.borrow(key)
    pool.watch(key, markers, log)
    pool.evictIdle()
    assert(pool.queriesKnown == 1, "a read task has its consumer")
    pool.discard(next)
  }

  test("at the JVM's exit every idle consumer is closed, and one a read task gives back after that too") {
    val pool = new ShareConsumerPool(new ManualClock, new PooledShareConsumer(_))
    val key  = freshKey()
    val idle = pool.borrow(key)
    val lent = pool.borrow(key)
    pool.giveBack(idle)
    val giver = new Thread(() => { Thread.sleep(200); pool.giveBack(lent) })
    giver.start()
    val started = System.nanoTime
    pool.closeAll(waitForLentMs = 5000L)
    assert((System.nanoTime - started) / 1000000L < 4000L, "waits for the lent one only until it is back")
    giver.join()
    assert(pool.idleCount(key) == 0)
    val late = pool.borrow(key)
    pool.giveBack(late)
    assert(pool.idleCount(key) == 0, "given back after the exit began: closed, not kept")
  }

  test("a consumer given back or discarded on an interrupted thread is still handled, and the interrupt kept") {
    val pool = new ShareConsumerPool(new ManualClock, new PooledShareConsumer(_))
    val key  = freshKey()
    val c    = pool.borrow(key)
    Thread.currentThread.interrupt()
    pool.giveBack(c)
    assert(Thread.interrupted())
    assert(pool.idleCount(key) == 1)
  }
}
