"""docs/monitor.md and docs/prometheus/ against what the built binary really
emits: every metric the exporter serves and every JSON field top and doctor
print is documented; every metric the sample alert rules use exists; the
sample scrape config scrapes /metrics and loads the rules file."""
import json
import os
import re
import signal
import subprocess
import urllib.request

import yaml
from prometheus_client.parser import text_string_to_metric_families

from process_fixtures import (
    GPULEAK,
    HERE,
    gpuleak_env,
    make_orphan,
    run_gpuleak,
    start_holder,
    start_training_job,
    write_nvml_state,
)

DOCS = os.path.join(HERE, "..", "..", "docs")
GiB = 1 << 30


def read(path):
    with open(os.path.join(DOCS, path)) as f:
        return f.read()


def documented_names(markdown):
    """Every `code` span in the first column of a table row."""
    return set(re.findall(r"^\| `([^`]+)`", markdown, re.MULTILINE))


def served_metrics(device, state):
    process = subprocess.Popen(
        [GPULEAK, "exporter", "--listen", "127.0.0.1:0", "--interval", "0.2"],
        env=gpuleak_env(device, state),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        port = re.search(r":(\d+)/metrics", process.stdout.readline()).group(1)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            body = response.read().decode()
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=10)
    names = set()
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            names.add(sample.name)
    return names


def leaf_keys(value, prefix=""):
    """Dotted paths of every field holding a value (not an object or a list of objects)."""
    keys = set()
    if isinstance(value, dict):
        for key, inner in value.items():
            if isinstance(inner, dict) or (isinstance(inner, list) and inner and isinstance(inner[0], dict)):
                keys |= leaf_keys(inner, prefix + key + ("[]." if isinstance(inner, list) else "."))
            else:
                keys.add(prefix + key)
    elif isinstance(value, list):
        for item in value:
            keys |= leaf_keys(item, prefix)
    return keys


def test_every_served_metric_is_documented_and_alerts_use_real_metrics(device, started):
    holder = start_holder(started, device)
    state = write_nvml_state(device, [f"device GPU-docs {80 * GiB} {GiB} 0 Stand-in", f"process 0 {holder} {GiB}"])
    served = served_metrics(device, state)
    documented = documented_names(read("monitor.md"))
    assert {name for name in served if name.startswith("gpuleak_")} <= documented

    rules = yaml.safe_load(read("prometheus/gpuleak-alerts.yml"))
    used = set()
    for group in rules["groups"]:
        for rule in group["rules"]:
            assert rule["alert"] and rule["expr"] and rule["annotations"]["summary"]
            used |= set(re.findall(r"gpuleak_[a-z_]+", rule["expr"]))
    assert used, "the alert rules use no gpuleak metric"
    assert used <= served, used - served


def test_scrape_config_scrapes_metrics_and_loads_the_rules():
    config = yaml.safe_load(read("prometheus/prometheus.yml"))
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert jobs["gpuleak"]["metrics_path"] == "/metrics"
    targets = jobs["gpuleak"]["static_configs"][0]["targets"]
    # The targets use the port the exporter really defaults to.
    help_text = subprocess.run([GPULEAK, "exporter", "--help"], stdout=subprocess.PIPE, text=True).stdout
    default_port = re.search(r"default 127\.0\.0\.1:(\d+)", help_text).group(1)
    assert all(target.endswith(":" + default_port) for target in targets)
    for rule_file in config["rule_files"]:
        assert os.path.exists(os.path.join(DOCS, "prometheus", rule_file))


def test_every_json_field_of_top_and_doctor_is_documented(device, started):
    holder = start_holder(started, device)
    start_training_job(started, device)
    make_orphan(started, device)
    state = write_nvml_state(
        device, [f"device GPU-docs {80 * GiB} {2 * GiB} {GiB} Stand-in", f"process 0 {holder} {GiB}"]
    )
    env = gpuleak_env(device, state)
    documented = documented_names(read("monitor.md"))
    # Table rows name fields by their last part, or by a dotted path for nested objects.
    documented_leaves = {name.split(".")[-1].replace("[]", "") for name in documented}

    top = run_gpuleak(["top", "--json", "--count", "1", "--pid", str(os.getpid())], env)
    doctor = run_gpuleak(["doctor", "--json", "--kill-orphans", "--yes", "--device-files", device.glob], env)
    for result in (top, doctor):
        assert result.returncode == 0, result.stderr
        for key in leaf_keys(json.loads(result.stdout)):
            leaf = key.split(".")[-1].replace("[]", "")
            assert leaf in documented_leaves or key in documented, key
