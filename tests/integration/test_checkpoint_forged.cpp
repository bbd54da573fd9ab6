// Checkpoints that are damaged, forged or not files at all: each is refused before
// training, exit 1, with the path and what is wrong, and never crashes or hangs.
#include "checkpoint/checkpoint_file.hpp"
#include "integration/forged_checkpoint.hpp"
#include "integration/process.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <tuple>
#include <zlib.h>

using Catch::Matchers::Contains;
using forged_checkpoint::Saved;
using forged_checkpoint::without;
using test_support::files_in;
using test_support::RunResult;
using test_support::TempDir;
using test_support::tiny_config;
namespace fs = std::filesystem;

namespace {

// The JSON header of a checkpoint's bytes, and the bytes with another header.
std::uint64_t header_size(const std::string& bytes) {
    std::uint64_t size = 0;
    for (int i = 0; i < 8; ++i) size |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
    return size;
}

nlohmann::json header_of(const std::string& bytes) { return nlohmann::json::parse(bytes.substr(8, header_size(bytes))); }

std::string with_header_text(const std::string& bytes, std::string text) {
    text.append((8 - (text.size() + 8) % 8) % 8, ' ');
    std::string out(8, '\0');
    for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(static_cast<std::uint64_t>(text.size()) >> (8 * i));
    return out + text + bytes.substr(8 + header_size(bytes));
}

std::string with_header(const std::string& bytes, const nlohmann::json& header) {
    return with_header_text(bytes, header.dump());
}

// A fresh checkpoint as trainhost wrote it in format 1 (a CRC-32 of the data alone) or
// 2 (and one of the metadata), that one computed as docs/checkpoint.md gives it.
std::string as_format(const std::string& bytes, int format) {
    nlohmann::json header = header_of(bytes);
    nlohmann::json& meta = header["__metadata__"];
    meta.erase("header_crc32");
    meta.erase("metadata_crc32");
    meta["format"] = "trainhost.checkpoint/" + std::to_string(format);
    if (format == 2) {
        uLong crc = crc32(0L, Z_NULL, 0);
        for (const auto& [key, value] : meta.items())
            if (key != "crc32")
                for (const std::string& field : {key, value.get<std::string>()})
                    crc = crc32(crc, reinterpret_cast<const Bytef*>(field.c_str()), static_cast<uInt>(field.size() + 1));
        meta["metadata_crc32"] = std::to_string(crc);
    }
    return with_header(bytes, header);
}


}  // namespace

TEST_CASE("a checkpoint path that is not a regular file is refused before it is opened", "[checkpoint]") {
    TempDir dir;
    const auto config = dir.write("run.toml", tiny_config(1)).string();
    const fs::path fifo = dir.path() / "ck.fifo";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    const fs::path link = dir.path() / "link.safetensors";
    fs::create_symlink(fifo, link);
    // Were the open to block on the FIFO again, a writer comes after 20 s, so the run
    // fails with another message instead of hanging the suite (": " ends the line the
    // setup is joined to with ";").
    const std::string unblock = "{ sleep 20; [ -p '" + fifo.string() + "' ] && exec 3<>'" + fifo.string() +
                                "'; } </dev/null >/dev/null 2>&1 & :";
    for (const char* option : {"--resume", "--weights"}) {
        for (const auto& [path, message] : std::vector<std::pair<std::string, std::string>>{
                 {fifo.string(), "is a FIFO, not a checkpoint file"},
                 {link.string(), "is a FIFO, not a checkpoint file"},
                 {"/dev/null", "is a character device, not a checkpoint file"},
                 {dir.path().string(), "is a directory, not a checkpoint file"}}) {
            INFO(option << " " << path);
            auto run = test_support::run_trainhost({"--config", config, option, path}, unblock);
            CHECK(run.exit_code == 1);
            CHECK_THAT(run.err, Contains("error: " + std::string(option) + " " + path + ": " + message + "\n"));
        }
    }
}

