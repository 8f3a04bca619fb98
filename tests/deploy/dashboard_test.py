"""Every query of deploy/grafana/gpuleak-dashboard.json names metrics the
exporter really serves and labels those metrics really carry: the exporter
runs with the stand-in NVML and a GPU-holding process, /metrics is fetched
over HTTP and parsed, and each expression's metric names, matcher labels and
by/on/without labels are checked against it."""
import json
import os
import re

from prometheus_client.parser import text_string_to_metric_families

import exporter_cli_test
from process_fixtures import gpuleak_env, start_holder, write_nvml_state

DASHBOARD = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "deploy", "grafana", "gpuleak-dashboard.json"
)
GiB = 1 << 30
KEYWORDS = {
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "and",
    "or",
    "unless",
    "bool",
    "offset",
    "Inf",
    "NaN",
    "inf",
    "nan",
}
GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
SELECTOR = re.compile(r"([A-Za-z_:][\w:]*)?\s*\{([^}]*)\}")
MATCHER = re.compile(r"([A-Za-z_]\w*)\s*(=~|!~|!=|=)\s*\"(?:[^\"\\]|\\.)*\"")


def expressions(dashboard):
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            yield panel["title"], target["expr"]
    for variable in dashboard["templating"]["list"]:
        query = variable.get("query")
        if isinstance(query, dict):
            yield "variable " + variable["name"], query["query"]


def names_in(expr):
    """(metric names, {metric or None: matcher labels}, grouping labels)."""
    grouping = set()
    for _, labels in GROUPING.findall(expr):
        grouping |= {label.strip() for label in labels.split(",") if label.strip()}
    matchers = {}
    for metric, body in SELECTOR.findall(expr):
        matchers.setdefault(metric or None, set()).update(m[0] for m in MATCHER.findall(body))
    label_values = re.match(r"label_values\(\s*([\w:]+)\s*,\s*(\w+)\s*\)", expr)
    if label_values:
        return {label_values.group(1)}, {label_values.group(1): {label_values.group(2)}}, set()
    rest = GROUPING.sub(" ", SELECTOR.sub(lambda m: " " + (m.group(1) or "") + " ", expr))
    rest = re.sub(r"\[[^\]]*\]", " ", rest)
    rest = re.sub(r"\"(?:[^\"\\]|\\.)*\"", " ", rest)
    metrics = set()
    for match in re.finditer(r"[A-Za-z_:][\w:]*", rest):
        word = match.group(0)
        after = rest[match.end() :].lstrip()
        if word in KEYWORDS or after.startswith("(") or word.startswith("$"):
            continue
        if rest[max(0, match.start() - 1)] == "$":
            continue  # a Grafana variable
        metrics.add(word)
    return metrics, matchers, grouping


def test_every_dashboard_query_uses_served_metrics_and_labels(device, started):
    holder = start_holder(started, device)
    state = write_nvml_state(
        device,
        [
            f"device GPU-7777-stand-in {80 * GiB} {2 * GiB} 0 Stand-in H200",
            f"process 0 {holder} {GiB}",
        ],
    )
    with exporter_cli_test.exporter(["--listen", "127.0.0.1:0"], gpuleak_env(device, state)) as (_, host, port):
        body = exporter_cli_test.urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10).read()
    labels_of = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            labels_of.setdefault(sample.name, set()).update(sample.labels)
    with open(DASHBOARD) as f:
        dashboard = json.load(f)
    checked = 0
    for where, expr in expressions(dashboard):
        metrics, matchers, grouping = names_in(expr)
        assert metrics, (where, expr)
        for metric in metrics:
            assert metric in labels_of, f"{where}: {metric} is not served"
        for metric, labels in matchers.items():
            allowed = labels_of[metric] if metric else set().union(*(labels_of[m] for m in metrics))
            assert labels <= allowed, f"{where}: {metric} has no label {labels - allowed}"
        carried = set().union(*(labels_of[m] for m in metrics))
        assert grouping <= carried, f"{where}: grouping by {grouping - carried}, not on {metrics}"
        checked += 1
    assert checked >= 10


def test_the_checker_catches_a_wrong_metric_and_a_wrong_label():
    metrics, matchers, grouping = names_in('sum by (gpu_index) (gpuleak_gpu_used{Hostname=~"$node", x="1"})')
    assert metrics == {"gpuleak_gpu_used"}
    assert matchers == {"gpuleak_gpu_used": {"Hostname", "x"}}
    assert grouping == {"gpu_index"}
    metrics, _, _ = names_in('gpuleak_process_gpu_memory_leak{pod!=""} == 1 and on (pid) rate(x_total[5m]) > 0')
    assert metrics == {"gpuleak_process_gpu_memory_leak", "x_total"}
