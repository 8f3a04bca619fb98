// Sizes of CUDA arrays from their descriptors (collector/array_size.h):
// figures worked out by hand from each format's layout.
#include "collector/array_size.h"

#include <gtest/gtest.h>

namespace gpuleak::collector {
namespace {

TEST(CudaArrayBytes, plain_formats_are_texels_times_channels_times_element_size) {
  EXPECT_EQ(cuda_array_bytes(0x20 /* FLOAT */, 4, 256, 128, 0), 256u * 128 * 16);
  EXPECT_EQ(cuda_array_bytes(0x01 /* UNSIGNED_INT8 */, 1, 100, 0, 0), 100u);
  EXPECT_EQ(cuda_array_bytes(0x10 /* HALF */, 2, 8, 8, 3), 8u * 8 * 3 * 4);
}

TEST(CudaArrayBytes, normalized_formats_carry_their_own_channel_count) {
  EXPECT_EQ(cuda_array_bytes(0xc2 /* UNORM_INT8X4 */, 4, 10, 10, 1), 400u);
  EXPECT_EQ(cuda_array_bytes(0xcb /* SNORM_INT16X4 */, 4, 10, 10, 1), 800u);
  EXPECT_EQ(cuda_array_bytes(0x50 /* UNORM_INT_101010_2 */, 4, 10, 10, 1), 400u);
}

TEST(CudaArrayBytes, block_compressed_formats_count_whole_4x4_blocks) {
  // 10 x 6 texels are 3 x 2 blocks.
  EXPECT_EQ(cuda_array_bytes(0x91 /* BC1_UNORM */, 4, 10, 6, 0), 6u * 8);
  EXPECT_EQ(cuda_array_bytes(0x9d /* BC7_UNORM */, 4, 10, 6, 0), 6u * 16);
  EXPECT_EQ(cuda_array_bytes(0x97 /* BC4_UNORM */, 1, 4, 4, 2), 2u * 8);
}

TEST(CudaArrayBytes, yuv_formats_add_their_chroma_planes) {
  // NV12 1920x1080: luma 2,073,600 bytes plus half as much chroma.
  EXPECT_EQ(cuda_array_bytes(0xb0 /* NV12 */, 3, 1920, 1080, 0), 3110400u);
  // Odd sizes round the subsampled chroma up: 3x3 -> 2x2 chroma pairs.
  EXPECT_EQ(cuda_array_bytes(0xb0 /* NV12 */, 3, 3, 3, 0), 9u + 8);
  EXPECT_EQ(cuda_array_bytes(0x9f /* P010 */, 3, 1920, 1080, 0), 2u * 3110400);
  EXPECT_EQ(cuda_array_bytes(0xa5 /* YUY2 */, 2, 640, 480, 0), 640u * 480 * 2);
  EXPECT_EQ(cuda_array_bytes(0xb3 /* Y444_PLANAR10 */, 3, 64, 64, 0), 64u * 64 * 6);
}

TEST(CudaArrayBytes, unknown_format_is_zero_not_a_guess) {
  EXPECT_EQ(cuda_array_bytes(0x7e, 4, 100, 100, 1), 0u);
}

}  // namespace
}  // namespace gpuleak::collector