TEST_CASE("a renamed or reshaped tensor is refused by the header's checksum", "[checkpoint]") {
    Saved saved;
    const std::string bytes = saved.bytes();
    // One bit each: optimizer state and a plugin's state that a resume would otherwise
    // miss and start afresh, and a shape of the same size.
    for (const auto& [was, now] : std::vector<std::pair<std::string, std::string>>{
             {"\"optimizer/dense0.weight/first\"", "\"optiMizer/dense0.weight/first\""},
             {"\"plugin/checkpoint\"", "\"plugin/cieckpoint\""},
             {"\"shape\":[4,8]", "\"shape\":[8,4]"}}) {
        DYNAMIC_SECTION(was << " as " << now) {
            std::string edited = bytes;
            const auto at = edited.find(was);
            REQUIRE(at != std::string::npos);
            edited.replace(at, was.size(), now);
            auto run = saved.resume("edited.safetensors", edited);
            CHECK(run.exit_code == 1);
            CHECK_THAT(run.err, Contains("error: --resume " + (saved.dir().path() / "edited.safetensors").string() +
                                         ": not a valid trainhost checkpoint: checksum mismatch: stored header_crc32 ") &&
                                    Contains(", the tensor table and metadata have ") &&
                                    Contains(" (corrupt or edited file)\n"));
        }
    }
}

// What the checksums cannot cover, since they are of what was parsed: parts the parser
// never reads, keys it reads once, numbers it would round.
TEST_CASE("a header with a NUL, a repeated key or a count that is no whole number is refused", "[checkpoint]") {
    Saved saved;
    const std::string bytes = saved.bytes();
    const std::string file = (saved.dir().path() / "edited.safetensors").string();
    const std::string text = header_of(bytes).dump();
    const auto refused = [&](const std::string& edited, const std::string& what) {
        auto run = saved.resume("edited.safetensors", edited);
        CHECK(run.exit_code == 1);
        CHECK_THAT(run.err, Contains("error: --resume " + file + ": not a valid trainhost checkpoint: " + what + "\n"));
    };
    SECTION("a NUL, and anything after it") {
        refused(with_header_text(bytes, text + std::string("\0{\"not\": json", 13)),
                "header holds a NUL byte at offset " + std::to_string(text.size()));
    }
    SECTION("a name with a control character, which would be printed as it is") {
        std::string escaped = text;
        escaped.replace(escaped.find("\"__metadata__\":{"), 16, "\"__metadata__\":{\"metric/val\\u0000loss\":\"1\",");
        refused(with_header_text(bytes, escaped), "header holds 'metric/val\\u0000loss', with a control character");
        std::string escape = text;
        escape.replace(escape.find("\"param/dense0.weight\""), 21, "\"param/dense0.weight\\u001b[2J\"");
        refused(with_header_text(bytes, escape), "header holds 'param/dense0.weight\\u001b[2J', with a control character");
    }
    SECTION("a key twice in one object") {
        std::string twice = text;
        twice.replace(twice.find("\"__metadata__\":{"), 16, "\"__metadata__\":{\"format\":\"bogus\",");
        refused(with_header_text(bytes, twice), "header names 'format' twice in one object");
    }
    for (const auto& [field, value] : std::vector<std::pair<std::string, nlohmann::json>>{
             {"shape", {4.9, 8.9}}, {"shape", {-1}}, {"data_offsets", {0.5, 128.5}}, {"data_offsets", 7}}) {
        DYNAMIC_SECTION(field << " " << value.dump()) {
            nlohmann::json header = header_of(bytes);
            header["param/dense0.weight"][field] = value;
            refused(with_header(bytes, header), "tensor 'param/dense0.weight' has " + field + " " + value.dump() +
                                                    ", not a list of whole numbers of 0 or more");
        }
    }
    SECTION("a value megabytes long, shown cut short") {
        const std::string lengthy(5'000'000, 'x');
        const std::string shown = std::string(80, 'x') + "...";
        nlohmann::json header = header_of(bytes);
        header["__metadata__"]["format"] = lengthy;
        refused(with_header(bytes, header), "format is '" + shown + "', expected 'trainhost.checkpoint/3'");
        header = header_of(bytes);
        header["param/dense0.weight"]["dtype"] = lengthy;
        refused(with_header(bytes, header), "tensor 'param/dense0.weight' has dtype " + shown);
    }
    // Refused as the parser reaches the fourth level, before it builds millions more.
    SECTION("a shape nested 100,000 deep, and a header of nothing but brackets") {
        std::string deep = text;
        const std::string shape = "\"shape\":[";
        const auto at = deep.find(shape, deep.find("\"param/dense0.weight\""));
        REQUIRE(at != std::string::npos);
        deep.replace(at, deep.find(']', at) + 1 - at, "\"shape\":" + std::string(100000, '[') + std::string(100000, ']'));
        refused(with_header_text(bytes, deep), "header nests deeper than the 3 levels a checkpoint has");
        refused(with_header_text(bytes, std::string(1 << 20, '[')), "header nests deeper than the 3 levels a checkpoint has");
    }
}

