"""`gpuleak exporter` as a real child process: /metrics fetched by a real
HTTP client and parsed by prometheus_client's exposition parser; loopback by
default; clear errors for bad or busy addresses (a taken port is refused,
never shared); clean stop on SIGTERM; /metrics still answers within 2 s
behind 200 slow clients; heads that take too long are cut off, bodies are
never buffered."""
import contextlib
import http.client
import os
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from process_fixtures import (
    GPULEAK,
    gpuleak_env,
    is_running,
    make_orphan,
    run_gpuleak,
    start_holder,
    wait_until,
    write_nvml_state,
)

MiB = 1 << 20
GiB = 1 << 30
CONTAINER_ID = "c0ffee" + "0123456789abcdef" * 3 + "0123456789"


@contextlib.contextmanager
def exporter(args, env):
    process = subprocess.Popen(
        [GPULEAK, "exporter", *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        line = process.stdout.readline()
        match = re.search(r"http://([^ ]+):(\d+)/metrics", line)
        assert match, (line, process.stderr.read() if process.poll() is not None else "")
        yield process, match.group(1), int(match.group(2))
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        finally:
            process.kill()
            process.wait()


def scrape(host, port):
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as response:
        assert response.status == 200
        content_type = response.headers["Content-Type"]
        body = response.read().decode("utf-8")
    assert content_type.startswith("text/plain; version=0.0.4")
    return {family.name: family for family in text_string_to_metric_families(body)}


def samples_of(families, name):
    return families[name].samples


def test_metrics_parse_and_carry_the_labels_ops_need(device, started):
    leaker = start_holder(started, device)
    steady = start_holder(started, device)
    state = write_nvml_state(
        device,
        [
            f"device GPU-2222-stand-in {80 * GiB} {3 * GiB} {512 * MiB} Stand-in H200",
            f"process 0 {leaker} {GiB} {64 * MiB}",
            f"process 0 {steady} {2 * GiB}",
        ],
    )
    with exporter(
        ["--listen", "127.0.0.1:0", "--interval", "0.2", "--hostname", "node-a"], gpuleak_env(device, state)
    ) as (process, host, port):
        families = scrape(host, port)
        assert samples_of(families, "gpuleak_nvml_up")[0].value == 1
        used = samples_of(families, "gpuleak_gpu_memory_used_bytes")
        # dcgm-exporter's names and values, so `on(UUID)` or `on(Hostname, gpu)` joins.
        assert used[0].labels == {
            "gpu": "0",
            "UUID": "GPU-2222-stand-in",
            "device": "nvidia0",
            "modelName": "Stand-in H200",
            "Hostname": "node-a",
        }
        assert samples_of(families, "gpuleak_gpu_memory_total_bytes")[0].value == 80 * GiB
        by_pid = {s.labels["pid"]: s for s in samples_of(families, "gpuleak_process_gpu_memory_bytes")}
        assert by_pid[str(steady)].value == 2 * GiB
        assert set(by_pid[str(steady)].labels) == {
            "pid",
            "process_name",
            "container_id",
            "pod",
            "namespace",
            "container",
            "gpu",
            "UUID",
            "device",
            "modelName",
            "Hostname",
        }
        assert by_pid[str(steady)].labels["UUID"] == "GPU-2222-stand-in"
        assert by_pid[str(steady)].labels["pod"] == ""  # not in a pod
        assert by_pid[str(steady)].labels["process_name"] == "python3"
        rss = {s.labels["pid"]: s for s in samples_of(families, "gpuleak_process_host_rss_bytes")}
        assert rss[str(leaker)].value > 0
        handles = {s.labels["pid"]: s.value for s in samples_of(families, "gpuleak_process_gpu_device_handles")}
        assert handles[str(leaker)] == 2
        # The parser names a counter family without its _total suffix.
        assert families["gpuleak_exporter_samples"].type == "counter"
        kinds = {s.labels["kind"] for s in samples_of(families, "gpuleak_doctor_findings")}
        assert kinds == {
            "orphan",
            "zombie",
            "worker_context",
            "other_namespace",
            "unaccounted_memory",
            "growing_memory",
        }

        # The exporter samples on its own: after enough samples the growing
        # process carries the leak flag and a finite time until full.
        def leak_flagged():
            leaks = {
                s.labels["pid"]: s.value for s in samples_of(scrape(host, port), "gpuleak_process_gpu_memory_leak")
            }
            return leaks.get(str(leaker)) == 1

        assert wait_until(leak_flagged, step_s=0.2)
        families = scrape(host, port)
        until = {s.labels["pid"]: s.value for s in samples_of(families, "gpuleak_process_gpu_seconds_until_full")}
        assert 0 < until[str(leaker)] < float("inf")
        assert until[str(steady)] == float("inf")
        slope = {
            s.labels["pid"]: s.value for s in samples_of(families, "gpuleak_process_gpu_memory_growth_bytes_per_second")
        }
        assert 32 * MiB < slope[str(leaker)] < 128 * MiB
        leaks = {s.labels["pid"]: s.value for s in samples_of(families, "gpuleak_process_gpu_memory_leak")}
        assert leaks[str(steady)] == 0


def test_an_orphan_shows_in_the_findings_count(device, started):
    orphan = make_orphan(started, device)
    with exporter(["--listen", "127.0.0.1:0", "--interval", "0.2"], gpuleak_env(device)) as (process, host, port):
        families = scrape(host, port)
        counts = {s.labels["kind"]: s.value for s in samples_of(families, "gpuleak_doctor_findings")}
        assert counts["orphan"] == 1
        info = {s.labels["pid"]: s.labels for s in samples_of(families, "gpuleak_process_info")}
        assert info[str(orphan)]["verdict"] == "orphan"
        assert samples_of(families, "gpuleak_nvml_up")[0].value == 0
    assert is_running(orphan)  # exporting never ends anything


def writable_cgroup_root():
    """A cgroup hierarchy root can create groups in, or None."""
    if os.getuid() != 0:
        return None
    for root in ("/sys/fs/cgroup", "/sys/fs/cgroup/pids", "/sys/fs/cgroup/unified"):
        if os.path.exists(os.path.join(root, "cgroup.procs")) and os.access(root, os.W_OK):
            return root
    return None


@pytest.mark.skipif(writable_cgroup_root() is None, reason="needs root and a writable cgroup tree")
def test_container_id_label_comes_from_the_cgroup(device, started):
    root = writable_cgroup_root()
    parent = os.path.join(root, f"gpuleak-test-{os.getpid()}")
    group = os.path.join(parent, f"docker-{CONTAINER_ID}.scope")
    os.makedirs(group)
    holder = None
    try:
        holder = start_holder(started, device)
        with open(os.path.join(group, "cgroup.procs"), "w") as f:
            f.write(str(holder))
        with exporter(["--listen", "127.0.0.1:0", "--interval", "0.2"], gpuleak_env(device)) as (process, host, port):
            rss = {s.labels["pid"]: s.labels for s in samples_of(scrape(host, port), "gpuleak_process_host_rss_bytes")}
            assert rss[str(holder)]["container_id"] == CONTAINER_ID
    finally:
        if holder is not None:
            os.kill(holder, signal.SIGKILL)
            wait_until(
                lambda: not os.path.exists(f"/proc/{holder}")
                or open(os.path.join(group, "cgroup.procs")).read().strip() == ""
            )
        started.close()
        wait_until(lambda: open(os.path.join(group, "cgroup.procs")).read().strip() == "")
        os.rmdir(group)
        os.rmdir(parent)


def listening_sockets():
    """(address, port) of every listening TCP socket, from /proc/net/tcp."""
    found = set()
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            if fields[3] != "0A":  # LISTEN
                continue
            address_hex, port_hex = fields[1].split(":")
            address = socket.inet_ntoa(bytes.fromhex(address_hex)[::-1])
            found.add((address, int(port_hex, 16)))
    return found


DEFAULT_PORT = 10417  # docs/monitor.md: why this port


def test_default_listen_address_is_loopback_port_10417(device):
    if ("0.0.0.0", DEFAULT_PORT) in listening_sockets() or ("127.0.0.1", DEFAULT_PORT) in listening_sockets():
        pytest.skip(f"port {DEFAULT_PORT} is already in use here")
    with exporter([], gpuleak_env(device)) as (process, host, port):
        assert (host, port) == ("127.0.0.1", DEFAULT_PORT)
        assert ("127.0.0.1", DEFAULT_PORT) in listening_sockets()
        assert ("0.0.0.0", DEFAULT_PORT) not in listening_sockets()
        scrape(host, port)


def test_sigterm_stops_the_exporter_with_status_0(device):
    process = subprocess.Popen(
        [GPULEAK, "exporter", "--listen", "127.0.0.1:0"], env=gpuleak_env(device), stdout=subprocess.PIPE, text=True
    )
    try:
        assert "serving http://127.0.0.1:" in process.stdout.readline()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
    finally:
        process.kill()
        process.wait()


def test_bad_and_busy_addresses_are_clear_errors(device):
    for listen in ("nonsense", "127.0.0.1:99999", "127.0.0.1:port", "[::1"):
        result = run_gpuleak(["exporter", "--listen", listen], gpuleak_env(device))
        assert result.returncode == 2, listen
        assert result.stderr.startswith("gpuleak: --listen"), result.stderr
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = run_gpuleak(["exporter", "--listen", f"127.0.0.1:{port}"], gpuleak_env(device), timeout=30)
        assert result.returncode == 3
        assert f"cannot listen on 127.0.0.1:{port}" in result.stderr


# A second exporter on the port of a running one: with SO_REUSEPORT (what
# cpp-httplib sets by default) it started and the two shared the scrapes
# (https://github.com/yhirose/cpp-httplib/issues/250). It must be refused.
def test_a_second_exporter_on_a_taken_port_exits_3_and_the_first_keeps_serving(device):
    with exporter(["--listen", "127.0.0.1:0", "--interval", "0.2"], gpuleak_env(device)) as (_, host, port):
        second = run_gpuleak(["exporter", "--listen", f"{host}:{port}"], gpuleak_env(device), timeout=30)
        assert second.returncode == 3, second.stderr
        assert "gpuleak: cannot listen on" in second.stderr, second.stderr
        assert "Address already in use" in second.stderr
        for _ in range(5):
            scrape(host, port)


def slow_clients(host, port, count):
    """`count` connections that each send a request head one byte at a
    time, slowly (a slowloris: https://github.com/prometheus/client_java/issues/2284)."""
    clients = []
    for _ in range(count):
        s = socket.create_connection((host, port), timeout=5)
        s.sendall(b"G")
        clients.append(s)
    return clients


def test_metrics_answer_within_2_s_while_200_slow_clients_hold_connections(device):
    with exporter(["--listen", "127.0.0.1:0", "--interval", "0.2"], gpuleak_env(device)) as (_, host, port):
        clients = slow_clients(host, port, 200)
        stop = threading.Event()

        def trickle():
            while not stop.is_set():
                for s in clients:
                    try:
                        s.send(b"E")
                    except OSError:
                        pass
                stop.wait(1.0)

        sender = threading.Thread(target=trickle)
        sender.start()
        try:
            for _ in range(5):
                started = time.monotonic()
                families = scrape(host, port)
                seconds = time.monotonic() - started
                assert seconds < 2.0, f"/metrics took {seconds:.2f} s behind 200 slow clients"
                assert "gpuleak_exporter_samples" in families
                time.sleep(0.3)
        finally:
            stop.set()
            sender.join()
            for s in clients:
                s.close()


def test_a_request_head_that_takes_too_long_is_cut_off(device):
    with exporter(["--listen", "127.0.0.1:0"], gpuleak_env(device)) as (_, host, port):
        s = socket.create_connection((host, port), timeout=15)
        s.sendall(b"GET /metr")
        started = time.monotonic()
        answer = s.recv(4096)  # waits until the exporter gives up on the head
        s.close()
        assert answer.startswith(b"HTTP/1.1 408"), answer
        assert time.monotonic() - started < 10


def test_a_body_is_never_buffered(device):
    with exporter(["--listen", "127.0.0.1:0"], gpuleak_env(device)) as (_, host, port):
        s = socket.create_connection((host, port), timeout=10)
        s.sendall(b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000\r\n\r\n")
        answer = s.recv(4096)
        assert answer.startswith(b"HTTP/1.1 405"), answer
        assert b"Allow: GET, HEAD" in answer
        s.close()
        s = socket.create_connection((host, port), timeout=10)
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        assert s.recv(4096).startswith(b"HTTP/1.1 413")
        s.close()
        s = socket.create_connection((host, port), timeout=10)
        s.sendall(b"GET /" + b"x" * 20000 + b" HTTP/1.1\r\n\r\n")
        assert s.recv(4096).startswith(b"HTTP/1.1 431")
        s.close()
        scrape(host, port)


def test_keep_alive_serves_several_requests_on_one_connection(device):
    with exporter(["--listen", "127.0.0.1:0"], gpuleak_env(device)) as (_, host, port):
        connection = http.client.HTTPConnection(host, port, timeout=10)
        for path, status in (("/metrics", 200), ("/", 200), ("/nothing", 404), ("/metrics?x=1", 200)):
            connection.request("GET", path)
            response = connection.getresponse()
            body = response.read()
            assert response.status == status, path
            if path.startswith("/metrics"):
                assert b"gpuleak_exporter_samples_total" in body
        connection.request("HEAD", "/metrics")
        response = connection.getresponse()
        assert response.status == 200 and response.read() == b""
        assert int(response.headers["Content-Length"]) > 0
        connection.close()


def test_device_label_is_the_device_file_minor_not_the_index(device, started):
    state = write_nvml_state(
        device,
        [
            f"device GPU-aaaa-stand-in {80 * GiB} {GiB} 0 Stand-in H200",
            f"device GPU-bbbb-stand-in {80 * GiB} {GiB} 0 Stand-in H200",
            "minor 0 3",  # NVML's order (PCI bus) differs from /dev/nvidiaN's
            "minor 1 0",
        ],
    )
    with exporter(["--listen", "127.0.0.1:0"], gpuleak_env(device, state)) as (_, host, port):
        used = samples_of(scrape(host, port), "gpuleak_gpu_memory_used_bytes")
        by_uuid = {s.labels["UUID"]: s.labels for s in used}
        assert (by_uuid["GPU-aaaa-stand-in"]["gpu"], by_uuid["GPU-aaaa-stand-in"]["device"]) == ("0", "nvidia3")
        assert (by_uuid["GPU-bbbb-stand-in"]["gpu"], by_uuid["GPU-bbbb-stand-in"]["device"]) == ("1", "nvidia0")


def test_build_info_and_hostname_from_node_name(device):
    env = gpuleak_env(device, NODE_NAME="gpu-node-7")
    with exporter(["--listen", "127.0.0.1:0"], env) as (_, host, port):
        families = scrape(host, port)
        build = samples_of(families, "gpuleak_build_info")
        assert len(build) == 1 and build[0].value == 1
        version = run_gpuleak(["--version"], env).stdout
        assert build[0].labels["version"] in version
        assert re.fullmatch(r"[0-9a-f]{12}|unknown", build[0].labels["revision"])
        assert build[0].labels["Hostname"] == "gpu-node-7"
        assert samples_of(families, "gpuleak_nvml_up")[0].labels == {"Hostname": "gpu-node-7"}


def test_series_of_a_process_disappear_when_it_ends(device, started):
    holder = start_holder(started, device)
    state = write_nvml_state(
        device,
        [
            f"device GPU-3333-stand-in {80 * GiB} {3 * GiB} 0 Stand-in H200",
            f"process 0 {holder} {GiB}",
        ],
    )
    with exporter(["--listen", "127.0.0.1:0", "--interval", "0.2"], gpuleak_env(device, state)) as (_, host, port):

        def pids_in(families):
            return {s.labels.get("pid") for family in families.values() for s in family.samples if "pid" in s.labels}

        assert str(holder) in pids_in(scrape(host, port))
        # The driver forgets it and the process ends: no family keeps a series for it.
        write_nvml_state(device, [f"device GPU-3333-stand-in {80 * GiB} {2 * GiB} 0 Stand-in H200"])
        started.close()
        assert wait_until(lambda: str(holder) not in pids_in(scrape(host, port)), step_s=0.2)
        families = scrape(host, port)
        assert samples_of(families, "gpuleak_gpu_memory_used_bytes")  # the GPU stays


POD_UID = "0b6c2c8e-5f1d-4c57-9d8e-1a2b3c4d5e6f"
POD_CONTAINER_ID = "c0ffee" + "0123456789abcdef" * 3 + "9876543210"


def kubelet_log_root(parent, namespace, pod, uid, container, container_id):
    """A kubelet log root as a node has it: pods/<ns>_<pod>_<uid>/<container>/0.log and
    containers/<pod>_<ns>_<container>-<id>.log linking to it."""
    root = os.path.join(parent, "kubelet-logs")
    container_dir = os.path.join(root, "pods", f"{namespace}_{pod}_{uid}", container)
    os.makedirs(container_dir)
    open(os.path.join(container_dir, "0.log"), "w").close()
    os.makedirs(os.path.join(root, "containers"))
    os.symlink(
        os.path.join(container_dir, "0.log"),
        os.path.join(root, "containers", f"{pod}_{namespace}_{container}-{container_id}.log"),
    )
    return root


@contextlib.contextmanager
def process_in_cgroup(started, device, *relative_path):
    """A GPU-holding process moved into a real cgroup at `relative_path`
    (below a test-owned parent), removed afterwards."""
    root = writable_cgroup_root()
    parent = os.path.join(root, f"gpuleak-test-{os.getpid()}")
    groups = [parent]
    for part in relative_path:
        groups.append(os.path.join(groups[-1], part))
    for group in groups:
        os.mkdir(group)
    holder = None
    try:
        holder = start_holder(started, device)
        with open(os.path.join(groups[-1], "cgroup.procs"), "w") as f:
            f.write(str(holder))
        yield holder
    finally:
        started.close()
        leaf = os.path.join(groups[-1], "cgroup.procs")
        wait_until(lambda: open(leaf).read().strip() == "")
        for group in reversed(groups):
            os.rmdir(group)


def kubelet_systemd_path(uid, container_id):
    underscored = uid.replace("-", "_")
    return (
        "kubepods.slice",
        "kubepods-burstable.slice",
        f"kubepods-burstable-pod{underscored}.slice",
        f"cri-containerd-{container_id}.scope",
    )


@pytest.mark.skipif(writable_cgroup_root() is None, reason="needs root and a writable cgroup tree")
def test_pod_namespace_and_container_labels_for_a_process_in_a_kubelet_cgroup(device, started, tmp_path):
    logs = kubelet_log_root(str(tmp_path), "ml-team", "trainer-0", POD_UID, "pytorch", POD_CONTAINER_ID)
    with process_in_cgroup(started, device, *kubelet_systemd_path(POD_UID, POD_CONTAINER_ID)) as holder:
        state = write_nvml_state(
            device,
            [
                f"device GPU-4444-stand-in {80 * GiB} {3 * GiB} 0 Stand-in H200",
                f"process 0 {holder} {GiB}",
            ],
        )
        with exporter(
            ["--listen", "127.0.0.1:0", "--interval", "0.2", "--kubelet-log-root", logs], gpuleak_env(device, state)
        ) as (_, host, port):
            families = scrape(host, port)
            for name in ("gpuleak_process_gpu_memory_bytes", "gpuleak_process_host_rss_bytes", "gpuleak_process_info"):
                labels = {s.labels["pid"]: s.labels for s in samples_of(families, name)}[str(holder)]
                assert (labels["pod"], labels["namespace"], labels["container"]) == (
                    "trainer-0",
                    "ml-team",
                    "pytorch",
                ), name
                assert labels["container_id"] == POD_CONTAINER_ID


@pytest.mark.skipif(writable_cgroup_root() is None, reason="needs root and a writable cgroup tree")
def test_a_cgroup_path_of_unknown_shape_gives_no_pod_label(device, started, tmp_path):
    logs = kubelet_log_root(str(tmp_path), "ml-team", "trainer-0", POD_UID, "pytorch", POD_CONTAINER_ID)
    # The pod's UID and the container's id are both in the path, but not in
    # the kubelet's shape (no kubepods root): no pod may be named.
    with process_in_cgroup(
        started, device, "jobs", f"pod{POD_UID}", f"cri-containerd-{POD_CONTAINER_ID}.scope"
    ) as holder:
        with exporter(
            ["--listen", "127.0.0.1:0", "--interval", "0.2", "--kubelet-log-root", logs], gpuleak_env(device)
        ) as (_, host, port):
            labels = {s.labels["pid"]: s.labels for s in samples_of(scrape(host, port), "gpuleak_process_info")}[
                str(holder)
            ]
            assert (labels["pod"], labels["namespace"], labels["container"]) == ("", "", "")
            assert labels["container_id"] == POD_CONTAINER_ID
