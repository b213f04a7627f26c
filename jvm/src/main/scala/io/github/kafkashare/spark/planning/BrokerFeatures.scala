package io.github.kafkashare.spark.planning

/**
 * What the cluster offers beyond Kafka 4.1's share groups, read once when the query starts, and, for
 * each thing it lacks, why: the source uses a feature where the cluster has it and behaves as on 4.1
 * where it does not, and says which once, at start (docs/guide/operating.md, "Features by broker").
 *
 * No public API tells the ShareFetch and ShareAcknowledge versions a broker serves; they follow its
 * software: every 4.2+ broker serves v2 (RENEW), 4.1 only v1. The line reported is the bootstrap
 * broker's software (the highest `metadata.version` it supports), but what needs v2 is used only when
 * the cluster's finalized `metadata.version` is a 4.2 one or later: a cluster cannot finalize a level
 * one of its brokers lacks, so a cluster half-way through an upgrade from 4.1, or a 4.1 broker that
 * merely supports 4.2 levels for testing, is treated as 4.1.
 *
 * @param line       the broker's Kafka line ("4.1" to "4.4", or a later one as "4.4+")
 * @param renew      RENEW acknowledgements (KIP-1222): held records keep their locks for as long as a batch runs,
 *                   and records an idle consumer fetched keep theirs until a batch takes them
 * @param strictAcquisition `share.acquire.mode=record_limit` (KIP-1206): a fetch acquires no more than
 *                   max.poll.records, so no acquired record waits unread in the client's buffer
 * @param brokerLag  the broker's own share-partition lag (KIP-1226) for the backlog metric
 * @param groupLimits the group's own delivery count limit and lock limit (KIP-1240), else the broker's
 * @param brokerDeadLetters the broker's dead-letter queue for share groups (KIP-1191, `share.version=2`)
 */
final case class BrokerFeatures(
    line: String,
    renew: BrokerFeatures.Feature,
    strictAcquisition: BrokerFeatures.Feature,
    brokerLag: BrokerFeatures.Feature,
    groupLimits: BrokerFeatures.Feature,
    brokerDeadLetters: BrokerFeatures.Feature
) {
  import BrokerFeatures.Feature

  private def named: Seq[(String, Feature)] =
    Seq(
      "RENEW"               -> renew,
      "strict acquisition"  -> strictAcquisition,
      "broker lag"          -> brokerLag,
      "group limits"        -> groupLimits,
      "broker dead letters" -> brokerDeadLetters
    )

  /** One line for the start-up log: what is used, and what is not and why. */
  def describe: String = {
    val (on, off) = named.partition(_._2.available)
    s"Kafka $line broker; in use: ${if (on.isEmpty) "-" else on.map(_._1).mkString(", ")}" +
      (if (off.isEmpty) "" else off.map { case (n, f) => s"$n: ${f.why}" }.mkString("; not available: ", "; ", ""))
  }
}

object BrokerFeatures {

  /** Available or not, and what the user can do about it (empty when available). */
  final case class Feature(available: Boolean, why: String)

  private val on = Feature(available = true, "")

  /**
   * The highest `metadata.version` level each Kafka line's software supports, newest first (Kafka's
   * MetadataVersion: 4.1 stops at 27, 4.2 at 29, 4.3 at 30, 4.4 at 33).
   */
  private val lines = Seq(33 -> "4.4", 30 -> "4.3", 29 -> "4.2")

  def lineOf(maxMetadataVersion: Int): String =
    if (maxMetadataVersion > lines.head._1) s"${lines.head._2}+"
    else lines.collectFirst { case (level, line) if maxMetadataVersion >= level => line }.getOrElse("4.1")

  /** The first metadata.version of Kafka 4.2 (IBP_4_2_IV0): a cluster finalized at it or later runs 4.2+ everywhere. */
  val FirstMetadataVersionOf42 = 28

  /**
   * @param maxMetadataVersion the highest metadata.version the bootstrap broker's software supports
   * @param finalizedMetadataVersion the cluster's finalized metadata.version
   * @param shareVersion       the cluster's finalized share.version (0 where share groups are off)
   * @param groupSettings      the group's settings as describeConfigs reports them (every group config the
   *                           broker knows, with its effective value), None where they cannot be read
   */
  def of(
      maxMetadataVersion: Int,
      finalizedMetadataVersion: Int,
      shareVersion: Int,
      groupSettings: Option[Map[String, String]]
  ): BrokerFeatures = {
    val line      = lineOf(maxMetadataVersion)
    val cluster42 = finalizedMetadataVersion >= FirstMetadataVersionOf42
    val since41   = s"the cluster's metadata.version is $finalizedMetadataVersion, a Kafka 4.1 one"
    val group     = groupSettings.getOrElse(Map.empty)
    BrokerFeatures(
      line = line,
      renew =
        if (!cluster42) Feature(available = false, s"Kafka 4.1 brokers cannot renew a lock (KIP-1222, Kafka 4.2; $since41)")
        else if (groupSettings.isEmpty) Feature(available = false, "the group's share.renew.acknowledge.enable cannot be read")
        else if (group.get("share.renew.acknowledge.enable").exists(_.equalsIgnoreCase("false")))
          Feature(available = false, "the group sets share.renew.acknowledge.enable=false")
        else on,
      // A 4.1 broker takes the setting and then answers every ShareFetch with nothing: only on a 4.2 cluster.
      strictAcquisition =
        if (cluster42) on
        else Feature(available = false, "Kafka 4.1 brokers acquire whole record batches (share.acquire.mode, KIP-1206, Kafka 4.2)"),
      brokerLag =
        if (cluster42) on
        else Feature(available = false, "Kafka 4.1 brokers report no lag (KIP-1226, Kafka 4.2); the source computes it"),
      groupLimits =
        if (group.contains("share.partition.max.record.locks")) on
        else Feature(available = false, "the broker's limits apply to every group before Kafka 4.3 (KIP-1240)"),
      brokerDeadLetters =
        if (shareVersion >= 2) on
        else Feature(available = false, s"share.version is $shareVersion; Kafka 4.4 brokers have it with share.version=2 (KIP-1191)")
    )
  }
}
