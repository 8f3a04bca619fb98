"""Pod labels from the kubelet's pod-resources API: `gpuleak exporter` as a
real child process asks a stand-in pod-resources server on a unix socket in
a temp folder; GPU-holding processes sit in real cgroups shaped like the
kubelet's; /metrics is fetched by a real HTTP client. A socket that hangs
does not stall /metrics or the sampling, and a cgroup path of unknown shape
never gets a pod, whatever the API says about its GPU."""
import os
import time

import pytest

from exporter_cli_test import (
    CONTAINER_ID,
    GiB,
    POD_CONTAINER_ID,
    POD_UID,
    exporter,
    kubelet_log_root,
    kubelet_systemd_path,
    process_in_cgroup,
    samples_of,
    scrape,
    writable_cgroup_root,
)
from pod_resources_stand_in import PodResourcesServer, SilentSocket
from process_fixtures import gpuleak_env, start_holder, wait_until, write_nvml_state

needs_cgroups = pytest.mark.skipif(writable_cgroup_root() is None, reason="needs root and a writable cgroup tree")

POD_GPU = "GPU-4444-stand-in"
OTHER_GPU = "GPU-5555-stand-in"


def pod_resources_built_in():
    # CMake says whether this build has gRPC (GPULEAK_HAVE_POD_RESOURCES).
    return os.environ.get("GPULEAK_POD_RESOURCES_BUILT_IN") == "1"


def socket_path(tmp_path):
    # sun_path holds 108 bytes; pytest's tmp_path can be longer.
    folder = tmp_path / "kubelet"
    folder.mkdir()
    path = str(folder / "kubelet.sock")
    if len(path) >= 100:
        pytest.skip("temp folder path too long for a unix socket")
    return path


def labels_by_pid(families, name="gpuleak_process_info"):
    return {s.labels["pid"]: s.labels for s in samples_of(families, name)}


def pod_labels(labels):
    return (labels["pod"], labels["namespace"], labels["container"])


def two_gpus(device, pod_holder, host_holder):
    return write_nvml_state(
        device,
        [
            f"device {POD_GPU} {80 * GiB} {3 * GiB} 0 Stand-in H200",
            f"device {OTHER_GPU} {80 * GiB} {3 * GiB} 0 Stand-in H200",
            f"process 0 {pod_holder} {GiB}",
            f"process 1 {host_holder} {GiB}",
        ],
    )


ALLOCATIONS = [
    ("ml-team", "trainer-0", [("pytorch", [("nvidia.com/gpu", [POD_GPU])])]),
    # The other GPU belongs to a pod whose process is not here; the host
    # process on it must not be called that pod.
    ("ml-team", "trainer-1", [("pytorch", [("nvidia.com/gpu", [OTHER_GPU + "::0"])])]),
    ("infra", "nic-plugin", [("agent", [("example.com/nic", ["GPU-not-a-gpu"])])]),
]


@needs_cgroups
def test_pod_namespace_and_container_come_from_the_pod_resources_api(device, started, tmp_path):
    if not pod_resources_built_in():
        pytest.skip("this gpuleak was built without gRPC")
    path = socket_path(tmp_path)
    server = PodResourcesServer(path, ALLOCATIONS)
    try:
        with process_in_cgroup(started, device, *kubelet_systemd_path(POD_UID, POD_CONTAINER_ID)) as holder:
            host = start_holder(started, device)
            state = two_gpus(device, holder, host)
            # No log folders: the names can only come from the socket.
            with exporter(
                [
                    "--listen",
                    "127.0.0.1:0",
                    "--interval",
                    "0.2",
                    "--kubelet-log-root",
                    "",
                    "--pod-resources-socket",
                    path,
                ],
                gpuleak_env(device, state),
            ) as (_, address, port):
                assert wait_until(lambda: server.calls > 0)
                families = scrape(address, port)
                for name in (
                    "gpuleak_process_gpu_memory_bytes",
                    "gpuleak_process_host_rss_bytes",
                    "gpuleak_process_info",
                ):
                    labels = labels_by_pid(families, name)
                    assert pod_labels(labels[str(holder)]) == ("trainer-0", "ml-team", "pytorch"), name
                    assert labels[str(holder)]["container_id"] == POD_CONTAINER_ID
                    assert pod_labels(labels[str(host)]) == ("", "", ""), name
    finally:
        server.close()


