"""Stand-ins for the kubelet's pod-resources socket, on a unix socket in a
test's folder:

- `PodResourcesServer`: a real gRPC server (Debian's python3-grpcio) that
  answers v1.PodResourcesLister/List with the allocations a test gives. The
  answer is encoded here by hand in the protobuf wire format, from the field
  numbers of the public API, not with gpuleak's pod_resources.proto: a
  mistake in that file then shows as wrong labels instead of being copied
  into both ends.
- `SilentSocket`: accepts connections and never answers, as a hung kubelet.
"""
import socket
import threading
from concurrent import futures

import grpc


def _varint(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number, payload):
    """A length-delimited field (wire type 2): strings and messages."""
    if isinstance(payload, str):
        payload = payload.encode("utf-8")
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def encode_list_response(pods):
    """pods: [(namespace, pod, [(container, [(resource_name, [device ids])])])]
    -> ListPodResourcesResponse bytes.

    ListPodResourcesResponse: pod_resources = 1 (PodResources)
    PodResources: name = 1, namespace = 2, containers = 3 (ContainerResources)
    ContainerResources: name = 1, devices = 2 (ContainerDevices), cpu_ids = 3 (packed int64)
    ContainerDevices: resource_name = 1, device_ids = 2
    """
    response = b""
    for namespace, pod, containers in pods:
        pod_bytes = _field(1, pod) + _field(2, namespace)
        for container, devices in containers:
            container_bytes = _field(1, container)
            for resource_name, device_ids in devices:
                device_bytes = _field(1, resource_name)
                for device_id in device_ids:
                    device_bytes += _field(2, device_id)
                container_bytes += _field(2, device_bytes)
            # CPU ids, which gpuleak does not read: a reader must skip them.
            container_bytes += _field(3, _varint(2) + _varint(3))
            pod_bytes += _field(3, container_bytes)
        response += _field(1, pod_bytes)
    return response


class PodResourcesServer:
    """Serves List on `socket_path` until close(); `calls` counts the questions."""

    def __init__(self, socket_path, pods):
        self.calls = 0
        self._answer = encode_list_response(pods)
        handler = grpc.method_handlers_generic_handler(
            "v1.PodResourcesLister",
            {
                "List": grpc.unary_unary_rpc_method_handler(
                    self._list, request_deserializer=lambda data: data, response_serializer=lambda data: data
                ),
            },
        )
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), handlers=[handler])
        self._server.add_insecure_port("unix:" + socket_path)
        self._server.start()

    def _list(self, request, context):
        self.calls += 1
        return self._answer

    def close(self):
        self._server.stop(grace=None)


class SilentSocket:
    """A unix socket that accepts every connection and never writes a byte."""

    def __init__(self, socket_path):
        self.accepted = 0
        self._connections = []
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(socket_path)
        self._listener.listen(16)
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self):
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return
            self._connections.append(connection)  # held open, never answered
            self.accepted += 1

    def close(self):
        self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        for connection in self._connections:
            connection.close()
