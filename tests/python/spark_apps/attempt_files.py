"""What a sink that keeps one task attempt per batch and task holds, read from the files of a foreach writer
that writes each attempt to a file of its own (spark_apps/real_time_stream.py's AppendEveryRow).

An attempt writes <epoch>-<partition>-<start ns>-<id>.jsonl and, when it ends without an error, renames it to
...ok.jsonl. A sink that commits per batch and task (a file per epoch and partition, replaced by a later
attempt) keeps, for each epoch and partition, the last attempt that ended well: a failed or killed attempt's
rows, and those of a run of a batch that Spark ran again, are not kept.
"""

import json
import time
from pathlib import Path
from typing import Any


def kept_rows(sink: Path) -> list[dict[str, Any]]:
    last: dict[tuple[str, str], tuple[int, Path]] = {}
    for f in sink.glob("*.ok.jsonl") if sink.is_dir() else []:
        epoch, partition, started, _ = f.name.split("-", 3)
        if (epoch, partition) not in last or int(started) > last[(epoch, partition)][0]:
            last[(epoch, partition)] = (int(started), f)
    return [json.loads(line) for _, f in sorted(last.values()) for line in f.read_text().splitlines() if line]


def all_rows(sink: Path) -> list[dict[str, Any]]:
    """Every row any attempt wrote, kept or not. An executor of a killed driver may still rename an attempt's
    file while it is read (its JVM ends a few seconds later): then the files are listed again."""
    for _ in range(20):
        try:
            return [json.loads(line) for f in sorted(sink.glob("*.jsonl")) for line in f.read_text().splitlines() if line]
        except FileNotFoundError:
            time.sleep(0.5)
    raise AssertionError(f"the files of {sink} kept changing for 10 s")