TEST_CASE("each part of a file that is not as a checkpoint writes it is refused by name", "[checkpoint]") {
    Saved saved;
    const std::string bytes = saved.bytes();
    const std::string file = (saved.dir().path() / "edited.safetensors").string();
    const auto refused = [&](const std::string& edited, const std::string& what) {
        auto run = saved.resume("edited.safetensors", edited);
        CHECK(run.exit_code == 1);
        CHECK_THAT(run.err, Contains("error: --resume " + file + ": not a valid trainhost checkpoint: " + what));
        CHECK_THAT(run.out, !Contains("epoch 1/"));
    };
    const auto edited = [&](const std::function<void(nlohmann::json&)>& edit) {
        nlohmann::json header = header_of(bytes);
        edit(header);
        return with_header(bytes, header);
    };
    SECTION("a file shorter than the header's size") { refused(bytes.substr(0, 4), "shorter than its 8-byte header size\n"); }
    SECTION("a header that is no JSON") { refused(with_header_text(bytes, "{\"param\": "), "header is not JSON ("); }
    SECTION("a header that is no JSON for a byte that is no UTF-8, which the message escapes") {
        auto run = saved.resume("edited.safetensors", with_header_text(bytes, "{\"data_offsets\"\xfd: 1}"));
        CHECK(run.exit_code == 1);
        CHECK_THAT(run.err, Contains("header is not JSON (") && Contains("last read: '\"data_offsets\"\\xfd'"));
        CHECK_THAT(run.err, !Contains("\xfd"));
    }
    SECTION("no metadata") { refused(with_header_text(bytes, "{}"), "no __metadata__ in the header\n"); }
    SECTION("a metadata value that is no string") {
        refused(edited([](auto& h) { h["__metadata__"]["format"] = 3; }), "metadata 'format' is not a string\n");
    }
    SECTION("a tensor without a dtype") {
        refused(edited([](auto& h) { h["param/dense0.weight"].erase("dtype"); }), "tensor 'param/dense0.weight' is malformed (");
    }
    SECTION("offsets past the data") {
        refused(edited([](auto& h) { h["param/dense0.weight"]["data_offsets"] = {0, 1 << 20}; }),
                "tensor 'param/dense0.weight' has offsets outside the data or not matching its shape (truncated?)\n");
    }
    SECTION("two tensors on the same bytes") {
        refused(edited([](auto& h) { h["param/dense0.bias"]["data_offsets"] = {0, 16}; }),
                "tensor data has a gap or an overlap at byte 16\n");
    }
    SECTION("a checksum the format requires, missing") {
        refused(edited([](auto& h) { h["__metadata__"].erase("header_crc32"); }),
                "format trainhost.checkpoint/3 has no header_crc32 (corrupt or edited file)\n");
    }
}

