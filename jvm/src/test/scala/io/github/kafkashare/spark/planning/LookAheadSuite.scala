package io.github.kafkashare.spark.planning

import org.scalatest.funsuite.AnyFunSuite

class LookAheadSuite extends AnyFunSuite {

  /** A cluster of topic `orders` (id `id`), that counts what it is asked. */
  private final class CountingCluster extends ClusterView {
    @volatile var id                                = "id-1"
    @volatile var gone                              = false
    @volatile var extra                             = Seq.empty[String] // topics a pattern matches besides orders
    @volatile var looks, idChecks, groups, resolves = 0
    override def resolveTopics(): Seq[String] = {
      resolves += 1
      if (gone) throw new IllegalStateException("topic orders does not exist") else "orders" +: extra
    }
    override def topicsNow(topics: Seq[String]): TopicsNow = synchronized {
      looks += 1
      TopicsNow(Map(("orders", 0) -> 10L), Map("orders" -> id))
    }
    override def topicIds(topics: Seq[String]): Map[String, String] = synchronized {
      idChecks += 1
      if (gone) throw new IllegalStateException("unknown topic") else Map("orders" -> id)
    }
    override def groupOffsets(): Map[(String, Int), GroupPartitionOffset] = synchronized {
      groups += 1
      Map(("orders", 0) -> GroupPartitionOffset(3L, None))
    }
    override def clusterId(): String               = "cluster-1"
    override def deliveryCountLimit(): Option[Int] = Some(5)
    override def close(): Unit                     = ()
  }

  private def withLookAhead(body: (CountingCluster, LookAhead) => Unit): Unit = withLookAhead(patterned = false)(body)

  private def withLookAhead(patterned: Boolean)(body: (CountingCluster, LookAhead) => Unit): Unit = {
    val cluster   = new CountingCluster
    val lookAhead = new LookAhead(cluster, "g", patterned, delayMs = 0L, recheckAfterMs = 60000L)
    try body(cluster, lookAhead)
    finally lookAhead.close()
  }

  // Waits until the look started ahead has been made (the cluster answered it).
  private def settled(cluster: CountingCluster, looks: Int): Unit = {
    val deadline = System.nanoTime + 10L * 1000 * 1000 * 1000
    while ((cluster.looks < looks || cluster.groups < looks) && System.nanoTime < deadline) Thread.sleep(5)
    assert(cluster.looks >= looks, "the look ahead was not made")
  }

  test("a look taken ahead is used at the boundary: the topics' ids checked, nothing else asked") {
    withLookAhead { (cluster, lookAhead) =>
      lookAhead.start()
      settled(cluster, 1)
      val look = lookAhead.take()
      assert(look == ClusterLook(
        Seq("orders"),
        TopicsNow(Map(("orders", 0) -> 10L), Map("orders" -> "id-1")),
        Map(("orders", 0) -> GroupPartitionOffset(3L, None))
      ))
      assert((cluster.looks, cluster.groups, cluster.idChecks) == ((1, 1, 1)))
    }
  }

  test("a topic deleted and created again after the look ahead: the boundary looks again and sees the new id") {
    withLookAhead { (cluster, lookAhead) =>
      lookAhead.start()
      settled(cluster, 1)
      cluster.id = "id-2"
      val look = lookAhead.take()
      assert(look.now.ids == Map("orders" -> "id-2"))
      assert((cluster.looks, cluster.groups) == ((2, 2)))
    }
  }

  test("a topic deleted after the look ahead: the boundary looks again, and fails as a look then would") {
    withLookAhead { (cluster, lookAhead) =>
      lookAhead.start()
      settled(cluster, 1)
      cluster.gone = true
      val e = intercept[IllegalStateException](lookAhead.take())
      assert(e.getMessage.contains("does not exist"))
    }
  }

