package io.github.kafkashare.testkit

import java.io.IOException
import java.time.Duration
import java.util.{Collections, Properties}
import java.util.concurrent.{Future, TimeUnit}

import scala.collection.mutable
import scala.jdk.CollectionConverters._
import scala.util.Try

import org.apache.kafka.clients.admin.{Admin, AlterConfigOp, ConfigEntry, ListShareGroupOffsetsSpec, NewTopic, OffsetSpec, RecordsToDelete}
import org.apache.kafka.clients.consumer.{ConsumerConfig, KafkaConsumer, KafkaShareConsumer}
import org.apache.kafka.clients.producer.{KafkaProducer, ProducerConfig, ProducerRecord, RecordMetadata}
import org.apache.kafka.common.TopicPartition
import org.apache.kafka.common.errors.OutOfOrderSequenceException
import org.apache.kafka.common.config.ConfigResource
import org.apache.kafka.common.serialization.{ByteArrayDeserializer, ByteArraySerializer}

/** One record as a share consumer received it. */
final case class ReceivedRecord(topic: String, partition: Int, offset: Long, key: String, deliveryCount: Int)

/** What the broker knows of a share group: members and, per partition, the share-partition start offset. */
final case class ShareGroupState(groupId: String, state: String, members: Int, startOffsets: Map[TopicPartition, Long]) {
  def toJson: String = {
    val offsets = startOffsets.toSeq.sortBy(tp => (tp._1.topic, tp._1.partition)).map { case (tp, o) =>
      s"""{"topic":"${tp.topic}","partition":${tp.partition},"startOffset":$o}"""
    }
    s"""{"groupId":"$groupId","state":"$state","members":$members,"startOffsets":[${offsets.mkString(",")}]}"""
  }
}

/** Test data and inspection through the real Kafka clients: topics, group configs, records, group state. */
final class KafkaTestOps(bootstrapServers: String) {

  def createTopic(topic: String, partitions: Int): Unit = {
    val admin = KafkaBroker.admin(bootstrapServers)
    // The broker's default replication factor: 1 on a single node, 3 on the test cluster.
    val newTopic = new NewTopic(topic, java.util.Optional.of[Integer](partitions), java.util.Optional.empty[java.lang.Short]())
    try {
      admin.createTopics(Collections.singleton(newTopic)).all().get(30, TimeUnit.SECONDS)
      awaitServed(admin, topic, partitions)
    } finally admin.close()
  }

  /**
   * Returns once every partition's leader serves it. Metadata names a new partition's leader a moment
   * before that broker has created its log; a producer that sends then can have its first batch refused
   * and its second accepted, and it retries the first forever as out of order (CI: 105 of 250 records
   * written, five minutes of retries). ListOffsets is answered from the log itself, so its success means
   * the log exists.
   */
  private def awaitServed(admin: Admin, topic: String, partitions: Int): Unit = {
    val latest   = (0 until partitions).map(p => new TopicPartition(topic, p) -> OffsetSpec.latest()).toMap.asJava
    def listed   = Try(admin.listOffsets(latest).all().get(30, TimeUnit.SECONDS))
    val deadline = System.nanoTime + TimeUnit.SECONDS.toNanos(30)
    var served   = listed
    while (served.isFailure && System.nanoTime < deadline) { Thread.sleep(100); served = listed }
    served.get
  }

  /** Deletes a topic and waits until the cluster no longer lists it (so that it can be created again). */
  def deleteTopic(topic: String): Unit = {
    val admin = KafkaBroker.admin(bootstrapServers)
    try {
      admin.deleteTopics(Collections.singleton(topic)).all().get(30, TimeUnit.SECONDS)
      val deadline = System.nanoTime + TimeUnit.SECONDS.toNanos(60)
      while (admin.listTopics().names().get(30, TimeUnit.SECONDS).contains(topic) && System.nanoTime < deadline) Thread.sleep(200)
    } finally admin.close()
  }

