// A checkpoint to forge: saved by a short run, read back, edited, and resumed.
#pragma once

#include "checkpoint/checkpoint_file.hpp"
#include "integration/process.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace forged_checkpoint {

using test_support::RunResult;
using test_support::TempDir;
using test_support::tiny_config;
namespace fs = std::filesystem;

// A checkpoint of tiny_config's model (its text changed by `edits`, each the first
// occurrence of a string and what replaces it) saved after its first epoch of 2 steps,
// with the state of the checkpoint and early_stopping plugins, and a run of 2 epochs
// to resume it.
class Saved {
public:
    using Edits = std::vector<std::pair<std::string, std::string>>;
    explicit Saved(const Edits& edits = {}) {
        std::string text = tiny_config(2, "\n[plugins.checkpoint]\ndirpath = \"" + ckpt().string() + "\"\nsave_last = true\n");
        for (const auto& [was, now] : edits) text.replace(text.find(was), was.size(), now);
        config_ = dir_.write("run.toml", text);
        REQUIRE(run({"--epochs", "1"}).exit_code == 0);
    }
    [[nodiscard]] const TempDir& dir() const { return dir_; }
    [[nodiscard]] fs::path ckpt() const { return dir_.path() / "ckpt"; }
    [[nodiscard]] fs::path last() const { return ckpt() / "last.safetensors"; }
    [[nodiscard]] std::string bytes() const { return test_support::read_file(last()); }
    [[nodiscard]] trainhost::checkpoint::CheckpointData data() const { return trainhost::checkpoint::read_checkpoint(last()); }

    [[nodiscard]] RunResult run(std::vector<std::string> arguments) const {
        arguments.insert(arguments.begin(), {"--config", config_.string(), "--plugins=checkpoint,early_stopping"});
        return test_support::run_trainhost(arguments);
    }
    // Resumes from `bytes` as the file `name`.
    [[nodiscard]] RunResult resume(const std::string& name, const std::string& bytes) const {
        return run({"--resume", dir_.write(name, bytes).string()});
    }
    // Resumes from `forged`, written with valid checksums as forged.safetensors.
    [[nodiscard]] RunResult resume(const trainhost::checkpoint::CheckpointData& forged) const {
        trainhost::checkpoint::write_checkpoint(forged_path(), forged);
        return run({"--resume", forged_path().string()});
    }
    [[nodiscard]] fs::path forged_path() const { return dir_.path() / "forged.safetensors"; }

private:
    TempDir dir_;
    fs::path config_;
};

// `data` without the tensors and metadata whose names start with `prefix`.
inline trainhost::checkpoint::CheckpointData without(trainhost::checkpoint::CheckpointData data, const std::string& prefix) {
    std::erase_if(data.tensors, [&](const auto& t) { return t.name.rfind(prefix, 0) == 0; });
    std::erase_if(data.metadata, [&](const auto& entry) { return entry.first.rfind(prefix, 0) == 0; });
    return data;
}

// A plugin's saved state, as the SDK's StateWriter lays it out.
class StateBytes {
public:
    template <typename T>
    StateBytes& put(const T& value) {
        const auto* p = reinterpret_cast<const unsigned char*>(&value);
        bytes_.insert(bytes_.end(), p, p + sizeof value);
        return *this;
    }
    StateBytes& put_string(const std::string& text) {
        put<std::uint64_t>(text.size());
        bytes_.insert(bytes_.end(), text.begin(), text.end());
        return *this;
    }
    // `data` with this as the state of `plugin`.
    [[nodiscard]] trainhost::checkpoint::CheckpointData as_state_of(const std::string& plugin,
                                                                    trainhost::checkpoint::CheckpointData data) const {
        for (auto& tensor : data.tensors)
            if (tensor.name == "plugin/" + plugin) {
                tensor.bytes = bytes_;
                tensor.shape = {bytes_.size()};
            }
        return data;
    }

private:
    std::vector<unsigned char> bytes_;
};

}  // namespace forged_checkpoint
