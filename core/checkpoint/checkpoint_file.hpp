// The checkpoint file: the safetensors layout (8-byte little-endian header size,
// a JSON header, then the tensors' bytes), so Python's safetensors can read it,
// with trainhost's own entries in "__metadata__": a CRC-32 of the data, one of the
// other metadata entries and one of the whole header (the tensor table and the metadata).
// Format documented in docs/checkpoint.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace trainhost::checkpoint {

inline constexpr const char* kFormat = "trainhost.checkpoint/3";
// Read as before: CRC-32s of the data and of the metadata, none of the tensor table.
inline constexpr const char* kFormatWithoutHeaderCrc = "trainhost.checkpoint/2";
// Read as before: a CRC-32 of the data only.
inline constexpr const char* kFormatWithoutMetadataCrc = "trainhost.checkpoint/1";

class CheckpointError : public std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct TensorEntry {
    std::string name;
    std::string dtype;  // "F32" or "U8"
    std::vector<std::uint64_t> shape;
    std::vector<unsigned char> bytes;
};

struct CheckpointData {
    std::map<std::string, std::string> metadata;
    std::vector<TensorEntry> tensors;

    [[nodiscard]] const TensorEntry* find(const std::string& name) const;
    [[nodiscard]] const std::string* meta(const std::string& key) const;
    void add_f32(const std::string& name, std::vector<std::uint64_t> shape, const float* values, std::size_t count);
    void add_u8(const std::string& name, const void* bytes, std::size_t size);
};

// zlib's CRC-32 of `size` bytes, continuing `crc` (0 to start), as the file's checksums use it.
[[nodiscard]] std::uint32_t crc32_of(const void* data, std::size_t size, std::uint32_t crc = 0);

// Atomic: written to a temporary file beside the target, flushed and fsynced, then
// renamed over it, then the directory fsynced. Every I/O failure throws with the
// path and the system's reason; a failed write leaves any old file untouched.
void write_checkpoint(const std::filesystem::path& file, const CheckpointData& data);

// Refuses anything that is not a complete, uncorrupted trainhost checkpoint, with
// the path and exactly what is wrong.
[[nodiscard]] CheckpointData read_checkpoint(const std::filesystem::path& file);

}  // namespace trainhost::checkpoint
