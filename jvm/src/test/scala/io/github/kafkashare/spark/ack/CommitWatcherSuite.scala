package io.github.kafkashare.spark.ack

import java.nio.file.Files
import java.util.UUID

import io.github.kafkashare.spark.UnitTestDirs
import io.github.kafkashare.spark.consumer.{ConsumerKey, ManualClock, PooledShareConsumer, ShareConsumerPool}
import io.github.kafkashare.spark.offsets.{SerializableHadoopConf, SourceMarkers}
import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path
import org.scalatest.funsuite.AnyFunSuite
import io.github.kafkashare.spark.options.LockBudget

/**
 * When a hold ends, with a clock the test moves. The consumers hold no record (they never poll, and
 * nothing listens on their bootstrap port): what is checked is the watcher's timing and bookkeeping,
 * not the broker's answer.
 */
class CommitWatcherSuite extends AnyFunSuite {

  private final class Fixture(renewal: Option[CommitWatcher.Renewal] = None) {
    val clock   = new ManualClock
    val pool    = new ShareConsumerPool(clock, new PooledShareConsumer(_))
    val watcher = new CommitWatcher(clock, pool)
    val dir     = UnitTestDirs.create("watcher-suite")
    val conf    = new SerializableHadoopConf(new Configuration)
    val markers = new SourceMarkers(dir.resolve("source").toString, conf)
    val commit  = new Path(dir.resolve("commits").resolve("7").toUri)
    val key =
      ConsumerKey(
        s"watcher-suite-${UUID.randomUUID}",
        Map("bootstrap.servers" -> "127.0.0.1:1"),
        LockBudget(120000L),
        "subscribe=t",
        dir.toString
      )
    val consumer = pool.borrow(key)
    watcher.holdUntilCommitted(
      consumer,
      commit,
      conf,
      maxHoldMs = 1000L,
      renewal,
      explicit = None,
      CommitWatcher.DoneMark(markers, 7L, 0)
    )

    /** Whether the consumer is back in the pool: the next borrow gets it instead of a new one. */
    def consumerIsBack: Boolean = {
      val c = pool.borrow(key);
      try c eq consumer
      finally pool.discard(c)
    }
  }

  test("a hold lasts until its batch's commit file appears, then phase 2 runs and is marked done") {
    val f = new Fixture
    f.clock.advanceMs(500)
    f.watcher.checkHolds()
    assert(f.watcher.holding == 1)
    assert(!f.markers.acknowledged(7L, 0))
    Files.createDirectories(f.dir.resolve("commits"))
    Files.write(f.dir.resolve("commits").resolve("7"), Array.emptyByteArray)
    f.watcher.checkHolds()
    assert(f.watcher.holding == 0)
    assert(f.markers.acknowledged(7L, 0))
    assert(f.consumerIsBack)
  }

  test("a hold whose commit does not come ends at its deadline, and is marked done too") {
    val f = new Fixture
    f.clock.advanceMs(1000)
    f.watcher.checkHolds()
    assert(f.watcher.holding == 1) // at the deadline, not past it
    f.clock.advanceMs(1)
    f.watcher.checkHolds()
    assert(f.watcher.holding == 0)
    assert(f.markers.acknowledged(7L, 0))
    assert(f.consumerIsBack)
  }

  test("a query's stopped marker ends its hold within a second, renewed or not, and closes the consumer") {
    for (renewal <- Seq(None, Some(CommitWatcher.Renewal(LockBudget(60000L))))) {
      val f = new Fixture(renewal)
      f.watcher.checkHolds()
      assert(f.watcher.holding == 1)
      f.markers.markStopped()
      f.clock.advanceMs(1001) // a look-up is kept a second: the marker is seen at the next one
      f.watcher.checkHolds()
      assert(f.watcher.holding == 0, s"renewal $renewal")
      assert(f.markers.acknowledged(7L, 0))
      assert(!f.consumerIsBack, "closed, so that it leaves the group, not kept in the pool")
    }
  }

  test("endHoldsOf ends the holds of that query only, at once") {
    val f     = new Fixture
    val other = f.pool.borrow(f.key.copy(query = f.dir.resolve("other").toString))
    f.watcher.holdUntilCommitted(other, f.commit, f.conf, 60000L, None, None, CommitWatcher.DoneMark(f.markers, 7L, 1))
    assert(f.watcher.endHoldsOf(f.key.query) == 1)
    assert(f.watcher.holding == 1)
    assert(!f.consumerIsBack)
    f.watcher.endAll()
    assert(f.watcher.holding == 0)
  }
}