  /** Deletes every record of every partition of `topic` written so far, as retention would (DeleteRecords). */
  def deleteAllRecords(topic: String): Unit = {
    val admin = KafkaBroker.admin(bootstrapServers)
    try {
      val partitions = admin.describeTopics(Collections.singleton(topic)).allTopicNames().get(30, TimeUnit.SECONDS)
        .get(topic).partitions().asScala.map(p => new TopicPartition(topic, p.partition()))
      val ends = admin.listOffsets(partitions.map(_ -> OffsetSpec.latest()).toMap.asJava).all().get(30, TimeUnit.SECONDS)
      val cut  = ends.asScala.map { case (tp, end) => tp -> RecordsToDelete.beforeOffset(end.offset()) }
      admin.deleteRecords(cut.asJava).all().get(30, TimeUnit.SECONDS)
    } finally admin.close()
  }

  /** Sets topic configs (for example errors.deadletterqueue.group.enable on a broker dead-letter topic). */
  def setTopicConfig(topic: String, configs: Map[String, String]): Unit =
    alterConfigs(new ConfigResource(ConfigResource.Type.TOPIC, topic), configs)

  /** Sets group configs (`share.auto.offset.reset`, `share.record.lock.duration.ms`, ...). Works before the group exists. */
  def setGroupConfig(groupId: String, configs: Map[String, String]): Unit =
    alterConfigs(new ConfigResource(ConfigResource.Type.GROUP, groupId), configs)

  private def alterConfigs(resource: ConfigResource, configs: Map[String, String]): Unit = {
    val admin = KafkaBroker.admin(bootstrapServers)
    val ops   = configs.map { case (k, v) => new AlterConfigOp(new ConfigEntry(k, v), AlterConfigOp.OpType.SET) }
    try {
      admin.incrementalAlterConfigs(Map(resource -> ops.asJavaCollection).asJava).all().get(30, TimeUnit.SECONDS)
      // The broker applies a config from the metadata log a moment after the controller took it: a look right
      // after (the source's, at its start) could still see the old value. Wait until it shows, 10 s at most.
      val until = System.nanoTime + TimeUnit.SECONDS.toNanos(10)
      def shown: Boolean = {
        val now = admin.describeConfigs(Collections.singleton(resource)).all().get(30, TimeUnit.SECONDS).get(resource)
        configs.forall { case (k, v) => Option(now.get(k)).exists(_.value == v) }
      }
      while (!shown && System.nanoTime < until) Thread.sleep(100)
    } finally admin.close()
  }

  /** A new share group starts at the log end (`latest`); tests want everything produced before it joins. */
  def readFromEarliest(groupId: String): Unit = setGroupConfig(groupId, Map("share.auto.offset.reset" -> "earliest"))

  /**
   * Produces `count` records with keys "0".."count-1" (so a reader can tell lost from doubled),
   * values of `valueBytes` bytes, spread over the partitions by key; waits for all acks.
   * `bulk`: 256 KB lz4 batches, for benchmarks that load a million records. Otherwise the
   * producer's defaults (16 KB, uncompressed), as a typical application writes: it matters, because a
   * share consumer's poll returns whole record batches, so the batch size decides how many records
   * one poll, and so one micro-batch task, takes.
   */
  def produce(topic: String, count: Int, valueBytes: Int = 100, firstKey: Int = 0, bulk: Boolean = false): Unit =
    withProducer { (producer, value) =>
      // Confirmed in chunks: a million records' futures would not fit in a harness server's heap.
      (firstKey until firstKey + count).grouped(50000).foreach { chunk =>
        chunk.foreach(i => producer.send(new ProducerRecord(topic, i.toString.getBytes("UTF-8"), value)))
        producer.confirm()
      }
    }(valueBytes, bulk)