  test("a batch shorter than the look's delay: the look is dropped and made at the boundary") {
    val cluster   = new CountingCluster
    val lookAhead = new LookAhead(cluster, "g", patterned = false, delayMs = 10000L)
    try {
      lookAhead.start()
      assert(lookAhead.take().now.ids == Map("orders" -> "id-1"))
      Thread.sleep(100)
      assert((cluster.looks, cluster.idChecks) == ((1, 0)), "the look ahead ran, or was used")
    } finally lookAhead.close()
  }

  test("a pattern that matches a new topic since the look ahead: the boundary looks again and reads it") {
    withLookAhead(patterned = true) { (cluster, lookAhead) =>
      lookAhead.start()
      settled(cluster, 1)
      assert(lookAhead.take().topics == Seq("orders"), "the look ahead was not used")
      assert(cluster.looks == 1)
      lookAhead.start()
      settled(cluster, 2)
      cluster.extra = Seq("orders-eu")
      assert(lookAhead.take().topics == Seq("orders", "orders-eu"))
      assert(cluster.looks == 3)
    }
  }

  test("no look ahead (the first batch), or one that failed: a look at the boundary") {
    withLookAhead { (cluster, lookAhead) =>
      assert(lookAhead.take().now.ids == Map("orders" -> "id-1"))
      assert((cluster.looks, cluster.idChecks) == ((1, 0)))
      cluster.gone = true
      val resolved = cluster.resolves
      lookAhead.start() // fails in the background
      val deadline = System.nanoTime + 10L * 1000 * 1000 * 1000
      while (cluster.resolves == resolved && System.nanoTime < deadline) Thread.sleep(5)
      Thread.sleep(50)
      assert(cluster.resolves > resolved, "the look ahead did not run")
      cluster.gone = false
      assert(lookAhead.take().topics == Seq("orders"))
      assert(cluster.looks == 2)
    }
  }

  test("as the batch's tasks end, their pins are read and the look ahead checked: the boundary asks the cluster nothing") {
    withLookAhead { (cluster, lookAhead) =>
      lookAhead.start()
      settled(cluster, 1)
      val pinsRead = new java.util.concurrent.CountDownLatch(1)
      lookAhead.batchEnded(() => pinsRead.countDown())
      assert(pinsRead.await(10, java.util.concurrent.TimeUnit.SECONDS), "the pins were not read at the batch's end")
      val deadline = System.nanoTime + 10L * 1000 * 1000 * 1000
      while (cluster.idChecks == 0 && System.nanoTime < deadline) Thread.sleep(5)
      assert(cluster.idChecks == 1, "the look ahead was not checked at the batch's end")
      assert(lookAhead.take().now.ids == Map("orders" -> "id-1"))
      assert((cluster.looks, cluster.groups, cluster.idChecks, cluster.resolves) == ((1, 1, 1, 1)))
    }
  }

  test("a read at the batch's end that fails, or a topic created again before it: the boundary looks again") {
    withLookAhead { (cluster, lookAhead) =>
      lookAhead.start()
      settled(cluster, 1)
      cluster.id = "id-2"
      lookAhead.batchEnded(() => throw new IllegalStateException("the log could not be read"))
      assert(lookAhead.take().now.ids == Map("orders" -> "id-2"))
      assert((cluster.looks, cluster.groups) == ((2, 2)))
    }
  }

  test("a check made at the batch's end that is old when the next batch is planned is made again: a topic created again since is seen") {
    val cluster   = new CountingCluster
    val lookAhead = new LookAhead(cluster, "g", patterned = false, delayMs = 0L, recheckAfterMs = 0L)
    try {
      lookAhead.start()
      settled(cluster, 1)
      lookAhead.batchEnded(() => ())
      val deadline = System.nanoTime + 10L * 1000 * 1000 * 1000
      while (cluster.idChecks == 0 && System.nanoTime < deadline) Thread.sleep(5)
      Thread.sleep(20)
      cluster.id = "id-2"
      assert(lookAhead.take().now.ids == Map("orders" -> "id-2"))
      assert((cluster.idChecks, cluster.looks) == ((2, 2)), "not checked again, or not looked at again")
    } finally lookAhead.close()
  }
}
