// How many bytes a CUDA array holds, from its descriptor: for cuArrayCreate,
// cuArray3DCreate and cuMipmappedArrayCreate, whose calls say the shape and
// element format but not the size.
//
// The result is the logical size of the data (texels, 4x4 blocks of a
// block-compressed format, the planes of a YUV format); the driver may round
// it up for alignment. 0 for a format this version does not know.
#pragma once

#include <cstdint>

namespace gpuleak::collector {

// `format` is a CUarray_format value, `channels` the descriptor's
// NumChannels (ignored by formats that fix their own channel count).
// `height` and `depth` of 0 mean 1, as in CUDA's descriptors.
std::uint64_t cuda_array_bytes(unsigned format, unsigned channels, std::uint64_t width,
                               std::uint64_t height, std::uint64_t depth);

}  // namespace gpuleak::collector
