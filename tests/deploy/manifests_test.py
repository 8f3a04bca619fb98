"""deploy/ checked with the tools Debian has: yamllint on every YAML file,
kubectl decoding each manifest without a cluster (`label --local`: no API
server, so no schema validation), every field checked against the Kubernetes
API's types (kubernetes_schema.py), the settings the DaemonSet must have,
the Helm chart's structure (Helm is not in Debian: its templates are parsed
as YAML with each template action masked, and every .Values path they use
must exist), the Dockerfile against a real `cmake --install` tree, the
systemd unit with `systemd-analyze verify`, and Prometheus configs with
promtool."""
import os
import re
import shutil
import subprocess

import pytest
import yaml

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DEPLOY = os.path.join(ROOT, "deploy")
CHART = os.path.join(DEPLOY, "helm", "gpuleak-exporter")
BUILD_DIR = os.environ.get("GPULEAK_BUILD_DIR", os.path.join(ROOT, "build"))
GPULEAK = os.environ.get("GPULEAK_BIN", os.path.join(BUILD_DIR, "gpuleak"))
DEFAULT_PORT = 10417
YAMLLINT_CONFIG = (
    "{extends: default, rules: {line-length: {max: 280}, document-start: disable, truthy: {check-keys: false}}}"
)


def plain_yaml_files():
    found = []
    for folder, _, names in os.walk(DEPLOY):
        if os.path.join("helm", "gpuleak-exporter", "templates") in folder:
            continue  # Go templates, checked below
        found += [os.path.join(folder, n) for n in names if n.endswith((".yaml", ".yml"))]
    return sorted(found) + [
        os.path.join(ROOT, "docs", "prometheus", n)
        for n in ("prometheus.yml", "gpuleak-alerts.yml", "gpuleak-alerts.test.yml")
    ]


