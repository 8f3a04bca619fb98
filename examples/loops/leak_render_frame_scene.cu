// Render loop whose per-frame device copies of the scene, view and lighting state are never freed.
//
// Sources:
//   https://github.com/ThomasKroes/exposure-render/issues/23  ("memory leak in core.cu::Render":
//       Render() cudaMallocs pDevScene, pDevView and pDevIR on every call, and "no dev pointer gets
//       freed, which after several thousand iteration fills up the gpu memory to the brim")
//   https://github.com/MarianoJT88/PD-Flow/issues/7  ("after running the code for a while ... the
//       GPU memory consumptions increases over time"; fixed by adding the missing cudaFree calls)
//
// What was reported: a volume renderer's Render(), called once per frame,
// allocates small device copies of its scene, view and instant-radiosity
// structs, copies them up, launches the kernels, and returns without freeing
// them. Each leak is small; over thousands of frames the device fills.
//
// This program: a frame loop calls render(); render() makes the three small
// per-frame allocations (never freed: three leaking sites, a few KiB per frame
// in all), and a large accumulation buffer that it does free, so the body
// allocates four times and frees once per frame.
//
// Iteration: one frame (one render() call).
// Leak: sizeof(Scene) + sizeof(View) + sizeof(InstantRadiosity) = 2,560 + 256 + 1,024 = 3,840 bytes
//   per frame (exact requested sizes).
// Fix: allocate the three structs once outside the loop (or cudaFree them at the end of render()).
#include <cstdlib>
#include <cstring>

#include "../cuda/check.h"

struct Scene {
  float camera[64];
  float lights[16][32];
  int flags[64];
};
struct View {
  int width;
  int height;
  float exposure;
  char padding[244];
};
struct InstantRadiosity {
  float virtual_point_lights[256];
};
static_assert(sizeof(Scene) == 2560 && sizeof(View) == 256 && sizeof(InstantRadiosity) == 1024,
              "the labels in corpus.json give these sizes");

__global__ void render_kernel(const Scene* scene, const View* view,
                              const InstantRadiosity* radiosity, float4* accumulation,
                              float4* image) {
  int pixel = blockIdx.x * blockDim.x + threadIdx.x;
  if (pixel >= view->width * view->height) return;
  float light = scene->lights[pixel % 16][0] + radiosity->virtual_point_lights[pixel % 256];
  accumulation[pixel] = make_float4(light, light * 0.5f, light * 0.25f, 1.0f);
  float4 previous = image[pixel];
  image[pixel] = make_float4(0.9f * previous.x + 0.1f * accumulation[pixel].x * view->exposure,
                             previous.y, previous.z, 1.0f);
}

static void render(const Scene& scene, const View& view, const InstantRadiosity& radiosity,
                   float4* image) {
  Scene* dev_scene = nullptr;
  CHECK(cudaMalloc(&dev_scene, sizeof(Scene)));  // LEAK: 2560 bytes per frame
  CHECK(cudaMemcpy(dev_scene, &scene, sizeof(Scene), cudaMemcpyHostToDevice));
  View* dev_view = nullptr;
  CHECK(cudaMalloc(&dev_view, sizeof(View)));  // LEAK: 256 bytes per frame
  CHECK(cudaMemcpy(dev_view, &view, sizeof(View), cudaMemcpyHostToDevice));
  InstantRadiosity* dev_radiosity = nullptr;
  CHECK(cudaMalloc(&dev_radiosity, sizeof(InstantRadiosity)));  // LEAK: 1024 bytes per frame
  CHECK(cudaMemcpy(dev_radiosity, &radiosity, sizeof(InstantRadiosity), cudaMemcpyHostToDevice));

  const int pixels = view.width * view.height;
  float4* accumulation = nullptr;
  CHECK(cudaMalloc(&accumulation, pixels * sizeof(float4)));
  render_kernel<<<(pixels + 255) / 256, 256>>>(dev_scene, dev_view, dev_radiosity, accumulation,
                                               image);
  CHECK(cudaGetLastError());
  CHECK(cudaFree(accumulation));
}

static int iterations_from(int argc, char** argv, int fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--iterations") == 0) return std::atoi(argv[i + 1]);
  return fallback;
}

int main(int argc, char** argv) {
  const int frames = iterations_from(argc, argv, 400);
  Scene scene{};
  for (int light = 0; light < 16; ++light) scene.lights[light][0] = 0.1f * light;
  View view{};
  view.width = 640;
  view.height = 360;
  view.exposure = 1.0f;
  InstantRadiosity radiosity{};
  float4* image = nullptr;
  CHECK(cudaMalloc(&image, view.width * view.height * sizeof(float4)));
  CHECK(cudaMemset(image, 0, view.width * view.height * sizeof(float4)));
  for (int frame = 0; frame < frames; ++frame) {
    scene.camera[0] = 0.01f * frame;
    render(scene, view, radiosity, image);
  }
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaFree(image));
  std::printf("iterations=%d\n", frames);
  return 0;
}
