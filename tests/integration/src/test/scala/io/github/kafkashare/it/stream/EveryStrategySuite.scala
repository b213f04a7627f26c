package io.github.kafkashare.it.stream

/** Every strategy reads every record, on the oldest and the newest broker line the build fetched. */
class EveryStrategySuite extends ShareStreamTest {

  for (version <- SharedBrokers.floorAndNewest; strategy <- Seq("none", "idempotent", "checkpoint-dedup", "two-phase-commit"))
    test(s"$strategy reads everything [Kafka $version]") {
      // `none` joins with the broker's default heartbeat (5 s), as users' groups do; the others with 1 s.
      val topic = prepare(SharedBrokers.of(version), heartbeatMs = if (strategy == "none") 5000 else 1000)
      testStream(topic.query(strategy))(
        AddRecords(topic, 2000),
        StartStream(),
        CheckLanded(2000),
        AddRecords(topic, 500, firstKey = 2000), // records that arrive while the query runs
        CheckLanded(2500),
        StopStream,
        AddRecords(topic, 500, firstKey = 2500), // and while it is stopped: read on restart
        StartStream(),
        CheckLanded(3000)
      )
    }
}
