"""A damaged checkpoint stops the query with an error that names the file and the way out.

Each case runs a query for one batch and stops it between batches, damages one file of the
checkpoint the way a bad copy or a newer connector would, and starts the query again on it: it must
fail (not read on from a wrong place, which would lose or double records) and say why.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable

import pytest

from harness import Broker
from streams import NEWEST, prepare, stream


def last_offset_file(checkpoint: Path) -> Path:
    return max((f for f in (checkpoint / "offsets").iterdir() if f.name.isdigit()), key=lambda f: int(f.name))


def damage_offset(checkpoint: Path, replace: Callable[[str], str]) -> None:
    """Spark's offset log file: 'v1', its metadata, then one line per source (ours is the only one)."""
    file = last_offset_file(checkpoint)
    lines = file.read_text().split("\n")
    lines[2] = replace(lines[2])
    file.write_text("\n".join(lines))
    (file.parent / f".{file.name}.crc").unlink(missing_ok=True)  # as a copy without checksums would be


def damage_acquisitions(checkpoint: Path) -> None:
    batch = int(last_offset_file(checkpoint).name)
    entry = checkpoint / "sources" / "0" / "acquisitions" / str(batch) / "0"
    entry.write_text("kafka-share acquisitions v1\nthis is not a range\n")
    (entry.parent / ".0.crc").unlink(missing_ok=True)


CASES: dict[str, tuple[Callable[[Path], None], str]] = {
    "offset from a newer connector": (
        lambda c: damage_offset(c, lambda s: re.sub(r'"version":\d+', '"version":99', s)),
        "offset of version 99, newer than this connector reads",
    ),
    "offset cut short": (lambda c: damage_offset(c, lambda s: s[: len(s) // 2]), "cannot read the kafka-share offset"),
    "acquisition log entry garbled": (damage_acquisitions, "acquisition log file"),
}


@pytest.mark.parametrize("broker", [NEWEST], indirect=True, ids=[f"kafka-{NEWEST}"])
@pytest.mark.parametrize("case", list(CASES))
def test_damaged_checkpoint_fails_clearly(broker: Broker, fresh_name: Callable[[str], str], tmp_path: Path, case: str) -> None:
    topic, group = prepare(broker, fresh_name, records=600)
    first = stream(broker, tmp_path, topic, group, "checkpoint-dedup", 600, stop_after_batches=1)
    assert int(first["rows"]) > 0, first
    damage, message = CASES[case]
    damage(tmp_path / "checkpoint")
    # New records, so that the restarted query plans a batch (planning is where it reads the checkpoint).
    broker.produce(topic, 300, first_key=600)
    again = stream(broker, tmp_path, topic, group, "checkpoint-dedup", 900, no_restart=True, timeout_s=90)
    assert message in str(again.get("error")), again.get("error")
