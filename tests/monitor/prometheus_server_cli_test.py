"""Debian's Prometheus server scrapes a real `gpuleak exporter` (stand-in
NVML) on loopback and evaluates docs/prometheus/gpuleak-alerts.yml: the alert
fires for the process that leaks and stays quiet for the flat one. The
server runs on a free loopback port with its own storage folder, a 1 s
scrape and evaluation interval, and is always ended."""
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request

import pytest
import yaml

from exporter_cli_test import exporter
from process_fixtures import gpuleak_env, start_holder, write_nvml_state

PROMETHEUS = shutil.which("prometheus")
RULES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "prometheus", "gpuleak-alerts.yml")
MiB = 1 << 20
GiB = 1 << 30
BOUND_S = 90


def free_loopback_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rules_with_short_holds(path, hold):
    """The documented rules with every `for:` shortened: the expressions are
    what this test checks (promtool's unit tests check the holds)."""
    with open(RULES) as f:
        rules = yaml.safe_load(f)
    for group in rules["groups"]:
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = hold
    with open(path, "w") as f:
        yaml.safe_dump(rules, f)


@contextlib.contextmanager
def prometheus_server(folder, target):
    rules = os.path.join(folder, "rules.yml")
    rules_with_short_holds(rules, "2s")
    config = os.path.join(folder, "prometheus.yml")
    with open(config, "w") as f:
        yaml.safe_dump(
            {
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "rule_files": [rules],
                "scrape_configs": [{"job_name": "gpuleak", "static_configs": [{"targets": [target]}]}],
            },
            f,
        )
    port = free_loopback_port()
    log = open(os.path.join(folder, "prometheus.log"), "w")
    server = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={config}",
            f"--storage.tsdb.path={folder}/data",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        log.close()


def api(base, path, **params):
    url = f"{base}/api/v1/{path}"
    if params:
        url += "?" + urllib.parse.urlencode(params)
    with urllib.request.urlopen(url, timeout=5) as response:
        body = json.load(response)
    assert body["status"] == "success", body
    return body["data"]


def poll(condition, bound_s=BOUND_S):
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            value = condition()
            if value:
                return value
        time.sleep(0.5)
    return None


@pytest.mark.skipif(PROMETHEUS is None, reason="Debian's prometheus package is not installed")
def test_prometheus_scrapes_the_exporter_and_the_leak_alert_fires_for_the_leaker_only(device, started, tmp_path):
    leaker = start_holder(started, device)
    flat = start_holder(started, device)
    state = write_nvml_state(
        device,
        [
            f"device GPU-6666-stand-in {80 * GiB} {3 * GiB} 0 Stand-in H200",
            f"process 0 {leaker} {GiB} {64 * MiB}",
            f"process 0 {flat} {2 * GiB}",
        ],
    )
    with exporter(
        ["--listen", "127.0.0.1:0", "--interval", "0.2", "--hostname", "node-e"], gpuleak_env(device, state)
    ) as (_, host, port):
        with prometheus_server(str(tmp_path), f"{host}:{port}") as base:
            up = poll(
                lambda: [r for r in api(base, "query", query='up{job="gpuleak"}')["result"] if r["value"][1] == "1"]
            )
            assert up, open(tmp_path / "prometheus.log").read()[-3000:]

            def leak_alert_firing():
                alerts = api(base, "alerts")["alerts"]
                return [
                    a for a in alerts if a["labels"]["alertname"] == "GpuProcessMemoryLeak" and a["state"] == "firing"
                ]

            firing = poll(leak_alert_firing)
            assert firing, api(base, "alerts")
            assert {a["labels"]["pid"] for a in firing} == {str(leaker)}
            labels = firing[0]["labels"]
            assert (labels["UUID"], labels["gpu"], labels["Hostname"]) == ("GPU-6666-stand-in", "0", "node-e")
            # The flat process stays quiet for several more evaluations.
            time.sleep(4)
            alerts = api(base, "alerts")["alerts"]
            assert str(flat) not in {a["labels"].get("pid") for a in alerts}
            # The served series are queryable by their DCGM-style labels.
            result = api(base, "query", query=f'gpuleak_process_gpu_memory_bytes{{pid="{flat}"}}')
            assert float(result["result"][0]["value"][1]) == 2 * GiB