TEST_CASE("a data section the tensors do not account for is refused before it is read", "[checkpoint]") {
    Saved saved;
    const std::string bytes = saved.bytes();
    const fs::path file = saved.dir().write("grown.safetensors", bytes);
    // 8 GiB more, as a sparse file: reading it whole first would take that much memory.
    const std::uint64_t grown = bytes.size() + (std::uint64_t{8} << 30);
    fs::resize_file(file, grown);
    auto run = saved.run({"--resume", file.string()});
    CHECK(run.exit_code == 1);
    CHECK(run.err == "error: --resume " + file.string() + ": not a valid trainhost checkpoint: data section holds " +
                         std::to_string(grown - 8 - header_size(bytes)) + " bytes, tensors account for " +
                         std::to_string(bytes.size() - 8 - header_size(bytes)) + "\n");
}

TEST_CASE("edited checkpoint metadata is refused and files from before those checks still resume", "[checkpoint]") {
    Saved saved;
    const std::string bytes = saved.bytes();
    CHECK(*saved.data().meta("format") == "trainhost.checkpoint/3");
    std::string edited = bytes;
    const auto at = edited.find("\"trainer.epoch\":\"0\"");
    REQUIRE(at != std::string::npos);
    edited[at + 17] = '7';
    auto run = saved.resume("edited.safetensors", edited);
    CHECK(run.exit_code == 1);
    CHECK_THAT(run.err, Contains("edited.safetensors: not a valid trainhost checkpoint: checksum mismatch: stored "
                                 "metadata_crc32") &&
                            Contains("(corrupt or edited file)"));
    for (int format : {1, 2}) {
        DYNAMIC_SECTION("format " << format) {
            const std::string old = as_format(bytes, format);
            auto resumed = saved.run({"--verbose", "--resume", saved.dir().write("old.safetensors", old).string()});
            INFO(resumed.err);
            CHECK(resumed.exit_code == 0);
            CHECK_THAT(resumed.out, Contains("old.safetensors at epoch 2 batch 0") && Contains("fit 1/1: 1 epoch"));
            std::string flipped = old;
            flipped[flipped.size() - 5] ^= 0x40;
            auto corrupt = saved.resume("flipped.safetensors", flipped);
            CHECK(corrupt.exit_code == 1);
            CHECK_THAT(corrupt.err, Contains("flipped.safetensors: not a valid trainhost checkpoint: checksum mismatch: "
                                             "stored crc32"));
        }
    }
}

