// Video decode loop (driver API, a reader thread) that frees the converted frame but not the
// decoded surface.
//
// Sources:
//   https://github.com/UsingNet/nvcodec-python/issues/5  ("Cuda out memory issue": "When running
//       the program, Cuda memory continues to increase until there is not enough memory"; the fix
//       adds the missing `cuMemFree(nv12Frame);` next to `cuMemFree(dpFrame);` in
//       videoDecoder_decode)
//
// What was reported: a Python binding of NVDEC decodes an RTSP stream packet
// by packet; for each decoded frame it allocates a device buffer for the NV12
// surface and one for the converted output, copies the output to the host,
// frees the output buffer, and forgets the NV12 one.
//
// This program: a reader thread demuxes "packets" of random size, uploads each
// into a device buffer it allocates (cuMemAlloc) and queues it; the main thread
// decodes each packet into 0..3 frames (how many depends on the packet, as
// with B-frames), and for each frame allocates the NV12 surface and the RGB
// output, converts, copies the RGB frame to the host, frees the output and the
// packet -- but not the NV12 surface. Allocations and frees happen on two
// threads, and how many a packet makes depends on the data.
//
// Iteration: one packet (0..3 frames, 1.5 on average).
// Leak: 1280 x 720 x 3 / 2 = 1,382,400 bytes per decoded frame, ~2.07 MB per packet on average
//   (exact per frame; the per-packet figure is an average).
// Fix: cuMemFree(nv12_frame) after the conversion (or keep one NV12 surface for the whole stream).
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "../cuda/check.h"

constexpr int kWidth = 1280;
constexpr int kHeight = 720;
constexpr size_t kNv12Bytes = size_t{kWidth} * kHeight * 3 / 2;
constexpr size_t kRgbBytes = size_t{kWidth} * kHeight * 3;

struct Packet {
  CUdeviceptr data = 0;
  size_t bytes = 0;
  int frames = 0;  // how many frames this packet decodes into
  bool end = false;
};

// A bounded queue from the reader thread to the decoder.
class PacketQueue {
 public:
  void push(Packet packet) {
    std::unique_lock<std::mutex> lock(mutex_);
    space_.wait(lock, [this] { return packets_.size() < 8; });
    packets_.push_back(packet);
    ready_.notify_one();
  }
  Packet pop() {
    std::unique_lock<std::mutex> lock(mutex_);
    ready_.wait(lock, [this] { return !packets_.empty(); });
    Packet packet = packets_.front();
    packets_.pop_front();
    space_.notify_one();
    return packet;
  }

 private:
  std::mutex mutex_;
  std::condition_variable ready_, space_;
  std::deque<Packet> packets_;
};

__global__ void decode_kernel(const uint8_t* packet, size_t packet_bytes, uint8_t* nv12,
                              int frame) {
  size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x;
  if (i < kNv12Bytes) nv12[i] = packet[i % packet_bytes] ^ static_cast<uint8_t>(frame);
}

__global__ void nv12_to_rgb_kernel(const uint8_t* nv12, uint8_t* rgb) {
  size_t pixel = blockIdx.x * size_t{blockDim.x} + threadIdx.x;
  if (pixel >= size_t{kWidth} * kHeight) return;
  int x = pixel % kWidth, y = pixel / kWidth;
  uint8_t luma = nv12[pixel];
  const uint8_t* chroma = nv12 + size_t{kWidth} * kHeight + (y / 2) * kWidth + (x / 2) * 2;
  rgb[pixel * 3 + 0] = luma;
  rgb[pixel * 3 + 1] = chroma[0];
  rgb[pixel * 3 + 2] = chroma[1];
}

static void read_packets(CUcontext context, int count, PacketQueue* queue) {
  CHECK_DRIVER(cuCtxSetCurrent(context));
  std::mt19937 random(7);
  std::uniform_int_distribution<size_t> packet_bytes(4096, 262144);
  std::uniform_int_distribution<int> frames(0, 3);
  std::vector<uint8_t> host(262144);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<uint8_t>(i * 31);
  for (int i = 0; i < count; ++i) {
    Packet packet;
    packet.bytes = packet_bytes(random);
    packet.frames = frames(random);
    CHECK_DRIVER(cuMemAlloc(&packet.data, packet.bytes));
    CHECK_DRIVER(cuMemcpyHtoD(packet.data, host.data(), packet.bytes));
    queue->push(packet);
  }
  Packet end;
  end.end = true;
  queue->push(end);
}

// Decodes one packet; returns the number of frames it produced.
static int decode(const Packet& packet, std::vector<uint8_t>* host_frame) {
  const unsigned threads = 256;
  for (int frame = 0; frame < packet.frames; ++frame) {
    CUdeviceptr nv12_frame = 0;
    CHECK_DRIVER(cuMemAlloc(&nv12_frame, kNv12Bytes));  // LEAK: 1382400 bytes per decoded frame
    decode_kernel<<<(kNv12Bytes + threads - 1) / threads, threads>>>(
        reinterpret_cast<const uint8_t*>(packet.data), packet.bytes,
        reinterpret_cast<uint8_t*>(nv12_frame), frame);
    CUdeviceptr rgb_frame = 0;
    CHECK_DRIVER(cuMemAlloc(&rgb_frame, kRgbBytes));
    nv12_to_rgb_kernel<<<(kWidth * kHeight + threads - 1) / threads, threads>>>(
        reinterpret_cast<const uint8_t*>(nv12_frame), reinterpret_cast<uint8_t*>(rgb_frame));
    CHECK(cudaGetLastError());
    CHECK_DRIVER(cuMemcpyDtoH(host_frame->data(), rgb_frame, kRgbBytes));
    CHECK_DRIVER(cuMemFree(rgb_frame));
  }
  return packet.frames;
}

static int iterations_from(int argc, char** argv, int fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--iterations") == 0) return std::atoi(argv[i + 1]);
  return fallback;
}

int main(int argc, char** argv) {
  const int packets = iterations_from(argc, argv, 300);
  CHECK(cudaSetDevice(0));
  CHECK(cudaFree(nullptr));  // creates the primary context
  CUcontext context = nullptr;
  CHECK_DRIVER(cuCtxGetCurrent(&context));
  PacketQueue queue;
  std::thread reader(read_packets, context, packets, &queue);
  std::vector<uint8_t> host_frame(kRgbBytes);
  int decoded_packets = 0, frames = 0;
  for (;;) {
    Packet packet = queue.pop();
    if (packet.end) break;
    frames += decode(packet, &host_frame);
    CHECK_DRIVER(cuMemFree(packet.data));
    ++decoded_packets;
  }
  reader.join();
  CHECK(cudaDeviceSynchronize());
  std::printf("iterations=%d frames=%d\n", decoded_packets, frames);
  return 0;
}
