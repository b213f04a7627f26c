package io.github.kafkashare.spark.planning

import org.scalatest.funsuite.AnyFunSuite

class ElasticParallelismSuite extends AnyFunSuite {

  // 1 to 8 read tasks, the backlog drained within 10 s, down after 3 batches that wanted fewer.
  private def elastic() = new ElasticParallelism(min = 1, max = 8, drainMs = 10000L)

  /** A saturated batch of `tasks` read tasks that took 1,000 records a second each, 2 s each. */
  private def paced(e: ElasticParallelism, tasks: Int): Unit = e.ran(records = tasks * 2000L, taskMs = tasks * 2000L, saturated = true)

  test("before any batch measured a read task's pace: a backlog gets the maximum, none the minimum") {
    assert(elastic().choose(backlog = 0L, arrivingPerSecond = 0.0) == 1)
    val e = elastic()
    assert(e.choose(backlog = 50000L, arrivingPerSecond = 0.0) == 8)
    assert(e.reason.contains("the maximum") && e.reason.contains("no batch has measured"), e.reason)
  }

  test("enough read tasks to take what arrives and drain the backlog within the bound, at the pace measured") {
    val e = elastic()
    paced(e, tasks = 2)
    assert(e.recordsPerTaskSecond.contains(1000.0))
    // 20,000 waiting over 10 s is 2,000 a second, and 2,000 arrive: 4,000 a second at 1,000 a task.
    assert(e.choose(backlog = 20000L, arrivingPerSecond = 2000.0) == 4)
    assert(
      e.reason.startsWith("4: a backlog of 20000 records and 2000 arriving a second, at 1000 records a second per read task"),
      e.reason
    )
  }

  test("up at once, to the maximum at most; the reason says it was bounded") {
    val e = elastic()
    paced(e, tasks = 1)
    assert(e.choose(backlog = 0L, arrivingPerSecond = 500.0) == 1)
    assert(e.choose(backlog = 1000000L, arrivingPerSecond = 0.0) == 8)
    assert(e.reason.startsWith("8 (the maximum)"), e.reason)
  }

  test("down only after three batches in a row wanted fewer, to the most of what they wanted") {
    val e = elastic()
    paced(e, tasks = 8)
    assert(e.choose(backlog = 80000L, arrivingPerSecond = 0.0) == 8)
    assert(e.choose(backlog = 0L, arrivingPerSecond = 3000.0) == 8) // wants 3
    assert(e.reason.contains("kept: 1 of 3"), e.reason)
    assert(e.choose(backlog = 0L, arrivingPerSecond = 1000.0) == 8) // wants 1
    assert(e.choose(backlog = 0L, arrivingPerSecond = 2000.0) == 3) // wants 2: the most of 3, 1, 2
    assert(e.reason.contains("down after 3 batches"), e.reason)
  }

  test("a batch that wants as many or more ends the run of batches that wanted fewer") {
    val e = elastic()
    paced(e, tasks = 4)
    assert(e.choose(backlog = 40000L, arrivingPerSecond = 0.0) == 4)
    e.choose(backlog = 0L, arrivingPerSecond = 1000.0)
    e.choose(backlog = 0L, arrivingPerSecond = 1000.0)
    assert(e.choose(backlog = 40000L, arrivingPerSecond = 0.0) == 4)
    e.choose(backlog = 0L, arrivingPerSecond = 1000.0)
    assert(e.choose(backlog = 0L, arrivingPerSecond = 1000.0) == 4, "two batches that wanted fewer, not three in a row")
  }

  test("a batch that was not saturated does not lower the pace: its tasks had less than they could take") {
    val e = elastic()
    paced(e, tasks = 2)
    e.ran(records = 200L, taskMs = 4000L, saturated = false)
    assert(e.recordsPerTaskSecond.contains(1000.0))
    e.ran(records = 8000L, taskMs = 4000L, saturated = true) // 2,000 a task-second: the newest weighs half
    assert(e.recordsPerTaskSecond.contains(1500.0))
  }

  test("steady arrivals: the count settles at what they need, and does not creep up") {
    val e = elastic()
    paced(e, tasks = 3)
    val counts = (1 to 10).map(_ => e.choose(backlog = 100L, arrivingPerSecond = 2500.0))
    assert(counts.forall(_ == 3), counts)
  }

  test("the minimum holds even with nothing to read") {
    val e = new ElasticParallelism(min = 2, max = 8, drainMs = 10000L)
    paced(e, tasks = 2)
    (1 to 3).foreach(_ => e.choose(backlog = 0L, arrivingPerSecond = 0.0))
    assert(e.current == 2)
    assert(e.reason.startsWith("2 (the minimum)"), e.reason)
  }
}
