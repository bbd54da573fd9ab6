// What the checkpoint tests share: the plugin's table, a run that loads it, a
// tensor's values, and a bit-for-bit comparison of two checkpoints' tensors.
#pragma once

#include "checkpoint/checkpoint_file.hpp"
#include "integration/process.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace checkpoint_runs {

// [plugins.checkpoint] writing into `dir`, with save_last, plus `more` TOML lines.
inline std::string checkpoint_table(const std::filesystem::path& dir, const std::string& more = "") {
    return "\n[plugins.checkpoint]\ndirpath = \"" + dir.string() + "\"\nsave_last = true\n" + more;
}

// Runs trainhost with the checkpoint plugin loaded, unless the arguments name plugins.
inline test_support::RunResult run_trainhost(std::vector<std::string> arguments) {
    bool named = false;
    for (const auto& a : arguments) named = named || a.rfind("--plugins", 0) == 0;
    if (!named) arguments.push_back("--plugins=checkpoint");
    return test_support::run_trainhost(arguments);
}

// The fp32 values of the tensor `name` (such as "param/dense0.weight") in `data`.
inline std::vector<float> tensor_floats(const trainhost::checkpoint::CheckpointData& data, const std::string& name) {
    const auto* tensor = data.find(name);
    REQUIRE(tensor != nullptr);
    std::vector<float> values(tensor->bytes.size() / sizeof(float));
    std::memcpy(values.data(), tensor->bytes.data(), tensor->bytes.size());
    return values;
}

// Every tensor of `a` whose name starts with `prefix` is in `b` with the same bytes.
inline void check_same_tensors(const std::filesystem::path& a, const std::filesystem::path& b, const std::string& prefix) {
    const auto first = trainhost::checkpoint::read_checkpoint(a);
    const auto second = trainhost::checkpoint::read_checkpoint(b);
    std::size_t compared = 0;
    for (const auto& tensor : first.tensors) {
        if (tensor.name.rfind(prefix, 0) != 0) continue;
        const auto* other = second.find(tensor.name);
        REQUIRE(other != nullptr);
        INFO(tensor.name);
        CHECK(other->bytes == tensor.bytes);  // bit for bit
        ++compared;
    }
    CHECK(compared > 0);
}

}  // namespace checkpoint_runs