TEST_CASE("random generator and plugin state of another dtype and a shape whose size overflows are refused",
          "[checkpoint]") {
    Saved saved(Saved::Edits{{"{ type = \"tanh\" }", "{ type = \"tanh\" }, { type = \"dropout\", rate = 0.3 }"}});
    auto forged = saved.data();
    const std::string file = saved.forged_path().string();
    // The bytes (cut to whole floats: the dtype is refused before anyone reads them) as
    // F32: the format has these as U8.
    const auto as_f32 = [&](const std::string& prefix) {
        for (auto& tensor : forged.tensors)
            if (tensor.name.rfind(prefix, 0) == 0) {
                tensor.bytes.resize(tensor.bytes.size() / 4 * 4);
                tensor.dtype = "F32";
                tensor.shape = {tensor.bytes.size() / 4};
                return tensor.name + " is F32 [" + std::to_string(tensor.bytes.size() / 4) + "]";
            }
        FAIL("no tensor " << prefix);
        return std::string();
    };
    SECTION("a plugin's state") {
        const std::string what = as_f32("plugin/early_stopping");
        auto run = saved.resume(forged);
        CHECK(run.exit_code == 1);
        CHECK_THAT(run.err, Contains("error: --resume " + file + ": " + what + ", not the U8 bytes of a plugin's state\n"));
    }
    SECTION("a random generator's state") {
        const std::string what = as_f32("rng/");
        auto run = saved.resume(forged);
        CHECK(run.exit_code == 1);
        CHECK_THAT(run.err, Contains("error: --resume " + file + ": " + what + ", not the U8 bytes of a random generator's state\n"));
    }
    SECTION("a random generator's state of all zeros, which would give zeros for ever") {
        auto rng = std::find_if(forged.tensors.begin(), forged.tensors.end(),
                                [](const auto& t) { return t.name.rfind("rng/", 0) == 0; });
        REQUIRE(rng != forged.tensors.end());
        std::fill(rng->bytes.begin(), rng->bytes.end(), std::uint8_t{0});
        auto run = saved.resume(forged);
        CHECK(run.exit_code == 1);
        CHECK_THAT(run.err, Contains("error: --resume " + file + ": " + rng->name + " is all zeros, which no random generator "
                                     "reaches (a damaged or forged file)\n"));
    }
    SECTION("a shape of 2^64 elements, which wraps round to none") {
        forged.tensors.push_back({"extra", "U8", {1ull << 32, 1ull << 32}, {}});
        auto run = saved.resume(forged);
        CHECK(run.exit_code == 1);
        CHECK_THAT(run.err, Contains("error: --resume " + file + ": not a valid trainhost checkpoint: tensor 'extra' has shape "
                                     "[4294967296, 4294967296], whose size overflows 64 bits\n"));
    }
}

// A file from before the seed's purposes had streams of their own split and ordered the
// samples by other draws of the seed: said at an epoch's end, refused within an epoch,
// whose remaining batches would not be the ones it left.
TEST_CASE("a checkpoint from before trainer.seed_streams resumes with a warning, and not within an epoch",
          "[checkpoint][resume]") {
    const Saved saved(Saved::Edits{{"save_last = true\n", "save_last = true\nevery_n_epochs = 0\nevery_n_train_steps = 1\n"
                                                          "save_top_k = -1\nfilename = \"{step}\"\n"}});
    const auto at_epoch_end = saved.data();
    REQUIRE(at_epoch_end.meta("trainer.seed_streams") != nullptr);
    CHECK(*at_epoch_end.meta("trainer.seed_streams") == "2");
    SECTION("at an epoch's end") {
        auto run = saved.resume(without(at_epoch_end, "trainer.seed_streams"));
        CHECK(run.exit_code == 0);
        CHECK_THAT(run.err, Contains("forged.safetensors: saved by a trainhost from before trainer.seed_streams, "
                                     "which drew the split, the data order, the initial weights and the synthetic data "
                                     "from the seed otherwise: this run's split and order are not the saved run's\n"));
    }
    SECTION("within an epoch") {
        const auto within = trainhost::checkpoint::read_checkpoint(saved.ckpt() / "step=1.safetensors");
        REQUIRE(*within.meta("trainer.batches_done") == "1");
        auto run = saved.resume(without(within, "trainer.seed_streams"));
        CHECK(run.exit_code == 1);
        CHECK_THAT(run.err, Contains("forged.safetensors: saved within epoch 1 by a trainhost from before "
                                     "trainer.seed_streams, whose data order came from the seed by other draws: the "
                                     "epoch's remaining samples would not be those the saved run had left"));
        // The file as saved resumes there.
        trainhost::checkpoint::write_checkpoint(saved.forged_path(), within);
        CHECK(saved.run({"--resume", saved.forged_path().string()}).exit_code == 0);
    }
    SECTION("from a build that draws them otherwise") {
        auto newer = at_epoch_end;
        newer.metadata["trainer.seed_streams"] = "3";
        auto run = saved.resume(newer);
        CHECK(run.exit_code == 1);
        CHECK_THAT(run.err, Contains("forged.safetensors: saved with seed streams 3, this build draws its split, data "
                                     "order and weights from the seed by version 2"));
    }
}
