package io.github.kafkashare.it.stream

import java.nio.file.Files

import java.util.concurrent.atomic.AtomicBoolean

import scala.concurrent.duration._
import scala.jdk.CollectionConverters._
import scala.util.Using

import org.apache.spark.sql.streaming.Trigger

/**
 * Query shapes users run beyond one query on a fresh topic, where no process has to die: a pattern that
 * matches nothing yet, two queries of one application in one share group, a topic deleted and created
 * again, a checkpoint started with another group, AvailableNow on a busy topic. (Shapes with driver
 * crashes are in tests/python/test_query_shapes.py.)
 */
class QueryShapesSuite extends ShareStreamTest {

  test("a pattern that matches no topic yet waits for one") {
    val group   = prepare()
    val prefix  = fresh("later")
    var created = 0L
    testStream(group.patternQuery(s"$prefix-.*", "checkpoint-dedup"))(
      StartStream(),
      Assert("it waits without failing or running batches") { q =>
        Thread.sleep(20000) // longer than a lock (15 s), after which a probe would run if one could
        assert(q.query.isActive, q.describe)
        created = System.currentTimeMillis
      },
      Assert("then reads the topic that appears") { _ =>
        group.kafka.createTopic(s"$prefix-a", 1)
        group.kafka.produce(s"$prefix-a", 300)
      },
      CheckLanded(300),
      Assert("no batch started before the topic existed") { q =>
        // Spark writes a batch's offset log file when it starts the batch.
        val started = Using.resource(Files.list(q.checkpoint.resolve("offsets"))) { files =>
          files.iterator.asScala.filter(_.getFileName.toString.forall(_.isDigit)).map(f => Files.getLastModifiedTime(f).toMillis).toSeq
        }
        assert(started.nonEmpty && started.min >= created, s"created at $created, batches started at ${started.sorted}")
      }
    )
  }

  for (strategy <- Seq("checkpoint-dedup", "two-phase-commit"))
    test(s"two queries of one application in one group keep their own records ($strategy)") {
      val shared = prepare(lockMs = 30000)
      val second = shared.copy(topic = fresh("two-b"))
      second.kafka.createTopic(second.topic, 2)
      // Small batches out of big polls: each consumer carries records into the pool between batches.
      val options = Seq("maxRecordsPerTrigger" -> "200", "kafka.max.poll.records" -> "500")
      val (a, b)  = (shared.query(strategy, options: _*), second.query(strategy, options: _*))
      shared.kafka.produce(shared.topic, 1000)
      second.kafka.produce(second.topic, 1000)
      b.start(Trigger.ProcessingTime(200)) // runs beside the test's own query
      try
        testStream(a)(
          StartStream(),
          CheckLanded(1000),
          Assert("the other query landed its own topic's records, and only those") { _ =>
            eventually(150.seconds, "the second query's 1000 records")(b.sink.distinctKeys >= 1000 || b.query.exception.isDefined)
            assert(b.query.exception.isEmpty, b.describe)
            assert(a.sink.rows.map(_.topic).toSet == Set(shared.topic), a.describe)
            assert(b.sink.rows.map(_.topic).toSet == Set(second.topic), b.describe)
            assert(b.sink.rows.size == 1000 && b.sink.distinctKeys == 1000, b.describe)
          }
        )
      finally b.stop()
    }

  test("a topic deleted and created again is read anew") {
    // The pinned set names the old topic's offsets; the new topic's records at those offsets are new.
    val topic = prepare()
    testStream(topic.query("checkpoint-dedup"))(
      AddRecords(topic, 500),
      StartStream(),
      CheckLanded(500),
      StopStream,
      Assert("the topic is deleted and created again") { _ =>
        topic.kafka.deleteTopic(topic.topic)
        topic.kafka.createTopic(topic.topic, 2)
      },
      AddRecords(topic, 300, firstKey = 1000),
      StartStream(),
      CheckLanded(500, alsoKeys = 1000 until 1300)
    )
  }

  test("a checkpoint of another group is refused") {
    val topic = prepare()
    val first = topic.query("checkpoint-dedup")
    testStream(first)(AddRecords(topic, 200), StartStream(), CheckLanded(200), StopStream)
    val other = fresh("other-group")
    testStream(new ShareQuery(spark, first.options + ("kafka.share.group.id" -> other), first.checkpoint))(
      StartStream(),
      ExpectFailure(s"the checkpoint belongs to share group '${topic.group}'"),
      Assert("the error names the new group") { q =>
        assert(q.query.exception.exists(e => s"${e.getMessage} ${e.getCause}".contains(s"now '$other'")), q.describe)
      }
    )
  }

  test("Trigger.AvailableNow ends while producers keep writing") {
    val topic = prepare()
    topic.kafka.produce(topic.topic, 2000)
    // A busy upstream: keys from 100000 on, 200 a second, until the test ends.
    val stop      = new AtomicBoolean(false)
    val producing = new Thread(() => topic.kafka.produceAtRate(topic.topic, 200, 600, 100000, stop = () => stop.get))
    producing.start()
    try
      testStream(topic.query("checkpoint-dedup", "maxRecordsPerTrigger" -> "1000"))(
        StartStream(Trigger.AvailableNow()),
        AwaitTermination(75.seconds),
        Assert("it ended while the producer still wrote, with every record available at its start") { q =>
          assert(producing.isAlive, "the producer had stopped: the test proves nothing")
          val keys    = q.sink.rows.map(_.key).toSet
          val missing = (0 until 2000).map(_.toString).filterNot(keys)
          assert(missing.isEmpty, s"${missing.size} records available at the start were not read")
        }
      )
    finally { stop.set(true); producing.join(30000) }
  }
}