  /**
   * Produces keys firstKey.. at `perSecond` records a second for `seconds` (in 100 ms steps), each
   * step confirmed before the next, as a steady upstream would, or until `stop` says so; returns how
   * many it produced.
   */
  def produceAtRate(
      topic: String,
      perSecond: Int,
      seconds: Int,
      firstKey: Int = 0,
      valueBytes: Int = 100,
      stop: () => Boolean = () => false
  ): Int =
    withProducer { (producer, value) =>
      val perStep = math.max(1, perSecond / 10)
      val start   = System.nanoTime
      var steps   = 0
      while (steps < seconds * 10 && !stop()) {
        val from = firstKey + steps * perStep
        (from until from + perStep).foreach(i => producer.send(new ProducerRecord(topic, i.toString.getBytes("UTF-8"), value)))
        producer.confirm()
        steps += 1
        val wait = (start + steps * 100000000L - System.nanoTime) / 1000000L
        if (wait > 0) Thread.sleep(wait)
      }
      steps * perStep
    }(valueBytes, bulk = false)

  private def withProducer[T](use: (CheckedProducer, Array[Byte]) => T)(valueBytes: Int, bulk: Boolean): T = {
    val props = new Properties
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers)
    props.put(ProducerConfig.ACKS_CONFIG, "all")
    if (bulk) {
      props.put(ProducerConfig.BATCH_SIZE_CONFIG, "262144")
      props.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, "lz4")
    }
    // Through a broker restart (F6) the producer retries until the broker is back.
    props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "300000")
    val producer =
      new CheckedProducer(() => new KafkaProducer[Array[Byte], Array[Byte]](props, new ByteArraySerializer, new ByteArraySerializer))
    try use(producer, Array.fill[Byte](valueBytes)('v'.toByte))
    finally producer.close()
  }

  /**
   * A producer whose every send is confirmed: a test that produced N records must have N records
   * (KafkaProducer.flush waits, but does not fail for a refused send: once CI produced 155 of 300
   * records without a word). A batch the broker refused as out of sequence (seen on a loaded machine)
   * was not written, so its records are sent again by a fresh producer (new sequence numbers); any
   * other failure fails the call.
   */
  private final class CheckedProducer(create: () => KafkaProducer[Array[Byte], Array[Byte]]) {
    private type Rec = ProducerRecord[Array[Byte], Array[Byte]]
    private var producer = create()
    private val sent     = mutable.ArrayBuffer.empty[(Rec, Future[RecordMetadata])]

    def send(record: Rec): Unit = sent += record -> producer.send(record)

    /** Waits until everything sent so far is written; throws if some of it cannot be. */
    def confirm(): Unit = {
      var attempts = 0
      var failed   = awaitAll()
      while (failed.nonEmpty) {
        val unwritten = failed.forall { case (_, e) => Option(e.getCause).getOrElse(e).isInstanceOf[OutOfOrderSequenceException] }
        if (!unwritten || attempts >= 3) throw new IOException(s"${failed.size} record(s) were not written", failed.head._2)
        attempts += 1
        producer.close()
        producer = create()
        failed.foreach { case (r, _) => send(r) }
        failed = awaitAll()
      }
    }

    private def awaitAll(): Seq[(Rec, Throwable)] = {
      producer.flush()
      val failures = sent.toSeq.flatMap { case (r, f) => Try(f.get()).failed.toOption.map(r -> _) }
      sent.clear()
      failures
    }

    def close(): Unit = producer.close()
  }

  /**
   * Reads with one share consumer (implicit acknowledgement: each poll ACCEPTs the previous one)
   * until `expected` records arrived or `timeoutMs` passed, then commits and leaves the group.
   */
  def shareConsume(groupId: String, topics: Seq[String], expected: Int, timeoutMs: Long = 60000): Seq[ReceivedRecord] =
    withShareConsumer(groupId, topics) { consumer =>
      val received = mutable.ArrayBuffer.empty[ReceivedRecord]
      val deadline = System.currentTimeMillis + timeoutMs
      while (received.size < expected && System.currentTimeMillis < deadline) received ++= poll(consumer)
      consumer.commitSync()
      received.toSeq
    }

  /**
   * Acquires one poll's worth of records and leaves the group without acknowledging them; closing
   * an implicit-mode consumer RELEASEs them, so the group delivers them again.
   */
  def acquireAndLeave(groupId: String, topics: Seq[String], timeoutMs: Long = 60000): Seq[ReceivedRecord] =
    acquireHoldAndLeave(groupId, topics, timeoutMs)(_ => ())

  /** As [[acquireAndLeave]], running `whileHolding` on the records before leaving (a member that departs holding them). */
  def acquireHoldAndLeave(groupId: String, topics: Seq[String], timeoutMs: Long = 60000)(
      whileHolding: Seq[ReceivedRecord] => Unit
  ): Seq[ReceivedRecord] =
    withShareConsumer(groupId, topics) { consumer =>
      val deadline = System.currentTimeMillis + timeoutMs
      var acquired = Seq.empty[ReceivedRecord]
      while (acquired.isEmpty && System.currentTimeMillis < deadline) acquired = poll(consumer)
      whileHolding(acquired)
      acquired
    }

  private def withShareConsumer[T](groupId: String, topics: Seq[String])(use: KafkaShareConsumer[Array[Byte], Array[Byte]] => T): T = {
    val props = new Properties
    props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers)
    props.put(ConsumerConfig.GROUP_ID_CONFIG, groupId)
    val consumer = new KafkaShareConsumer[Array[Byte], Array[Byte]](props, new ByteArrayDeserializer, new ByteArrayDeserializer)
    try { consumer.subscribe(topics.asJava); use(consumer) }
    finally consumer.close()
  }

  private def poll(consumer: KafkaShareConsumer[Array[Byte], Array[Byte]]): Seq[ReceivedRecord] =
    consumer.poll(Duration.ofMillis(500)).asScala.toSeq.map { r =>
      val deliveryCount = if (r.deliveryCount.isPresent) r.deliveryCount.get.toInt else -1
      ReceivedRecord(r.topic, r.partition, r.offset, new String(r.key, "UTF-8"), deliveryCount)
    }

  /** Every record of `topic` (a plain consumer, from the beginning to the end offsets), as JSON lines: key and headers. */
  def readTopic(topic: String): Seq[String] = {
    val props = new Properties
    props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers)
    val consumer = new KafkaConsumer[Array[Byte], Array[Byte]](props, new ByteArrayDeserializer, new ByteArrayDeserializer)
    try {
      val partitions = consumer.partitionsFor(topic, Duration.ofSeconds(30)).asScala.map(p => new TopicPartition(topic, p.partition)).asJava
      consumer.assign(partitions)
      consumer.seekToBeginning(partitions)
      val ends     = consumer.endOffsets(partitions).asScala
      val lines    = mutable.ArrayBuffer.empty[String]
      val deadline = System.nanoTime + TimeUnit.SECONDS.toNanos(30)
      while (ends.exists { case (tp, end) => consumer.position(tp) < end } && System.nanoTime < deadline)
        consumer.poll(Duration.ofMillis(500)).asScala.foreach { r =>
          def quote(s: String) = "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\""
          val headers          = r.headers.asScala.map(h => s"${quote(h.key)}:${quote(new String(h.value, "UTF-8"))}").mkString(",")
          val key              = Option(r.key).map(new String(_, "UTF-8")).getOrElse("") // a broker's dead letter may carry none
          lines += s"""{"key":${quote(key)},"headers":{$headers}}"""
        }
      lines.toSeq
    } finally consumer.close()
  }

  /**
   * Members and per-partition start offsets, as Admin reports them. The start offset the broker
   * persists trails the acknowledgements (it moved to 100 only after 200 records were ACCEPTed, in
   * Kafka 4.1 and 4.4 alike): it is a lower bound of what was acknowledged, not the exact point.
   */
  def shareGroupState(groupId: String): ShareGroupState = {
    val admin = KafkaBroker.admin(bootstrapServers)
    try {
      val description = admin.describeShareGroups(Collections.singleton(groupId)).describedGroups().get(groupId).get(30, TimeUnit.SECONDS)
      val offsets = admin
        .listShareGroupOffsets(Map(groupId -> new ListShareGroupOffsetsSpec()).asJava)
        .partitionsToOffsetInfo(groupId)
        .get(30, TimeUnit.SECONDS)
        .asScala
        .collect { case (tp, o) if o != null => tp -> o.startOffset }
        .toMap
      ShareGroupState(groupId, description.groupState.toString, description.members.size, offsets)
    } finally admin.close()
  }
}
