#include "checkpoint/checkpoint_file.hpp"

#include "errors.hpp"
#include "files/atomic_file.hpp"
#include "files/special_file.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

namespace trainhost::checkpoint {

namespace fs = std::filesystem;

const TensorEntry* CheckpointData::find(const std::string& name) const {
    for (const TensorEntry& t : tensors)
        if (t.name == name) return &t;
    return nullptr;
}

const std::string* CheckpointData::meta(const std::string& key) const {
    auto found = metadata.find(key);
    return found == metadata.end() ? nullptr : &found->second;
}

void CheckpointData::add_f32(const std::string& name, std::vector<std::uint64_t> shape, const float* values,
                             std::size_t count) {
    TensorEntry entry{name, "F32", std::move(shape), {}};
    entry.bytes.resize(count * sizeof(float));
    // SGD's empty buffers come with null pointers, which memcpy may not take even for no bytes.
    if (count > 0) std::memcpy(entry.bytes.data(), values, entry.bytes.size());
    tensors.push_back(std::move(entry));
}

void CheckpointData::add_u8(const std::string& name, const void* bytes, std::size_t size) {
    TensorEntry entry{name, "U8", {size}, {}};
    entry.bytes.resize(size);
    if (size > 0) std::memcpy(entry.bytes.data(), bytes, size);
    tensors.push_back(std::move(entry));
}

std::uint32_t crc32_of(const void* data, std::size_t size, std::uint32_t crc) {
    const auto* bytes = static_cast<const Bytef*>(data);
    uLong running = crc;
    for (std::size_t done = 0; done < size;) {  // zlib takes at most uInt bytes a call
        const auto chunk = static_cast<uInt>(std::min<std::size_t>(size - done, 1u << 30));
        running = crc32(running, bytes + done, chunk);
        done += chunk;
    }
    return static_cast<std::uint32_t>(running);
}

namespace {

// How deep a checkpoint's header nests: the tables, a tensor's entry, its shape's numbers.
constexpr int kHeaderDepth = 3;
// Far above any model's table (a tensor's entry is some 100 bytes): read whole, a forged
// size would have the reader set aside what it names.
constexpr std::uint64_t kMostHeaderBytes = std::uint64_t{100} << 20U;

// A header value as it is spelt, cut short, for a message; a nested one only by its
// kind: dump() recurses once per level, and a crafted header nests 100,000 deep.
std::string spelt_shortly(const nlohmann::json& value) {
    const bool nested = value.is_structured() &&
                        std::any_of(value.begin(), value.end(), [](const nlohmann::json& v) { return v.is_structured(); });
    return nested ? std::string("a nested ") + value.type_name() : value.dump().substr(0, 80);
}

std::uint32_t crc_of(const std::vector<unsigned char>& data) { return crc32_of(data.data(), data.size()); }

// Fields as the checksums over the header take them: each followed by a NUL.
class FieldCrc {
public:
    void add(const std::string& text) {
        crc_ = crc32(crc_, reinterpret_cast<const Bytef*>(text.c_str()), static_cast<uInt>(text.size() + 1));
    }
    // Every metadata entry but the checksums (`skipped`), as key and value in key order.
    void add_metadata(const std::map<std::string, std::string>& metadata, std::initializer_list<std::string_view> skipped) {
        for (const auto& [key, value] : metadata)
            if (std::find(skipped.begin(), skipped.end(), key) == skipped.end()) {
                add(key);
                add(value);
            }
    }
    [[nodiscard]] std::uint32_t value() const noexcept { return static_cast<std::uint32_t>(crc_); }

private:
    uLong crc_ = crc32(0L, Z_NULL, 0);
};

// So a changed counter is found as surely as a changed weight.
std::uint32_t metadata_crc_of(const std::map<std::string, std::string>& metadata) {
    FieldCrc crc;
    crc.add_metadata(metadata, {"crc32", "metadata_crc32"});
    return crc.value();
}

// The tensor table too, so that a renamed tensor (state that a resume would then miss
// and start afresh) or a changed shape or offset is found as surely as a changed byte:
// each tensor in name order as name, dtype, shape and offsets (the numbers in decimal,
// joined by ','), then the metadata but its checksums.
std::uint32_t header_crc_of(const nlohmann::json& header, const std::map<std::string, std::string>& metadata) {
    FieldCrc crc;
    for (const auto& [name, entry] : header.items()) {
        if (name == "__metadata__") continue;
        crc.add(name);
        crc.add(entry.at("dtype").get<std::string>());
        crc.add(fmt::format("{}", fmt::join(entry.at("shape").get<std::vector<std::uint64_t>>(), ",")));
        crc.add(fmt::format("{}", fmt::join(entry.at("data_offsets").get<std::vector<std::uint64_t>>(), ",")));
    }
    crc.add_metadata(metadata, {"crc32", "metadata_crc32", "header_crc32"});
    return crc.value();
}

std::size_t element_size(const std::string& dtype) { return dtype == "F32" ? 4 : 1; }

// Nothing where the size overflows 64 bits: wrapped round, a forged shape could
// match the bytes it claims.
std::optional<std::uint64_t> byte_size(const std::string& dtype, const std::vector<std::uint64_t>& shape) {
    if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
    std::uint64_t size = element_size(dtype);
    for (std::uint64_t d : shape)
        if (__builtin_mul_overflow(size, d, &size)) return std::nullopt;
    return size;
}

// Only a regular file (links followed) is read: opening a FIFO blocks until a writer
// comes, and a device has no size to check the header against.
void require_regular_file(const fs::path& file, mode_t mode) {
    if (const std::string_view kind = files::special_file_kind(mode); !kind.empty())
        throw CheckpointError(fmt::format("{}: is {}, not a checkpoint file", file.string(), kind));
}

class ReadOnlyFile {
public:
    explicit ReadOnlyFile(const fs::path& file) : file_(file) {
        // A path that cannot be stat'ed is left to the open, which says why.
        if (struct stat info {}; ::stat(file.c_str(), &info) == 0) require_regular_file(file, info.st_mode);
        // O_NONBLOCK: a FIFO put in the file's place since the stat must not hang the open.
        fd_.number = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        struct stat info {};
        if (fd_.number < 0 || ::fstat(fd_.number, &info) != 0)
            throw CheckpointError(fmt::format("{}: cannot open checkpoint: {}", file.string(), std::strerror(errno)));
        require_regular_file(file, info.st_mode);
        // Blocking again for the reads: some filesystems (FUSE) honour O_NONBLOCK on files.
        if (const int flags = ::fcntl(fd_.number, F_GETFL); flags >= 0) ::fcntl(fd_.number, F_SETFL, flags & ~O_NONBLOCK);
        size_ = static_cast<std::uint64_t>(info.st_size);
    }

