#pragma once
// Reader for IDX files, the format of MNIST and Fashion-MNIST
// (http://yann.lecun.com/exdb/mnist/), gzip-compressed or plain.
//
// Layout: a 4-byte big-endian magic 0x0000TTNN (TT = element type, NN = number
// of dimensions), NN big-endian u32 dimension sizes, then the row-major payload.
// Only TT = 0x08 (unsigned byte) is supported, which covers MNIST-style images
// (magic 0x00000803) and labels (0x00000801).
//
// Validation policy: every problem throws DataError whose message starts with
// the file path. Trailing bytes after the promised payload are REJECTED: the
// MNIST files have none, so extra bytes mean the header and payload disagree;
// and reading to the end of the stream is also what makes zlib verify the gzip
// CRC32/length trailer, so silent payload corruption is caught too. Bytes after
// the last gzip member that are no gzip member themselves are skipped by zlib
// (gzip(1) warns of them): the payload they follow has passed its CRC.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string_view>
#include <vector>

#include "data/dataset.hpp"

namespace trainhost::data {

/// Debian's package dataset-fashion-mnist installs the four .gz files here.
inline constexpr const char* kFashionMnistDefaultDir = "/usr/share/datasets/fashion-mnist";

/// Files larger than this are treated as a corrupt header rather than read,
/// so a garbage dimension cannot make us allocate gigabytes.
inline constexpr std::uint64_t kMaxIdxPayloadBytes = 1'000'000'000;

struct IdxArray {
    std::vector<std::size_t> dims;     ///< as in the header, outermost first
    std::vector<std::uint8_t> values;  ///< product(dims) bytes, row-major
};

/// Reads a whole u8 IDX file (gzip or uncompressed; zlib detects which).
/// Throws DataError for: missing/unreadable file, bad magic, unsupported
/// element type, zero or oversized dimensions, truncated header or payload,
/// trailing data, and gzip stream errors (the zlib message is included).
/// With expected_dimensions (3 for images, 1 for labels), another magic is refused
/// as the wrong kind of file before its dimensions are read.
[[nodiscard]] IdxArray read_idx(const std::filesystem::path& path, std::size_t expected_dimensions = 0);

/// <dir>/<prefix>-images-idx3-ubyte.gz, or without .gz where only the uncompressed
/// file is there (torchvision's raw/ layout): the image file of a split ("train", "t10k").
[[nodiscard]] std::filesystem::path idx_images_path(const std::filesystem::path& dir, std::string_view prefix);

/// Every file of a split the loader may read, images and labels, with and without .gz.
[[nodiscard]] std::vector<std::filesystem::path> idx_file_spellings(const std::filesystem::path& dir,
                                                                    std::string_view prefix);

/// Loads <dir>/<prefix>-images-idx3-ubyte[.gz] and <dir>/<prefix>-labels-idx1-ubyte[.gz]
/// (prefix "train" or "t10k" for (Fashion-)MNIST). Pixels are scaled by 1/255
/// into [0,1], sample_shape is {1, rows, cols}. Throws DataError if the image
/// and label counts differ, a label is >= classes, or classes == 0.
/// limit == 0 loads all samples; otherwise only the first min(limit, count).
[[nodiscard]] Dataset load_idx_classification(const std::filesystem::path& dir, std::string_view prefix,
                                              std::size_t classes = 10, std::size_t limit = 0);

}  // namespace trainhost::data