@needs_cgroups
def test_a_socket_that_never_answers_does_not_stall_metrics(device, started, tmp_path):
    path = socket_path(tmp_path)
    silent = SilentSocket(path)
    logs = kubelet_log_root(str(tmp_path), "ml-team", "trainer-0", POD_UID, "pytorch", POD_CONTAINER_ID)
    try:
        with process_in_cgroup(started, device, *kubelet_systemd_path(POD_UID, POD_CONTAINER_ID)) as holder:
            state = write_nvml_state(
                device,
                [
                    f"device {POD_GPU} {80 * GiB} {3 * GiB} 0 Stand-in H200",
                    f"process 0 {holder} {GiB}",
                ],
            )
            began = time.monotonic()
            with exporter(
                [
                    "--listen",
                    "127.0.0.1:0",
                    "--interval",
                    "0.2",
                    "--kubelet-log-root",
                    logs,
                    "--pod-resources-socket",
                    path,
                ],
                gpuleak_env(device, state),
            ) as (process, address, port):
                # The first sample asks the socket before the exporter serves:
                # it must give up after its 1 s deadline, not gRPC's 20 s
                # connection timeout.
                scrape(address, port)
                assert time.monotonic() - began < 5
                if pod_resources_built_in():
                    assert wait_until(lambda: silent.accepted > 0), "the exporter never asked"
                # For 3 s, while the socket holds its connection: every scrape
                # answers fast, and the sampling goes on.
                first = None
                deadline = time.monotonic() + 3
                while time.monotonic() < deadline:
                    began = time.monotonic()
                    families = scrape(address, port)
                    assert time.monotonic() - began < 0.5
                    # prometheus_client names a counter family without its _total.
                    samples = samples_of(families, "gpuleak_exporter_samples")[0].value
                    first = samples if first is None else first
                    time.sleep(0.1)
                assert samples - first >= 5, "sampling stalled behind the socket"
                # The one sample that asked took the 1 s deadline, not more.
                durations = samples_of(families, "gpuleak_exporter_sample_duration_seconds")
                assert durations[0].value < 1.0  # the later samples do not ask again
                # Names still come from the log folders.
                labels = labels_by_pid(families)[str(holder)]
                assert pod_labels(labels) == ("trainer-0", "ml-team", "pytorch")
            stderr = process.stderr.read()
            if pod_resources_built_in():
                assert "gave no answer within 1000 ms" in stderr
                assert stderr.count("gave no answer") == 1  # said once, not every sample
            else:
                assert stderr.count("built without gRPC") == 1
    finally:
        silent.close()


@needs_cgroups
def test_a_cgroup_of_unknown_shape_gets_no_pod_even_when_the_api_names_its_gpu(device, started, tmp_path):
    path = socket_path(tmp_path)
    server = PodResourcesServer(path, ALLOCATIONS)
    logs = kubelet_log_root(str(tmp_path), "ml-team", "trainer-0", POD_UID, "pytorch", POD_CONTAINER_ID)
    try:
        # The pod's UID and container id are in the path, not in the
        # kubelet's shape; and a process of a real pod shares nothing with it.
        with process_in_cgroup(
            started, device, "jobs", f"pod{POD_UID}", f"cri-containerd-{CONTAINER_ID}.scope"
        ) as holder:
            state = write_nvml_state(
                device,
                [
                    f"device {POD_GPU} {80 * GiB} {3 * GiB} 0 Stand-in H200",
                    f"process 0 {holder} {GiB}",
                ],
            )
            with exporter(
                [
                    "--listen",
                    "127.0.0.1:0",
                    "--interval",
                    "0.2",
                    "--kubelet-log-root",
                    logs,
                    "--pod-resources-socket",
                    path,
                ],
                gpuleak_env(device, state),
            ) as (_, address, port):
                time.sleep(0.6)  # several samples
                families = scrape(address, port)
                for name in ("gpuleak_process_gpu_memory_bytes", "gpuleak_process_info"):
                    labels = labels_by_pid(families, name)[str(holder)]
                    assert pod_labels(labels) == ("", "", ""), name
                    assert labels["container_id"] == CONTAINER_ID
    finally:
        server.close()


def test_a_missing_socket_is_not_asked_and_not_reported(device, tmp_path):
    with exporter(
        ["--listen", "127.0.0.1:0", "--interval", "0.2", "--pod-resources-socket", str(tmp_path / "absent.sock")],
        gpuleak_env(device),
    ) as (process, address, port):
        scrape(address, port)
    assert "pod-resources" not in process.stderr.read()