    [[nodiscard]] std::uint64_t size() const noexcept { return size_; }
    // False when the file ends before `size` bytes; a failed read throws with the system's reason.
    [[nodiscard]] bool read(void* out, std::size_t size) {
        auto* at = static_cast<char*>(out);
        while (size > 0) {
            const ssize_t got = ::read(fd_.number, at, size);
            if (got < 0 && errno == EINTR) continue;
            if (got < 0)
                throw CheckpointError(fmt::format("{}: cannot read checkpoint: {}", file_.string(), std::strerror(errno)));
            if (got == 0) return false;
            at += got;
            size -= static_cast<std::size_t>(got);
        }
        return true;
    }

private:
    // A member, so that the descriptor is closed when the constructor throws too.
    struct Descriptor {
        int number = -1;
        Descriptor() = default;
        Descriptor(const Descriptor&) = delete;
        Descriptor& operator=(const Descriptor&) = delete;
        ~Descriptor() {
            if (number >= 0) ::close(number);
        }
    } fd_;
    fs::path file_;
    std::uint64_t size_ = 0;
};

}  // namespace

void write_checkpoint(const fs::path& file, const CheckpointData& data) {
    std::vector<unsigned char> payload;
    nlohmann::json header = nlohmann::json::object();
    for (const TensorEntry& t : data.tensors) {
        const std::uint64_t begin = payload.size();
        payload.insert(payload.end(), t.bytes.begin(), t.bytes.end());
        header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {begin, payload.size()}}};
    }
    std::map<std::string, std::string> metadata = data.metadata;
    metadata["format"] = kFormat;
    metadata["crc32"] = std::to_string(crc_of(payload));
    // Metric keys and plugin names come from plugins and need not be UTF-8: the file
    // holds them with U+FFFD instead, and the metadata CRC covers what the file holds.
    const auto as_utf8 = [](const nlohmann::json& value) {
        return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    };
    metadata = nlohmann::json::parse(as_utf8(metadata)).get<std::map<std::string, std::string>>();
    header = nlohmann::json::parse(as_utf8(header));  // tensor names from plugin names, likewise
    metadata["header_crc32"] = std::to_string(header_crc_of(header, metadata));
    metadata["metadata_crc32"] = std::to_string(metadata_crc_of(metadata));
    header["__metadata__"] = metadata;
    std::string text = as_utf8(header);
    // Pad with spaces so the data starts 8-byte aligned, as safetensors writers do.
    text.append((8 - (text.size() + 8) % 8) % 8, ' ');
    std::array<unsigned char, 8> size_le;
    for (int i = 0; i < 8; ++i) size_le[i] = static_cast<unsigned char>(static_cast<std::uint64_t>(text.size()) >> (8 * i));

    if (file.has_parent_path()) {
        std::error_code ec;
        fs::create_directories(file.parent_path(), ec);
        if (ec) throw CheckpointError(fmt::format("{}: cannot create directory: {}", file.parent_path().string(), ec.message()));
    }
    const auto bytes = [](const auto& data) {
        return std::string_view(reinterpret_cast<const char*>(data.data()), data.size());
    };
    try {
        // The pid keeps two processes saving the same path from sharing a temporary file.
        files::write_atomically(file, fmt::format(".tmp{}", ::getpid()),
                                {bytes(size_le), text, bytes(payload)});
    } catch (const std::runtime_error& e) {
        throw CheckpointError(e.what());
    }
}

