#include "data/idx_reader.hpp"

#include "files/special_file.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <memory>
#include <string>
#include <system_error>

#include <fmt/format.h>
#include <zlib.h>

namespace trainhost::data {
namespace {

constexpr std::uint8_t kIdxTypeUnsignedByte = 0x08;
constexpr std::uint32_t kIdxImagesMagic = 0x00000803;
constexpr std::uint32_t kIdxLabelsMagic = 0x00000801;
// gzread takes an unsigned length and returns int, so read in chunks that
// fit comfortably in both.
constexpr std::size_t kMaxReadChunk = std::size_t{1} << 30U;
// deflate's largest expansion: a stored byte never stands for more than 1032 (zlib's FAQ).
constexpr std::uint64_t kMaxDeflateRatio = 1032;
// Larger than zlib's 8 KiB default: fewer read syscalls on 47 MB image files.
constexpr unsigned kGzBufferBytes = 256U * 1024U;

struct GzCloser {
    void operator()(gzFile_s* file) const noexcept { gzclose(file); }
};
using GzHandle = std::unique_ptr<gzFile_s, GzCloser>;

// zlib already folds strerror() into the text for Z_ERRNO, so the text alone
// is enough. zlib prefixes it with "<path>: ", which our messages already
// start with, so that prefix is dropped.
std::string gz_error_text(gzFile file, const std::string& path_text, int* errnum_out = nullptr) {
    int errnum = Z_OK;
    const char* raw_text = gzerror(file, &errnum);
    if (errnum_out != nullptr) *errnum_out = errnum;
    std::string text = (raw_text != nullptr && *raw_text != '\0') ? raw_text : fmt::format("zlib error {}", errnum);
    if (const std::string prefix = path_text + ": "; text.starts_with(prefix)) text.erase(0, prefix.size());
    return text;
}

// Reads until `size` bytes arrived or the stream ended; returns the count.
// A hard gzip error (corrupt deflate data, CRC mismatch, I/O error) throws.
std::size_t read_up_to(gzFile file, std::uint8_t* dest, std::size_t size, const std::string& path_text) {
    std::size_t total = 0;
    while (total < size) {
        const auto chunk = static_cast<unsigned>(std::min(size - total, kMaxReadChunk));
        const int got = gzread(file, dest + total, chunk);
        if (got < 0) throw DataError(fmt::format("{}: gzip error: {}", path_text, gz_error_text(file, path_text)));
        if (got == 0) break;
        total += static_cast<std::size_t>(got);
    }
    return total;
}

// A short read on a cut-off gzip stream is reported by zlib as a soft error
// (Z_BUF_ERROR "unexpected end of file"); surface it so the user knows the
// compressed file itself is damaged, not only the header.
std::string soft_error_suffix(gzFile file, const std::string& path_text) {
    int errnum = Z_OK;
    std::string text = gz_error_text(file, path_text, &errnum);
    return errnum == Z_OK ? std::string() : fmt::format(" (gzip: {})", text);
}

std::uint32_t big_endian_u32(const std::uint8_t* bytes) {
    return (std::uint32_t{bytes[0]} << 24U) | (std::uint32_t{bytes[1]} << 16U) | (std::uint32_t{bytes[2]} << 8U) |
           std::uint32_t{bytes[3]};
}

// MNIST naming: idx3 files hold pixels, idx1 files hold labels. Only used to
// make messages read naturally.
const char* payload_noun(std::size_t dimension_count) {
    if (dimension_count == 3) return "pixels";
    if (dimension_count == 1) return "labels";
    return "data";
}

// Links followed, as gzopen follows them. Returns the file's size.
std::uint64_t require_regular_file(const std::filesystem::path& path, const std::string& path_text) {
    struct stat info {};
    if (::stat(path.c_str(), &info) != 0) {
        if (errno == ENOENT || errno == ENOTDIR) throw DataError(fmt::format("{}: file not found", path_text));
        throw DataError(fmt::format("{}: cannot access: {}", path_text, std::generic_category().message(errno)));
    }
    if (const std::string_view kind = files::special_file_kind(info.st_mode); !kind.empty())
        throw DataError(fmt::format("{}: is {}, not an IDX file", path_text, kind));
    return static_cast<std::uint64_t>(info.st_size);
}

}  // namespace

IdxArray read_idx(const std::filesystem::path& path, std::size_t expected_dimensions) {
    const std::string path_text = path.string();
    const std::uint64_t file_bytes = require_regular_file(path, path_text);

    errno = 0;
    GzHandle file(gzopen(path_text.c_str(), "rb"));
    if (!file) {
        const int open_errno = errno;
        throw DataError(
            fmt::format("{}: cannot open: {}", path_text,
                        open_errno != 0 ? std::generic_category().message(open_errno) : std::string("gzopen failed")));
    }
    gzbuffer(file.get(), kGzBufferBytes);

    std::array<std::uint8_t, 4> magic_bytes{};
    const std::size_t magic_read = read_up_to(file.get(), magic_bytes.data(), magic_bytes.size(), path_text);
    if (magic_read < magic_bytes.size()) {
        throw DataError(fmt::format("{}: truncated header: need 4 magic bytes, file has {}{}", path_text, magic_read,
                                    soft_error_suffix(file.get(), path_text)));
    }
    const std::uint32_t magic = big_endian_u32(magic_bytes.data());
    if (magic_bytes[0] != 0 || magic_bytes[1] != 0) {
        throw DataError(fmt::format("{}: bad magic 0x{:08X}: not an IDX file (expected 0x0000TTNN)", path_text, magic));
    }
    if (magic_bytes[2] != kIdxTypeUnsignedByte) {
        throw DataError(
            fmt::format("{}: bad magic 0x{:08X}: element type 0x{:02X} is not supported (only 0x08, "
                        "unsigned byte)",
                        path_text, magic, magic_bytes[2]));
    }
    const std::size_t dimension_count = magic_bytes[3];
    if (dimension_count == 0) {
        throw DataError(fmt::format("{}: bad magic 0x{:08X}: zero dimensions", path_text, magic));
    }
    if (expected_dimensions != 0 && dimension_count != expected_dimensions) {
        throw DataError(fmt::format("{}: expected an IDX {} file (magic 0x{:08X}), got magic 0x{:08X}", path_text,
                                    expected_dimensions == 1 ? "label" : "image",
                                    expected_dimensions == 1 ? kIdxLabelsMagic : kIdxImagesMagic, magic));
    }

    std::vector<std::uint8_t> dim_bytes(4 * dimension_count);
    const std::size_t dims_read = read_up_to(file.get(), dim_bytes.data(), dim_bytes.size(), path_text);
    if (dims_read < dim_bytes.size()) {
        throw DataError(fmt::format("{}: truncated header: {} dimensions need {} bytes, file has {}{}", path_text,
                                    dimension_count, dim_bytes.size(), dims_read,
                                    soft_error_suffix(file.get(), path_text)));
    }

    IdxArray result;
    result.dims.reserve(dimension_count);
    // Each step keeps payload_bytes <= 1e9 and a dim is < 2^32, so the
    // product below cannot overflow 64 bits before the limit check fires.
    std::uint64_t payload_bytes = 1;
    for (std::size_t d = 0; d < dimension_count; ++d) {
        const std::uint32_t dim = big_endian_u32(dim_bytes.data() + 4 * d);
        if (dim == 0) throw DataError(fmt::format("{}: dimension {} is zero", path_text, d));
        payload_bytes *= dim;
        if (payload_bytes > kMaxIdxPayloadBytes) {
            throw DataError(fmt::format("{}: header dimensions promise more than {} bytes (limit); header is corrupt",
                                        path_text, kMaxIdxPayloadBytes));
        }
        result.dims.push_back(dim);
    }

    // Before allocating what a 32-byte file's header may promise: a plain file holds
    // its payload after the header, and deflate packs at most 1032 bytes into one.
    const std::uint64_t header_bytes = 4 + 4 * dimension_count;
    const bool plain = gzdirect(file.get()) == 1;
    const std::uint64_t room = plain ? file_bytes - std::min(file_bytes, header_bytes) : file_bytes * kMaxDeflateRatio;
    if (payload_bytes > room)
        throw DataError(fmt::format("{}: truncated: header promises {} bytes of {}, {}", path_text, payload_bytes,
                                    payload_noun(dimension_count),
                                    plain ? fmt::format("file has {}", room)
                                          : fmt::format("more than a gzip file of {} bytes holds ({} to 1 at most)",
                                                        file_bytes, kMaxDeflateRatio)));
    result.values.resize(static_cast<std::size_t>(payload_bytes));
    const std::size_t payload_read = read_up_to(file.get(), result.values.data(), result.values.size(), path_text);
    if (payload_read < result.values.size()) {
        throw DataError(fmt::format("{}: truncated: header promises {} bytes of {}, file has {}{}", path_text,
                                    payload_bytes, payload_noun(dimension_count), payload_read,
                                    soft_error_suffix(file.get(), path_text)));
    }

    // Reading past the payload lets zlib reach the gzip trailer and verify
    // its CRC32 and length, which is the only check that catches corruption
    // that still inflates cleanly.
    std::uint8_t extra_byte = 0;
    if (read_up_to(file.get(), &extra_byte, 1, path_text) != 0) {
        throw DataError(fmt::format("{}: trailing data after the {} bytes of {} the header promises", path_text,
                                    payload_bytes, payload_noun(dimension_count)));
    }
    if (const std::string suffix = soft_error_suffix(file.get(), path_text); !suffix.empty()) {
        throw DataError(fmt::format("{}: damaged gzip stream after the payload{}", path_text, suffix));
    }
    return result;
}

namespace {

// The gzip file as distributed, or the uncompressed one beside it where only that is
// there. Where neither is, both are named, since either would do; a spelling that
// cannot be looked up (a directory without search permission) counts as there, and the
// reader names why it cannot be read.
std::filesystem::path idx_file(const std::filesystem::path& dir, const std::string& stem) {
    const auto state = [](const std::filesystem::path& path) {
        std::error_code ec;
        return std::filesystem::status(path, ec).type();
    };
    const std::filesystem::path gzip = dir / (stem + ".gz");
    const std::filesystem::path plain = dir / stem;
    const auto gzip_state = state(gzip);
    if (gzip_state != std::filesystem::file_type::not_found) return gzip;
    const auto plain_state = state(plain);
    if (plain_state != std::filesystem::file_type::not_found) return plain;
    if (std::error_code ec; !std::filesystem::exists(std::filesystem::symlink_status(gzip, ec)))
        throw DataError(fmt::format("{}: file not found (nor {} without .gz)", gzip.string(), plain.filename().string()));
    return gzip;  // a dangling link: the reader names it
}

std::string images_stem(std::string_view prefix) { return fmt::format("{}-images-idx3-ubyte", prefix); }
std::string labels_stem(std::string_view prefix) { return fmt::format("{}-labels-idx1-ubyte", prefix); }

}  // namespace

std::filesystem::path idx_images_path(const std::filesystem::path& dir, std::string_view prefix) {
    return idx_file(dir, images_stem(prefix));
}

std::vector<std::filesystem::path> idx_file_spellings(const std::filesystem::path& dir, std::string_view prefix) {
    std::vector<std::filesystem::path> paths;
    for (const std::string& stem : {images_stem(prefix), labels_stem(prefix)}) {
        paths.push_back(dir / (stem + ".gz"));
        paths.push_back(dir / stem);
    }
    return paths;
}

Dataset load_idx_classification(const std::filesystem::path& dir, std::string_view prefix, std::size_t classes,
                                std::size_t limit) {
    std::error_code ec;
    if (std::filesystem::exists(dir, ec) && !std::filesystem::is_directory(dir, ec))
        throw DataError(fmt::format("{}: is not a directory ([data] path names the directory of the IDX files)",
                                    dir.string()));
    const std::filesystem::path images_path = idx_images_path(dir, prefix);
    const std::filesystem::path labels_path = idx_file(dir, labels_stem(prefix));
    if (classes == 0) throw DataError(fmt::format("{}: classes must be > 0", labels_path.string()));

    const IdxArray images = read_idx(images_path, 3);
    const IdxArray labels = read_idx(labels_path, 1);

    const std::size_t file_count = images.dims[0];
    if (labels.dims[0] != file_count) {
        throw DataError(fmt::format("{}: has {} images but {} has {} labels", images_path.string(), file_count,
                                    labels_path.string(), labels.dims[0]));
    }
    // All labels are checked, not just the loaded ones: a bad label anywhere
    // means the file is not what the caller thinks it is.
    for (std::size_t i = 0; i < labels.values.size(); ++i) {
        if (labels.values[i] >= classes) {
            throw DataError(fmt::format("{}: label {} at index {} is >= classes {}", labels_path.string(),
                                        labels.values[i], i, classes));
        }
    }

    const std::size_t rows = images.dims[1];
    const std::size_t cols = images.dims[2];
    const std::size_t count = limit == 0 ? file_count : std::min(limit, file_count);

    Dataset dataset;
    dataset.count = count;
    dataset.sample_shape = {1, rows, cols};
    dataset.classes = classes;
    const std::size_t value_count = count * rows * cols;
    dataset.features.resize(value_count);
    std::transform(images.values.begin(), images.values.begin() + static_cast<std::ptrdiff_t>(value_count),
                   dataset.features.begin(), [](std::uint8_t pixel) { return static_cast<float>(pixel) / 255.f; });
    dataset.labels.assign(labels.values.begin(), labels.values.begin() + static_cast<std::ptrdiff_t>(count));
    return dataset;
}

}  // namespace trainhost::data
