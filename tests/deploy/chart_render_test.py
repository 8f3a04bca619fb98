"""The Helm chart rendered and checked as Helm would install it. Helm is not
in Debian, so chart_render/main.go renders it (Go's text/template with
Debian's sprig, Helm's objects and toYaml; built here with Debian's Go,
offline). The rendered stream must pass yamllint, decode with kubectl
(`label --local`: `apply --dry-run=client` needs an API server for
discovery and OpenAPI, so it cannot run without a cluster), have only
fields of its objects' Kubernetes types (kubernetes_schema.py), hold the
objects the values ask for, and give the same exporter pod as the plain
manifest."""
import os
import shutil
import subprocess

import pytest
import yaml

from manifests_test import CHART, DEFAULT_PORT, DEPLOY, YAMLLINT_CONFIG, check_exporter_pod, daemonset_in, load_all

HERE = os.path.dirname(os.path.abspath(__file__))
GOCODE = "/usr/share/gocode/src"
SPRIG = os.path.join(GOCODE, "github.com", "Masterminds", "sprig")


@pytest.fixture(scope="module")
def renderer(tmp_path_factory):
    if shutil.which("go") is None or not os.path.isdir(SPRIG):
        pytest.skip("needs Debian's golang-go and golang-github-masterminds-sprig-dev")
    folder = tmp_path_factory.mktemp("chart-render")
    # Debian installs Go sources in GOPATH form; sprig imports semver as
    # ".../semver/v3", the module path, which GOPATH mode finds only here.
    shim = folder / "gopath" / "src" / "github.com" / "Masterminds" / "semver"
    shim.mkdir(parents=True)
    (shim / "v3").symlink_to(os.path.join(GOCODE, "github.com", "Masterminds", "semver"))
    binary = str(folder / "chart_render")
    env = dict(
        os.environ, GO111MODULE="off", GOFLAGS="", GOPROXY="off", GOPATH=f"{folder / 'gopath'}:/usr/share/gocode"
    )
    env.setdefault("GOCACHE", str(folder / "gocache"))
    built = subprocess.run(
        ["go", "build", "-o", binary, os.path.join(HERE, "chart_render", "main.go")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=240,
    )
    assert built.returncode == 0, built.stdout
    return binary


def render(renderer, *sets, chart=CHART):
    args = [renderer, "--release", "gpuleak-exporter", "--namespace", "gpuleak"]
    for assignment in sets:
        args += ["--set", assignment]
    return subprocess.run(args + [chart], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)


def rendered_documents(renderer, *sets):
    result = render(renderer, *sets)
    assert result.returncode == 0, result.stderr
    return result.stdout, [d for d in yaml.safe_load_all(result.stdout) if d]


def test_the_default_chart_renders_the_exporter_objects_and_no_servicemonitor(renderer):
    _, documents = rendered_documents(renderer)
    assert [(d["kind"], d["metadata"]["name"]) for d in documents] == [
        ("ServiceAccount", "gpuleak-exporter"),
        ("DaemonSet", "gpuleak-exporter"),
        ("Service", "gpuleak-exporter"),
    ]
    assert {d["metadata"]["namespace"] for d in documents} == {"gpuleak"}
    _, documents = rendered_documents(renderer, "serviceMonitor.enabled=true")
    assert [d["kind"] for d in documents][-1] == "ServiceMonitor"


@pytest.mark.skipif(shutil.which("yamllint") is None, reason="Debian's yamllint is not installed")
@pytest.mark.parametrize("sets", [(), ("serviceMonitor.enabled=true",)])
def test_the_rendered_chart_passes_yamllint(renderer, tmp_path, sets):
    text, _ = rendered_documents(renderer, *sets)
    path = tmp_path / "rendered.yaml"
    path.write_text(text)
    result = subprocess.run(
        ["yamllint", "-f", "parsable", "-d", YAMLLINT_CONFIG, str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert result.returncode == 0, result.stdout


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_decodes_the_rendered_chart_without_a_cluster(renderer, tmp_path):
    text, _ = rendered_documents(renderer, "serviceMonitor.enabled=true")
    path = tmp_path / "rendered.yaml"
    path.write_text(text)
    result = subprocess.run(
        ["kubectl", "label", "--local", "-f", str(path), "checked=yes", "-o", "name"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
        env=dict(os.environ, KUBECONFIG="/nonexistent"),
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        "serviceaccount/gpuleak-exporter",
        "daemonset.apps/gpuleak-exporter",
        "service/gpuleak-exporter",
        "servicemonitor.monitoring.coreos.com/gpuleak-exporter",
    ]


def test_every_rendered_object_has_only_fields_of_its_kubernetes_type(renderer):
    kubernetes_schema = pytest.importorskip("kubernetes_schema")
    _, documents = rendered_documents(renderer, "serviceMonitor.enabled=true")
    checked = [d["kind"] for d in documents if kubernetes_schema.is_checked(d)]
    assert checked == ["ServiceAccount", "DaemonSet", "Service"]
    for document in documents:
        if kubernetes_schema.is_checked(document):
            assert kubernetes_schema.schema_errors(document) == [], document["kind"]


def test_the_rendered_daemonset_is_the_plain_manifests_pod(renderer):
    _, documents = rendered_documents(renderer)
    chart_pod = daemonset_in(documents)["spec"]["template"]["spec"]
    check_exporter_pod(chart_pod, DEFAULT_PORT)
    plain_pod = daemonset_in(load_all(os.path.join(DEPLOY, "kubernetes", "daemonset.yaml")))["spec"]["template"]["spec"]
    for key in (
        "hostPID",
        "nodeSelector",
        "tolerations",
        "priorityClassName",
        "volumes",
        "automountServiceAccountToken",
        "serviceAccountName",
    ):
        assert chart_pod[key] == plain_pod[key], key
    chart_container, plain_container = chart_pod["containers"][0], plain_pod["containers"][0]
    for key in ("securityContext", "volumeMounts", "env", "ports", "readinessProbe", "livenessProbe", "resources"):
        assert chart_container[key] == plain_container[key], key
    # The chart passes --window too; every flag of the plain one is there with its value.
    chart_args = dict(zip(chart_container["args"][::2], chart_container["args"][1::2]))
    plain_args = dict(zip(plain_container["args"][::2], plain_container["args"][1::2]))
    assert {k: chart_args.get(k) for k in plain_args} == plain_args


def test_values_set_on_the_command_line_reach_every_place_they_belong(renderer):
    _, documents = rendered_documents(
        renderer, "port=10500", "intervalSeconds=2", "kubeletPodResourcesDir=/data/kubelet/pod-resources"
    )
    pod = daemonset_in(documents)["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["ports"][0]["containerPort"] == 10500
    assert "0.0.0.0:10500" in container["args"]
    assert container["args"][container["args"].index("--interval") + 1] == "2"
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["pod-resources"]["hostPath"]["path"] == "/data/kubelet/pod-resources"
    [service] = [d for d in documents if d["kind"] == "Service"]
    assert service["spec"]["ports"][0]["port"] == 10500


def test_a_value_the_chart_does_not_define_fails_the_render(renderer, tmp_path):
    chart = tmp_path / "chart"
    shutil.copytree(CHART, chart)
    template = chart / "templates" / "service.yaml"
    template.write_text(template.read_text().replace(".Values.port", ".Values.metricsPort"))
    result = render(renderer, chart=str(chart))
    assert result.returncode == 1
    assert "metricsPort" in result.stderr