CheckpointData read_checkpoint(const fs::path& file) {
    ReadOnlyFile in(file);
    const auto fail = [&](const std::string& what) -> CheckpointError {
        return CheckpointError(fmt::format("{}: not a valid trainhost checkpoint: {}", file.string(), what));
    };
    const std::uint64_t file_size = in.size();
    unsigned char size_le[8];
    if (file_size < 8 || !in.read(size_le, 8)) throw fail("shorter than its 8-byte header size");
    std::uint64_t header_size = 0;
    for (int i = 0; i < 8; ++i) header_size |= static_cast<std::uint64_t>(size_le[i]) << (8 * i);
    if (header_size > file_size - 8)
        throw fail(fmt::format("header size {} does not fit in a file of {} bytes (truncated?)", header_size, file_size));
    if (header_size > kMostHeaderBytes)
        throw fail(fmt::format("header size {} is over the {} MiB a checkpoint's header takes at most (a damaged or "
                               "forged file)",
                               header_size, kMostHeaderBytes >> 20U));
    std::string text(header_size, '\0');
    if (!in.read(text.data(), header_size)) throw fail("header cut short");
    // The parser would stop at a NUL and never see, let alone check, what follows.
    if (const std::size_t nul = text.find('\0'); nul != std::string::npos)
        throw fail(fmt::format("header holds a NUL byte at offset {}", nul));
    // A key twice in one object is taken once, the last: refused, since another reader
    // could take the first and see another file than the checksums cover.
    // No name or value trainhost writes holds a control character: one would be
    // printed, in a message about it, as it is (see has_control_character).
    std::vector<std::set<std::string>> open_objects;
    std::optional<std::string> repeated;
    std::optional<std::string> controlled;
    const auto watch_keys = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
        using Event = nlohmann::json::parse_event_t;
        // A crafted header nesting millions deep would take some 80 bytes of memory per
        // byte before any check.
        if (depth > kHeaderDepth)
            throw fail(fmt::format("header nests deeper than the {} levels a checkpoint has", kHeaderDepth));
        if ((event == Event::key || event == Event::value) && parsed.is_string() && !controlled &&
            has_control_character(parsed.get_ref<const std::string&>()))
            controlled = parsed.get<std::string>();
        if (event == Event::object_start) open_objects.emplace_back();
        else if (event == Event::object_end) open_objects.pop_back();
        else if (event == Event::key && !open_objects.back().insert(parsed.get<std::string>()).second && !repeated)
            repeated = parsed.get<std::string>();
        return true;
    };
    nlohmann::json header;
    try {
        header = nlohmann::json::parse(text, watch_keys);
    } catch (const nlohmann::json::exception& e) {
        throw fail(fmt::format("header is not JSON ({})", printable(e.what(), 1024)));
    }
    if (controlled) throw fail(fmt::format("header holds '{}', with a control character", printable(*controlled)));
    if (repeated) throw fail(fmt::format("header names '{}' twice in one object", printable(*repeated)));
    // Whole numbers of 0 or more: the parser would truncate 4.9 to 4 and wrap -1 round.
    const auto counts = [&](const std::string& name, const nlohmann::json& entry, const char* field) {
        const nlohmann::json& value = entry.at(field);
        if (!value.is_array() ||
            !std::all_of(value.begin(), value.end(), [](const nlohmann::json& v) { return v.is_number_unsigned(); }))
            throw fail(fmt::format("tensor '{}' has {} {}, not a list of whole numbers of 0 or more", name, field,
                                   spelt_shortly(value)));
        return value.get<std::vector<std::uint64_t>>();
    };
    if (!header.is_object() || !header.contains("__metadata__") || !header["__metadata__"].is_object())
        throw fail("no __metadata__ in the header");
    CheckpointData data;
    for (const auto& [key, value] : header["__metadata__"].items()) {
        if (!value.is_string()) throw fail(fmt::format("metadata '{}' is not a string", printable(key)));
        data.metadata[key] = value.get<std::string>();
    }
    const std::string& format = data.metadata["format"];
    if (format != kFormat && format != kFormatWithoutHeaderCrc && format != kFormatWithoutMetadataCrc)
        throw fail(fmt::format("format is '{}', expected '{}'", printable(format), kFormat));
    // Checked whenever present, so a damaged format field cannot switch a check off.
    const bool metadata_checked = format != kFormatWithoutMetadataCrc || data.metadata.contains("metadata_crc32");
    const bool header_checked = format == kFormat || data.metadata.contains("header_crc32");
    const std::uint64_t data_size = file_size - 8 - header_size;
    // The table first: a forged one cannot make the data section be read for nothing.
    std::vector<std::pair<std::uint64_t, std::uint64_t>> spans;
    for (const auto& [name, entry] : header.items()) {
        if (name == "__metadata__") continue;
        const std::string shown = printable(name);
        try {
            TensorEntry t{name, entry.at("dtype").get<std::string>(), counts(shown, entry, "shape"), {}};
            const auto offsets = counts(shown, entry, "data_offsets");
            if (t.dtype != "F32" && t.dtype != "U8")
                throw fail(fmt::format("tensor '{}' has dtype {}", shown, printable(t.dtype)));
            const std::optional<std::uint64_t> size = byte_size(t.dtype, t.shape);
            if (!size)
                throw fail(fmt::format("tensor '{}' has shape [{}], whose size overflows 64 bits", shown,
                                       fmt::join(t.shape, ", ")));
            if (offsets.size() != 2 || offsets[0] > offsets[1] || offsets[1] > data_size || offsets[1] - offsets[0] != *size)
                throw fail(fmt::format("tensor '{}' has offsets outside the data or not matching its shape (truncated?)",
                                       shown));
            spans.emplace_back(offsets[0], offsets[1]);
            data.tensors.push_back(std::move(t));
        } catch (const nlohmann::json::exception& e) {
            throw fail(fmt::format("tensor '{}' is malformed ({})", shown, e.what()));
        }
    }
    // As safetensors requires: the tensors cover the data back to back, no gap, no overlap.
    std::vector<std::pair<std::uint64_t, std::uint64_t>> sorted = spans;
    std::sort(sorted.begin(), sorted.end());
    std::uint64_t covered = 0;
    for (const auto& [begin, end] : sorted) {
        if (begin != covered) throw fail(fmt::format("tensor data has a gap or an overlap at byte {}", covered));
        covered = end;
    }
    if (covered != data_size)
        throw fail(fmt::format("data section holds {} bytes, tensors account for {}", data_size, covered));
    std::vector<unsigned char> payload;
    try {
        payload.resize(data_size);
        for (std::size_t i = 0; i < data.tensors.size(); ++i)
            data.tensors[i].bytes.reserve(spans[i].second - spans[i].first);
    } catch (const std::bad_alloc&) {
        throw fail(fmt::format("its {} bytes of tensors do not fit in this machine's memory", data_size));
    }
    if (!in.read(payload.data(), data_size)) throw fail("data section cut short");
    for (std::size_t i = 0; i < data.tensors.size(); ++i)
        data.tensors[i].bytes.assign(payload.begin() + static_cast<std::ptrdiff_t>(spans[i].first),
                                     payload.begin() + static_cast<std::ptrdiff_t>(spans[i].second));
    const std::string computed = std::to_string(crc_of(payload));
    if (data.metadata["crc32"] != computed)
        throw fail(fmt::format("checksum mismatch: stored crc32 {}, data has {} (corrupt file)", printable(data.metadata["crc32"]),
                               computed));
    for (const auto& [checked, key] : {std::pair{metadata_checked, "metadata_crc32"}, std::pair{header_checked, "header_crc32"}})
        if (checked && !data.metadata.contains(key))
            throw fail(fmt::format("format {} has no {} (corrupt or edited file)", format, key));
    if (metadata_checked) {
        const std::string computed_metadata = std::to_string(metadata_crc_of(data.metadata));
        if (data.metadata["metadata_crc32"] != computed_metadata)
            throw fail(fmt::format("checksum mismatch: stored metadata_crc32 {}, metadata has {} (corrupt or edited "
                                   "file)",
                                   printable(data.metadata["metadata_crc32"]), computed_metadata));
    }
    if (header_checked) {
        const std::string computed_header = std::to_string(header_crc_of(header, data.metadata));
        if (data.metadata["header_crc32"] != computed_header)
            throw fail(fmt::format("checksum mismatch: stored header_crc32 {}, the tensor table and metadata have {} "
                                   "(corrupt or edited file)",
                                   printable(data.metadata["header_crc32"]), computed_header));
    }
    return data;
}

}  // namespace trainhost::checkpoint