def load_all(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def daemonset_in(documents):
    [daemonset] = [d for d in documents if d["kind"] == "DaemonSet"]
    return daemonset


@pytest.mark.skipif(shutil.which("yamllint") is None, reason="Debian's yamllint is not installed")
def test_every_plain_yaml_file_passes_yamllint():
    result = subprocess.run(
        ["yamllint", "-f", "parsable", "-d", YAMLLINT_CONFIG, *plain_yaml_files()],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert result.returncode == 0, result.stdout


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_decodes_every_manifest_without_a_cluster():
    for name, kinds in (
        (
            "daemonset.yaml",
            [
                "namespace/gpuleak",
                "serviceaccount/gpuleak-exporter",
                "daemonset.apps/gpuleak-exporter",
                "service/gpuleak-exporter",
            ],
        ),
        ("servicemonitor.yaml", ["servicemonitor.monitoring.coreos.com/gpuleak-exporter"]),
    ):
        result = subprocess.run(
            [
                "kubectl",
                "label",
                "--local",
                "-f",
                os.path.join(DEPLOY, "kubernetes", name),
                "checked=yes",
                "-o",
                "name",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.split() == kinds


def test_every_plain_manifest_has_only_fields_of_its_kubernetes_type():
    kubernetes_schema = pytest.importorskip("kubernetes_schema")
    checked = []
    for name in ("daemonset.yaml", "servicemonitor.yaml"):
        for document in load_all(os.path.join(DEPLOY, "kubernetes", name)):
            if kubernetes_schema.is_checked(document):
                checked.append(document["kind"])
                assert kubernetes_schema.schema_errors(document) == [], document["kind"]
    assert checked == ["Namespace", "ServiceAccount", "DaemonSet", "Service"]


def check_exporter_pod(spec, port):
    """What the exporter's pod must be, in the plain manifest and the chart alike."""
    assert spec["hostPID"] is True
    assert spec["automountServiceAccountToken"] is False
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]
    [container] = spec["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert env["NVIDIA_VISIBLE_DEVICES"]["value"] == "all"
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert "resources" not in container or "nvidia.com/gpu" not in str(container["resources"])
    security = container["securityContext"]
    assert security["privileged"] is False
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"], "add": ["SYS_PTRACE", "DAC_READ_SEARCH"]}
    assert container["ports"][0]["containerPort"] == port
    volumes = {v["name"]: v for v in spec["volumes"]}
    for mount in container["volumeMounts"]:
        assert mount["name"] in volumes and mount["readOnly"] is True
    args = container["args"]
    root = args[args.index("--kubelet-log-root") + 1]
    socket = args[args.index("--pod-resources-socket") + 1]
    assert {m["mountPath"] for m in container["volumeMounts"]} == {
        root + "/pods",
        root + "/containers",
        os.path.dirname(socket),
    }
    return container


def test_the_daemonset_has_what_the_exporter_needs_and_nothing_more():
    documents = load_all(os.path.join(DEPLOY, "kubernetes", "daemonset.yaml"))
    container = check_exporter_pod(daemonset_in(documents)["spec"]["template"]["spec"], DEFAULT_PORT)
    assert "0.0.0.0:%d" % DEFAULT_PORT in container["args"]
    [service] = [d for d in documents if d["kind"] == "Service"]
    assert service["spec"]["ports"][0]["port"] == DEFAULT_PORT
    assert service["spec"]["clusterIP"] == "None"


def test_the_daemonset_passes_only_flags_the_exporter_knows():
    documents = load_all(os.path.join(DEPLOY, "kubernetes", "daemonset.yaml"))
    [container] = daemonset_in(documents)["spec"]["template"]["spec"]["containers"]
    help_text = subprocess.run([GPULEAK, "exporter", "--help"], stdout=subprocess.PIPE, text=True).stdout
    for flag in (a for a in container["args"] if a.startswith("--")):
        assert flag in help_text, flag


TEMPLATE_LINE = re.compile(r"^\s*\{\{-?[^}]*-?\}\}\s*$")
TEMPLATE_ACTION = re.compile(r"\{\{-?(.*?)-?\}\}")


def masked_template(text):
    """The template with lines that are only an action removed and inline
    actions replaced by a placeholder: YAML must parse the rest."""
    lines = [line for line in text.splitlines() if not TEMPLATE_LINE.match(line)]
    return TEMPLATE_ACTION.sub("TEMPLATED", "\n".join(lines))


def values_paths(text):
    return set(re.findall(r"\.Values((?:\.[A-Za-z0-9_]+)+)", text))


def test_the_chart_parses_and_uses_only_values_it_defines():
    with open(os.path.join(CHART, "Chart.yaml")) as f:
        chart = yaml.safe_load(f)
    assert chart["apiVersion"] == "v2" and chart["name"] == "gpuleak-exporter"
    assert re.fullmatch(r"\d+\.\d+\.\d+", chart["version"])
    with open(os.path.join(CHART, "values.yaml")) as f:
        values = yaml.safe_load(f)
    assert values["port"] == DEFAULT_PORT
    templates = os.path.join(CHART, "templates")
    kinds = []
    for name in sorted(os.listdir(templates)):
        with open(os.path.join(templates, name)) as f:
            text = f.read()
        documents = [d for d in yaml.safe_load_all(masked_template(text)) if d]
        assert documents, name
        kinds += [d["kind"] for d in documents]
        for path in values_paths(text):
            node = values
            for key in path.strip(".").split("."):
                assert isinstance(node, dict) and key in node, f"{name}: .Values{path} is not in values.yaml"
                node = node[key]
    assert sorted(kinds) == ["DaemonSet", "Service", "ServiceAccount", "ServiceMonitor"]


def test_the_chart_daemonset_matches_the_plain_one_where_it_matters():
    with open(os.path.join(CHART, "templates", "daemonset.yaml")) as f:
        chart_docs = [d for d in yaml.safe_load_all(masked_template(f.read())) if d]
    chart_pod = daemonset_in(chart_docs)["spec"]["template"]["spec"]
    plain_pod = daemonset_in(load_all(os.path.join(DEPLOY, "kubernetes", "daemonset.yaml")))["spec"]["template"]["spec"]
    with open(os.path.join(CHART, "values.yaml")) as f:
        values = yaml.safe_load(f)
    # The masked lines are the values' blocks: put the defaults back.
    chart_pod["tolerations"] = values["tolerations"]
    chart_pod["nodeSelector"] = values["nodeSelector"]
    chart_pod["containers"][0]["ports"][0]["containerPort"] = values["port"]
    check_exporter_pod(chart_pod, DEFAULT_PORT)
    assert chart_pod["nodeSelector"] == plain_pod["nodeSelector"]
    chart_container, plain_container = chart_pod["containers"][0], plain_pod["containers"][0]
    assert chart_container["securityContext"] == plain_container["securityContext"]
    assert chart_container["volumeMounts"] == plain_container["volumeMounts"]


def dockerfile_instructions():
    instructions, pending = [], ""
    with open(os.path.join(DEPLOY, "container", "Dockerfile")) as f:
        for line in f:
            line = line.rstrip("\n")
            if not pending and (not line.strip() or line.lstrip().startswith("#")):
                continue
            if line.endswith("\\"):
                pending += line[:-1] + " "
                continue
            text = (pending + line).strip()
            pending = ""
            keyword, _, rest = text.partition(" ")
            instructions.append((keyword.upper(), rest.strip()))
    return instructions


def test_the_dockerfile_copies_files_a_real_install_tree_has(tmp_path):
    prefix = tmp_path / "install"
    result = subprocess.run(
        ["cmake", "--install", BUILD_DIR, "--prefix", str(prefix)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout
    instructions = dockerfile_instructions()
    known = {"FROM", "RUN", "COPY", "ENV", "USER", "EXPOSE", "ENTRYPOINT", "CMD", "LABEL", "WORKDIR", "ARG"}
    assert {k for k, _ in instructions} <= known, instructions
    assert instructions[0][0] == "FROM" and instructions[0][1].startswith("debian:12")
    copies = [rest.split() for keyword, rest in instructions if keyword == "COPY"]
    assert copies
    for *sources, _ in copies:
        for source in sources:
            assert (prefix / source).exists(), f"COPY {source}: not in the install tree"
    assert ("EXPOSE", str(DEFAULT_PORT)) in instructions
    # Every shared library the installed binary needs comes from a package the image installs.
    [run] = [rest for keyword, rest in instructions if keyword == "RUN" and "apt-get install" in rest]
    packages = {p.split("=")[0] for p in run.split() if re.match(r"^lib[\w.+-]+(=\S+)?$", p)}
    ldd = subprocess.run(["ldd", str(prefix / "bin" / "gpuleak")], stdout=subprocess.PIPE, text=True).stdout
    base = {"libc6", "libgcc-s1", "libstdc++6", "zlib1g", "liblzma5", "libbz2-1.0", "libelf1"}
    for library in re.findall(r"=> (\S+)", ldd):
        # dpkg knows one spelling of each path (/lib or /usr/lib, link or target).
        real = os.path.realpath(library)
        spellings = {library, real}
        for path in list(spellings):
            spellings.add(path[4:] if path.startswith("/usr/lib/") else "/usr" + path)
        owner = ""
        for path in sorted(spellings):
            owner = (
                owner
                or subprocess.run(
                    ["dpkg", "-S", path], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
                ).stdout.split(":")[0]
            )
        assert owner, library
        assert owner in packages or owner in base, f"{library} ({owner}) is not installed in the image"


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_the_systemd_unit_verifies_cleanly(tmp_path):
    with open(os.path.join(DEPLOY, "systemd", "gpuleak-exporter.service")) as f:
        unit = f.read()
    assert "ExecStart=/usr/local/bin/gpuleak exporter" in unit
    for setting in (
        "DynamicUser=yes",
        "ProtectSystem=strict",
        "NoNewPrivileges=yes",
        "AmbientCapabilities=CAP_SYS_PTRACE CAP_DAC_READ_SEARCH",
    ):
        assert setting in unit.splitlines(), setting
    # verify checks that ExecStart's program exists: point it at the built one.
    copy = tmp_path / "gpuleak-exporter.service"
    copy.write_text(unit.replace("/usr/local/bin/gpuleak", os.path.abspath(GPULEAK)))
    result = subprocess.run(
        ["systemd-analyze", "verify", str(copy)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0 and result.stdout.strip() == "", result.stdout


@pytest.mark.skipif(shutil.which("promtool") is None, reason="Debian's prometheus is not installed")
def test_promtool_accepts_the_static_scrape_config():
    result = subprocess.run(
        ["promtool", "check", "config", os.path.join(ROOT, "docs", "prometheus", "prometheus.yml")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout


def test_the_pod_scrape_job_keeps_only_exporter_pods_and_their_labels():
    # Debian builds Prometheus without Kubernetes service discovery, so its
    # promtool rejects kubernetes_sd_configs: only the structure is checked here.
    [job] = load_all(os.path.join(DEPLOY, "prometheus", "scrape-pods.yml"))[0]["scrape_configs"]
    assert job["honor_labels"] is True
    assert job["kubernetes_sd_configs"] == [{"role": "pod", "namespaces": {"names": ["gpuleak"]}}]
    keeps = {r["source_labels"][0]: r["regex"] for r in job["relabel_configs"] if r.get("action") == "keep"}
    assert keeps == {
        "__meta_kubernetes_pod_label_app_kubernetes_io_name": "gpuleak-exporter",
        "__meta_kubernetes_pod_container_port_name": "metrics",
    }
