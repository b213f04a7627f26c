"""The wheel on every Python its metadata claims: each claimed version is installed into a fresh venv here.

The claims are python/pyproject.toml's classifiers ("Programming Language :: Python :: 3.X") and its requires-python.
A claimed version this machine does not have fails the test instead of skipping it: test it, or shrink the claim.
No Spark runs here (pyspark is not installed in these venvs: the package must import and build options without it).
"""

from __future__ import annotations

import glob
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from harness import ROOT, pins

PYPROJECT = tomllib.loads((ROOT / "python" / "pyproject.toml").read_text())["project"]
CLAIMED = sorted(
    (m.group(1) for c in PYPROJECT["classifiers"] if (m := re.fullmatch(r"Programming Language :: Python :: (3\.\d+)", c))),
    key=lambda v: tuple(int(p) for p in v.split(".")),
)
WHEEL = ROOT / "dist" / f"spark_kafka_share-{pins()['project.version']}-py3-none-any.whl"

# Run inside each venv: what a pip user does first, without pyspark.
PROBE = r"""
import json, sys
import spark_kafka_share
from spark_kafka_share import KafkaShareOptions

opts = KafkaShareOptions(bootstrap_servers="b:9092", group_id="g", subscribe=["orders"], strategy="checkpoint-dedup",
                         parallelism=4, lock_timeout_ms=30000, include_headers=True, max_records_per_trigger=1000,
                         poll_timeout_ms=500, fail_on_data_loss=False, kafka={"security.protocol": "SSL"})
try:
    KafkaShareOptions(bootstrap_servers="b:9092", group_id="g", subscribe=["orders"], parallelism=0)
    refused = ""
except ValueError as e:
    refused = str(e)
print(json.dumps({
    "python": "%d.%d" % sys.version_info[:2],
    "version": spark_kafka_share.__version__,
    "jar": str(spark_kafka_share.jar_path()),
    "prefix": sys.prefix,
    "options": opts.to_dict(),
    "refused": refused,
    "pyspark_imported": "pyspark" in sys.modules,
}))
"""


def interpreter(version: str) -> str | None:
    """A CPython of ``version`` on this machine: on the PATH, or one of pyenv's (whose shims run only its global)."""
    pyenv = sorted(glob.glob(str(Path.home() / f".pyenv/versions/{version}.*/bin/python{version}")))
    candidates = [shutil.which(f"python{version}"), *pyenv]
    for candidate in candidates:
        if not candidate:
            continue
        ran = subprocess.run(
            [candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], capture_output=True, text=True
        )
        if ran.returncode == 0 and ran.stdout.strip() == version:
            return candidate
    return None


def test_the_claims_are_consistent() -> None:
    assert CLAIMED, "pyproject.toml claims no Python 3.X classifier"
    floor = PYPROJECT["requires-python"]
    assert floor == f">={CLAIMED[0]}", f"requires-python {floor!r} must start at the lowest classifier, {CLAIMED[0]}"
    numbers = [int(v.split(".")[1]) for v in CLAIMED]
    assert numbers == list(range(numbers[0], numbers[-1] + 1)), f"the classifiers skip a version: {CLAIMED}"
    readme = (ROOT / "python" / "README.md").read_text()
    assert f"CPython {CLAIMED[0]} to {CLAIMED[-1]}" in readme, "python/README.md's supported versions must say what is claimed"
    # The package's own syntax floor (ruff.toml) is the claimed floor.
    target = re.search(r'^target-version = "py3(\d+)"', (ROOT / "ruff.toml").read_text(), flags=re.M)
    assert target and f"3.{target.group(1)}" == CLAIMED[0], "ruff.toml's target-version must be the lowest claimed Python"


@pytest.mark.parametrize("version", CLAIMED)
def test_the_wheel_installs_and_works_on_each_claimed_python(version: str, tmp_path: Path) -> None:
    python = interpreter(version)
    assert python, (
        f"python/pyproject.toml claims Python {version}, which this machine does not have (not on the PATH, not in "
        "~/.pyenv/versions): install it, or drop its classifier (and raise requires-python) so the claim is what is tested"
    )
    assert WHEEL.is_file(), f"{WHEEL} is missing: `make wheel` builds it"
    venv = tmp_path / f"venv-{version}"
    subprocess.run([python, "-m", "venv", "--without-pip", str(venv)], check=True, capture_output=True)
    target = venv / "bin" / "python"
    # The test venv's pip installs into the new venv, as that Python (it checks requires-python against it).
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(target), "install", "--no-index", "--no-deps",
         "--disable-pip-version-check", "--quiet", str(WHEEL)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert installed.returncode == 0, f"pip install on Python {version}: {installed.stdout}{installed.stderr}"
    ran = subprocess.run([str(target), "-I", "-c", PROBE], capture_output=True, text=True, cwd=tmp_path)
    assert ran.returncode == 0, f"Python {version}: {ran.stderr}"
    seen = json.loads(ran.stdout)
    assert seen["python"] == version
    assert seen["version"] == pins()["project.version"]
    assert Path(seen["jar"]).is_file() and seen["jar"].startswith(seen["prefix"]), "the jar must come from the venv"
    assert not seen["pyspark_imported"], "importing the package must not need pyspark"
    assert seen["options"] == {
        "kafka.bootstrap.servers": "b:9092",
        "kafka.share.group.id": "g",
        "subscribe": "orders",
        "kafka.share.exactly.once.strategy": "checkpoint-dedup",
        "kafka.share.parallelism": "4",
        "kafka.share.lock.timeout.ms": "30000",
        "includeHeaders": "true",
        "maxRecordsPerTrigger": "1000",
        "kafka.share.poll.timeout.ms": "500",
        "failOnDataLoss": "false",
        "kafka.security.protocol": "SSL",
    }
    assert "parallelism must be 'auto' or a whole number from 1 to 100000" in seen["refused"]
