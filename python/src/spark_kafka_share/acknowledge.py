"""Explicit acknowledgement: per-record decisions from inside ``foreachBatch``.

With ``kafka.share.acknowledgment.mode=explicit`` the source keeps every record of a batch acquired
until the batch commits, then applies what ``foreachBatch`` decided for it: ``accept`` (done),
``release`` (deliver it again, with a higher ``deliveryCount``) or ``reject`` (never again).
Records without a decision get ``kafka.share.acknowledgment.default`` (accept unless set). The guide, with poison
records and dead-letter topics: https://github.com/kafkashare/spark-kafka-share/blob/main/docs/guide/explicit-mode.md

Plain DataFrame calls only (no py4j), so it works under classic Spark and Spark Connect::

    from pyspark.sql import functions as F
    import spark_kafka_share

    def process(batch, batch_id):
        results = handle(batch)  # your processing; a column "ok" says which records succeeded
        spark_kafka_share.acknowledge(
            results.select("topic", "partition", "offset",
                           F.when(F.col("ok"), "accept").otherwise("release").alias("decision")),
            batch_id, group_id="orders-processing")
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

Decision = Literal["accept", "release", "reject"]
DECISIONS: tuple[Decision, ...] = ("accept", "release", "reject")


def acknowledge(decisions: DataFrame, batch_id: int, group_id: str) -> None:
    """Hands the source the decisions for records of batch ``batch_id`` of the query reading ``group_id``.

    ``decisions`` has the columns ``topic``, ``partition``, ``offset`` (as in the batch DataFrame) and
    ``decision`` (a string: accept, release or reject); other columns are ignored. A later call for
    the same batch replaces an earlier one. Errors (a record not in the batch, an unknown decision,
    no explicit-mode query for the group) are raised here, before anything is applied.
    """
    if not hasattr(decisions, "write") or not hasattr(decisions, "columns"):
        raise TypeError(f"acknowledge() takes a pyspark DataFrame of decisions, got {type(decisions).__name__}")
    if isinstance(batch_id, bool) or not isinstance(batch_id, int) or batch_id < 0:
        raise TypeError(f"batch_id must be the int foreachBatch received, got {batch_id!r}")
    if not isinstance(group_id, str) or not group_id:
        raise TypeError(f"group_id must be the query's kafka.share.group.id (a non-empty str), got {group_id!r}")
    writer: Any = decisions.write
    (
        writer.format("kafka-share-decisions")
        .mode("append")
        .option("kafka.share.group.id", group_id)
        .option("batchId", str(batch_id))
        .save()
    )
