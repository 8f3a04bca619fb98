#include "collector/array_size.h"

namespace gpuleak::collector {

namespace {

// CUarray_format values (cuda.h), spelled out so this builds against CUDA
// headers older than the newest formats.
enum Format : unsigned {
  kUnsignedInt8 = 0x01,
  kUnsignedInt16 = 0x02,
  kUnsignedInt32 = 0x03,
  kSignedInt8 = 0x08,
  kSignedInt16 = 0x09,
  kSignedInt32 = 0x0a,
  kHalf = 0x10,
  kFloat = 0x20,
  kUnorm101010_2 = 0x50,
  kBc1Unorm = 0x91,
  kBc1UnormSrgb = 0x92,
  kBc2Unorm = 0x93,
  kBc2UnormSrgb = 0x94,
  kBc3Unorm = 0x95,
  kBc3UnormSrgb = 0x96,
  kBc4Unorm = 0x97,
  kBc4Snorm = 0x98,
  kBc5Unorm = 0x99,
  kBc5Snorm = 0x9a,
  kBc6hUf16 = 0x9b,
  kBc6hSf16 = 0x9c,
  kBc7Unorm = 0x9d,
  kBc7UnormSrgb = 0x9e,
  kP010 = 0x9f,
  kP016 = 0xa1,
  kNv16 = 0xa2,
  kP210 = 0xa3,
  kP216 = 0xa4,
  kYuy2 = 0xa5,
  kY210 = 0xa6,
  kY216 = 0xa7,
  kAyuv = 0xa8,
  kY410 = 0xa9,
  kNv12 = 0xb0,
  kY416 = 0xb1,
  kY444Planar8 = 0xb2,
  kY444Planar10 = 0xb3,
  kYuv444SemiPlanar8 = 0xb4,
  kYuv444SemiPlanar16 = 0xb5,
  kUnormInt8x1 = 0xc0,
  kUnormInt8x2 = 0xc1,
  kUnormInt8x4 = 0xc2,
  kUnormInt16x1 = 0xc3,
  kUnormInt16x2 = 0xc4,
  kUnormInt16x4 = 0xc5,
  kSnormInt8x1 = 0xc6,
  kSnormInt8x2 = 0xc7,
  kSnormInt8x4 = 0xc8,
  kSnormInt16x1 = 0xc9,
  kSnormInt16x2 = 0xca,
  kSnormInt16x4 = 0xcb,
};

std::uint64_t half_up(std::uint64_t n) { return (n + 1) / 2; }
std::uint64_t blocks_of_4(std::uint64_t n) { return (n + 3) / 4; }

// Bytes of one texel of a format with a fixed texel size, or 0.
std::uint64_t texel_bytes(unsigned format, unsigned channels) {
  switch (format) {
    case kUnsignedInt8:
    case kSignedInt8:
      return 1ull * channels;
    case kUnsignedInt16:
    case kSignedInt16:
    case kHalf:
      return 2ull * channels;
    case kUnsignedInt32:
    case kSignedInt32:
    case kFloat:
      return 4ull * channels;
    case kUnormInt8x1:
    case kSnormInt8x1:
      return 1;
    case kUnormInt8x2:
    case kSnormInt8x2:
    case kUnormInt16x1:
    case kSnormInt16x1:
      return 2;
    case kUnormInt8x4:
    case kSnormInt8x4:
    case kUnormInt16x2:
    case kSnormInt16x2:
      return 4;
    case kUnormInt16x4:
    case kSnormInt16x4:
      return 8;
    case kUnorm101010_2:
    case kAyuv:
    case kY410:
      return 4;
    case kY416:
      return 8;
    default:
      return 0;
  }
}

// Bytes of one 4x4 block of a block-compressed format, or 0.
std::uint64_t block_bytes(unsigned format) {
  switch (format) {
    case kBc1Unorm:
    case kBc1UnormSrgb:
    case kBc4Unorm:
    case kBc4Snorm:
      return 8;
    case kBc2Unorm:
    case kBc2UnormSrgb:
    case kBc3Unorm:
    case kBc3UnormSrgb:
    case kBc5Unorm:
    case kBc5Snorm:
    case kBc6hUf16:
    case kBc6hSf16:
    case kBc7Unorm:
    case kBc7UnormSrgb:
      return 16;
    default:
      return 0;
  }
}

// One 2D image of a YUV format: luma plus chroma at the format's sampling,
// each sample 1 byte (8-bit formats) or 2 (10- to 16-bit, stored in 16).
std::uint64_t yuv_image_bytes(unsigned format, std::uint64_t w, std::uint64_t h) {
  std::uint64_t chroma_420 = 2 * half_up(w) * half_up(h);
  std::uint64_t chroma_422 = 2 * half_up(w) * h;
  switch (format) {
    case kNv12:
      return w * h + chroma_420;
    case kP010:
    case kP016:
      return 2 * (w * h + chroma_420);
    case kNv16:
    case kYuy2:
      return w * h + chroma_422;
    case kP210:
    case kP216:
    case kY210:
    case kY216:
      return 2 * (w * h + chroma_422);
    case kY444Planar8:
    case kYuv444SemiPlanar8:
      return 3 * w * h;
    case kY444Planar10:
    case kYuv444SemiPlanar16:
      return 6 * w * h;
    default:
      return 0;
  }
}

}  // namespace

std::uint64_t cuda_array_bytes(unsigned format, unsigned channels, std::uint64_t width,
                               std::uint64_t height, std::uint64_t depth) {
  std::uint64_t h = height ? height : 1, d = depth ? depth : 1;
  if (std::uint64_t texel = texel_bytes(format, channels)) return width * h * d * texel;
  if (std::uint64_t block = block_bytes(format))
    return blocks_of_4(width) * blocks_of_4(h) * d * block;
  return yuv_image_bytes(format, width, h) * d;
}

}  // namespace gpuleak::collector
