"""Security: a broker with a SASL/PLAIN listener and an SSL listener (keys made by keytool in the harness).

The source connects with `kafka.sasl.*` and `kafka.ssl.*` options, spelled as Kafka documents them
(the jar shades kafka-clients, the login module name must still work); a wrong password fails fast
with a clear error; and the secrets appear in no log, progress report, plan or SQL UI page.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

import pyspark
import pytest

from harness import Broker, broker_versions
from spark_runs import SPARK_LOGS, run_spark

NEWEST = broker_versions()[-1]
LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"  # the documented name, not the shaded one


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    broker = Broker(NEWEST, tmp_path_factory.mktemp("secure-kafka")).start(secure=True)
    yield broker
    broker.stop()


def sasl_options(broker: Broker, password: str) -> dict[str, str]:
    user = broker.note("sasl.user")
    return {
        "kafka.bootstrap.servers": broker.note("sasl.bootstrap"),
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "PLAIN",
        "kafka.sasl.jaas.config": f'{LOGIN_MODULE} required username="{user}" password="{password}";',
    }


def ssl_options(broker: Broker) -> dict[str, str]:
    return {
        "kafka.bootstrap.servers": broker.note("ssl.bootstrap"),
        "kafka.security.protocol": "SSL",
        "kafka.ssl.truststore.location": broker.note("ssl.truststore"),
        "kafka.ssl.truststore.type": "PKCS12",
        "kafka.ssl.truststore.password": broker.note("ssl.truststore.password"),
    }


def read(
    broker: Broker, tmp: Path, fresh_name: Callable[[str], str], options: dict[str, str], records: int, **extra: object
) -> dict[str, Any]:
    topic, group = fresh_name("secure"), fresh_name("secure-group")
    broker.create_topic(topic, 2)
    broker.produce(topic, records)
    config = {
        "bootstrap": options.pop("kafka.bootstrap.servers"),
        "topic": topic,
        "group": group,
        "strategy": "checkpoint-dedup",
        "parallelism": 2,
        "checkpoint": str(tmp / "checkpoint"),
        "sink": str(tmp / "sink"),
        "expected": records,
        "timeout_s": 120,
        "options": options,
    }
    config.update(extra)
    return run_spark("share_stream.py", json.dumps(config), timeout=300)


def test_sasl_plain_with_the_documented_login_module_reads_everything_and_shows_no_secret(
    secure_broker: Broker, fresh_name: Callable[[str], str], tmp_path: Path
) -> None:
    password = secure_broker.note("sasl.password")
    result = read(
        secure_broker,
        tmp_path,
        fresh_name,
        sasl_options(secure_broker, password),
        500,
        master="local-cluster[1,1,1024]",
        log_level="INFO",
        ui=True,
        report_surface=True,
    )
    assert result["distinct"] == 500, result.get("error")
    surface = result["surface"]
    assert isinstance(surface, dict) and "kafka-share" in surface["plan"] and surface["sql_ui"].startswith("[")
    # The SQL tab's scan node shows the group's backlog (a driver metric; Spark 4.1 and later post it).
    assert "records available to the share group when the batch was planned" in surface["sql_ui"]
    places = {"progress JSON": surface["progress"], "query plan": surface["plan"], "SQL UI (REST)": surface["sql_ui"]}
    driver_logs = list(SPARK_LOGS.glob("*test_sasl_plain*"))
    executor_logs = list((Path(pyspark.__file__).parent / "work" / str(result["app_id"])).glob("*/std*"))
    assert driver_logs and executor_logs, (driver_logs, executor_logs)
    # The logs are real: the executor's shows its share consumer starting, with the password hidden.
    executor_text = "\n".join(p.read_text(errors="replace") for p in executor_logs)
    assert "sasl.jaas.config = [hidden]" in executor_text, executor_text[-3000:]
    places.update({str(p): p.read_text(errors="replace") for p in driver_logs + executor_logs})
    for secret in (password, secure_broker.note("ssl.truststore.password")):
        leaks = [where for where, text in places.items() if secret in text]
        assert not leaks, f"a secret shows in {leaks}"


def test_ssl_with_a_keytool_trust_store_reads_everything(
    secure_broker: Broker, fresh_name: Callable[[str], str], tmp_path: Path
) -> None:
    result = read(secure_broker, tmp_path, fresh_name, ssl_options(secure_broker), 500)
    assert result["distinct"] == 500 and result["rows"] == 500, result


def test_a_wrong_password_fails_fast_with_a_clear_authentication_error(
    secure_broker: Broker, fresh_name: Callable[[str], str], tmp_path: Path
) -> None:
    wrong = "not-the-password-0451"
    result = read(secure_broker, tmp_path, fresh_name, sasl_options(secure_broker, wrong), 10, no_restart=True, timeout_s=60)
    error = str(result.get("error"))
    assert "refused the credentials" in error and "kafka.sasl.jaas.config" in error, error
    assert wrong not in error
    assert result["distinct"] == 0
