// Checkpoints whose state was forged with valid checksums (parameters, optimizer
// moments, trainer counters, plugin states): each is refused with the file and what
// is wrong, and what a run itself saves resumes.
#include "checkpoint/checkpoint_file.hpp"
#include "integration/checkpoint_runs.hpp"
#include "integration/forged_checkpoint.hpp"
#include "integration/process.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <tuple>
#include <zlib.h>

using Catch::Matchers::Contains;
using forged_checkpoint::Saved;
using forged_checkpoint::StateBytes;
using forged_checkpoint::without;
using test_support::files_in;
using test_support::RunResult;
using test_support::TempDir;
using test_support::tiny_config;
namespace fs = std::filesystem;

TEST_CASE("a checkpoint without one of the model's parameters, or with a plugin state it does not read whole, is refused",
          "[checkpoint]") {
    Saved saved;
    const std::string error = "error: --resume " + saved.forged_path().string() + ": ";
    auto run = saved.resume(without(saved.data(), "param/dense1.bias"));
    CHECK(run.exit_code == 1);
    CHECK_THAT(run.err, Contains(error + "the checkpoint has no parameter dense1.bias (was it saved from another model?)\n"));
    auto forged = saved.data();
    auto state = std::find_if(forged.tensors.begin(), forged.tensors.end(),
                              [](const auto& t) { return t.name == "plugin/early_stopping"; });
    REQUIRE(state != forged.tensors.end());
    state->bytes.push_back(0);
    state->shape = {state->bytes.size()};
    run = saved.resume(forged);
    CHECK(run.exit_code == 1);
    CHECK_THAT(run.err, Contains(error + "plugin 'early_stopping' refused its saved state: saved state has bytes this "
                                 "plugin did not read\n"));
}

TEST_CASE("a checkpoint with optimizer state for some parameters but not for another is refused", "[checkpoint]") {
    Saved saved;
    const auto data = saved.data();
    const std::string error = "error: --resume " + saved.forged_path().string() + ": ";
    for (const auto& [prefix, missing] : std::vector<std::pair<std::string, std::string>>{
             {"optimizer/dense0.weight/first", "optimizer/dense0.weight/first"},
             {"optimizer/dense0.weight/second", "optimizer/dense0.weight/second"},
             {"optimizer/dense1.bias/", "optimizer/dense1.bias/first"}}) {
        DYNAMIC_SECTION("without " << prefix) {
            auto run = saved.resume(without(data, prefix));
            CHECK(run.exit_code == 1);
            CHECK_THAT(run.err, Contains(error + missing + " is missing, though the checkpoint holds optimizer state (a "
                                         "damaged or edited file: " + missing.substr(10, missing.rfind('/') - 10) +
                                         "'s moments would restart from zero)\n"));
        }
    }
    SECTION("without any, though saved after 2 steps") {
        auto run = saved.resume(without(data, "optimizer/"));
        CHECK(run.exit_code == 1);
        CHECK_THAT(run.err, Contains(error + "the checkpoint holds no optimizer state, though saved after 2 optimizer "
                                             "steps (a damaged or edited file)\n"));
    }
    SECTION("without any, saved before the first step: the optimizer starts fresh, as it always has") {
        auto forged = without(data, "optimizer/");
        forged.metadata["trainer.global_step"] = "0";
        CHECK(saved.resume(forged).exit_code == 0);
    }
}

TEST_CASE("optimizer moments that are NaN, an infinite mean and a negative second moment are refused", "[checkpoint]") {
    Saved saved;
    const std::string error = "error: --resume " + saved.forged_path().string() + ": ";
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    for (const auto& [name, value, what] : std::vector<std::tuple<std::string, float, std::string>>{
             {"optimizer/dense1.bias/first", nan, "a non-finite value (nan at index 2)"},
             {"optimizer/dense1.bias/first", -inf, "a non-finite value (-inf at index 2)"},
             {"optimizer/dense1.bias/second", nan, "a non-finite value (nan at index 2)"},
             {"optimizer/dense1.bias/second", -1.0F, "a negative second moment (-1 at index 2)"},
             // What training itself reaches where a gradient squares past float's range: resumed.
             {"optimizer/dense1.bias/second", inf, ""}}) {
        DYNAMIC_SECTION(name << " " << value) {
            auto forged = saved.data();
            auto tensor = std::find_if(forged.tensors.begin(), forged.tensors.end(), [&](const auto& t) { return t.name == name; });
            REQUIRE(tensor != forged.tensors.end());
            REQUIRE(tensor->bytes.size() > 3 * sizeof(float));
            std::memcpy(tensor->bytes.data() + 2 * sizeof(float), &value, sizeof value);
            auto run = saved.resume(forged);
            if (what.empty()) {
                CHECK(run.exit_code == 0);
            } else {
                CHECK(run.exit_code == 1);
                CHECK_THAT(run.err, Contains(error + name + " holds " + what + "\n"));
            }
        }
    }
}

TEST_CASE("an empty optimizer buffer is refused where the optimizer keeps one", "[checkpoint]") {
    const std::string adam = "type = \"adam\"";
    for (const auto& [optimizer, emptied, refused] : std::vector<std::tuple<std::string, std::string, bool>>{
             {"type = \"adam\"", "first", true},
             {"type = \"adam\"", "second", true},
             {"type = \"sgd\"\nmomentum = 0.9", "first", true},
             {"type = \"sgd\"\nmomentum = 0.9", "second", false},
             {"type = \"sgd\"", "first", false}}) {
        DYNAMIC_SECTION(optimizer << ": " << emptied << " empty") {
            Saved saved(Saved::Edits{{adam, optimizer}});
            auto forged = saved.data();
            const std::string name = "optimizer/dense0.bias/" + emptied;
            for (auto& tensor : forged.tensors)
                if (tensor.name == name) {
                    tensor.shape = {0};
                    tensor.bytes.clear();
                }
            auto run = saved.resume(forged);
            INFO(run.err);
            CHECK(run.exit_code == (refused ? 1 : 0));
            if (refused)
                CHECK_THAT(run.err, Contains("error: --resume " + saved.forged_path().string() + ": " + name +
                                             " does not fit parameter dense0.bias (0 bytes of F32, the model needs 16 "
                                             "bytes of F32)\n"));
        }
    }
}

TEST_CASE("an optimizer step count beyond the checkpoint's global step is refused", "[checkpoint]") {
    Saved saved;
    const std::string key = "optimizer/dense0.weight/steps";
    for (const auto& [steps, global_step, bound] : std::vector<std::tuple<std::string, std::string, std::string>>{
             {"3", "2", "trainer.global_step, 2"},
             {"9223372036854775807", "2", "trainer.global_step, 2"},
             {"18446744073709551615", "2", "trainer.global_step, 2"}}) {
        DYNAMIC_SECTION(steps << " after " << global_step) {
            auto forged = saved.data();
            forged.metadata[key] = steps;
            forged.metadata["trainer.global_step"] = global_step;
            auto run = saved.resume(forged);
            CHECK(run.exit_code == 1);
            CHECK_THAT(run.err, Contains("error: --resume " + saved.forged_path().string() + ": checkpoint '" + key +
                                         "' is out of range: " + steps + " (more than " + bound + ")\n"));
        }
    }
}

// Each counter is checked against the one that bounds it, so none can wrap in the run
// that resumes and write checkpoints that run could not resume itself.
TEST_CASE("trainer counters that contradict each other or the run are refused", "[checkpoint]") {
    Saved saved;
    const auto mid = saved.data();  // saved at the first epoch's end, after 2 steps
    const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
        {"trainer.fit_step", "18446744073709551615", "no run takes that many"},
        {"trainer.fit_step", "1000000000000001", "no run takes that many"},
        {"trainer.global_step", "3", "more than trainer.fit_step, 2"},
        {"trainer.global_step", "18446744073709551615", "more than trainer.fit_step, 2"},
        {"trainer.epoch", "1000000", "a run has at most 1000000 epochs"},
    };
    for (const auto& [key, value, why] : cases) {
        DYNAMIC_SECTION(key << " = " << value) {
            auto forged = mid;
            forged.metadata[key] = value;
            auto run = saved.resume(forged);
            CHECK(run.exit_code == 1);
            CHECK_THAT(run.err, Contains("error: --resume " + saved.forged_path().string() + ": checkpoint '" + key +
                                         "' is out of range: " + value + " (" + why + ")\n"));
        }
    }
    for (const std::string value : {"0x1p+11", "-0x1p+0", "nan"}) {
        DYNAMIC_SECTION("trainer.lr = " << value) {
            auto forged = mid;
            forged.metadata["trainer.lr"] = value;
            auto run = saved.resume(forged);
            CHECK(run.exit_code == 1);
            CHECK_THAT(run.err, Contains("error: --resume " + saved.forged_path().string() + ": checkpoint 'trainer.lr' is not a "
                                         "learning rate in [0, 1000]: " + value + "\n"));
        }
    }
    for (const std::string key : {"trainer.epoch_complete", "weights_only"}) {
        DYNAMIC_SECTION(key << " = 7") {
            auto forged = mid;
            forged.metadata[key] = "7";
            auto run = saved.resume(forged);
            CHECK(run.exit_code == 1);
            CHECK_THAT(run.err, Contains("error: --resume " + saved.forged_path().string() + ": checkpoint '" + key +
                                         "' is neither 0 nor 1: 7\n"));
        }
    }
}


TEST_CASE("a checkpoint plugin state that counts more kept files than it holds is refused before any allocation",
          "[checkpoint][state]") {
    Saved saved;
    for (const std::uint64_t count : {std::uint64_t{1} << 31, std::uint64_t{1} << 62, ~std::uint64_t{0}}) {
        DYNAMIC_SECTION("count " << count) {
            auto run = saved.resume(StateBytes().put(count).put<std::uint64_t>(0).as_state_of("checkpoint", saved.data()));
            CHECK(run.exit_code == 1);
            CHECK_THAT(run.err, Contains("error: --resume " + saved.forged_path().string() + ": plugin 'checkpoint' refused its "
                                         "saved state: saved state is truncated: it lists " + std::to_string(count) +
                                         " kept checkpoints in 8 bytes\n"));
        }
    }
}

TEST_CASE("an early_stopping state with a NaN best or an impossible count of epochs is refused", "[checkpoint][state]") {
    Saved saved;
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const std::vector<std::tuple<double, std::int64_t, std::uint32_t, std::string>> cases = {
        {nan, 0, 0, "saved state has a NaN best score"},
        {0.5, -1, 0, "saved state has -1 epochs without improvement since epoch 0, beyond the 1000000 epochs a run can have"},
        {0.5, std::numeric_limits<std::int64_t>::max(), 0,
         "saved state has 9223372036854775807 epochs without improvement since epoch 0, beyond the 1000000 epochs a run "
         "can have"},
        {0.5, 0, 4294967295u,
         "saved state has 0 epochs without improvement since epoch 4294967295, beyond the 1000000 epochs a run can have"},
    };
    for (const auto& [best, wait, best_epoch, message] : cases) {
        DYNAMIC_SECTION(message) {
            auto run = saved.resume(StateBytes().put(best).put(wait).put(best_epoch).as_state_of("early_stopping", saved.data()));
            CHECK(run.exit_code == 1);
            CHECK_THAT(run.err, Contains("error: --resume " + saved.forged_path().string() + ": plugin 'early_stopping' refused its "
                                         "saved state: " + message + "\n"));
        }
    }
}

TEST_CASE("a checkpoint or early_stopping state whose mode is neither min nor max is refused", "[checkpoint][state]") {
    Saved saved;
    const std::string error = "error: --resume " + saved.forged_path().string() + ": plugin '";
    const std::string mode_7 = "' refused its saved state: saved state has mode 7, neither min (0) nor max (1)\n";
    auto checkpoint = saved.resume(
        StateBytes().put<std::uint64_t>(0).put<std::uint64_t>(2).put_string("").put<std::uint8_t>(7).as_state_of(
            "checkpoint", saved.data()));
    CHECK(checkpoint.exit_code == 1);
    CHECK_THAT(checkpoint.err, Contains(error + "checkpoint" + mode_7));
    auto early_stopping = saved.resume(StateBytes()
                                           .put(0.5)
                                           .put<std::int64_t>(0)
                                           .put<std::uint32_t>(0)
                                           .put_string("val_loss")
                                           .put<std::uint8_t>(7)
                                           .as_state_of("early_stopping", saved.data()));
    CHECK(early_stopping.exit_code == 1);
    CHECK_THAT(early_stopping.err, Contains(error + "early_stopping" + mode_7));
}

namespace {

// The checkpoint plugin's state keeping `path` alone, ranked below anything it saves next.
StateBytes keeping(const fs::path& path) {
    // As plugin version 1.0 saved it, without the monitor and mode at the end: read as
    // ranked by the resuming run's.
    return std::move(StateBytes().put<std::uint64_t>(1).put(-1.0).put_string(path.string()).put<std::uint64_t>(2));
}

}  // namespace

TEST_CASE("the checkpoint plugin takes back only checkpoint files of its dirpath to rank and delete", "[checkpoint][state]") {
    Saved saved;
    const auto data = saved.data();  // as saved: a resume that trains saves over it
    const fs::path& dir = saved.dir().path();
    const std::string error = "error: --resume " + saved.forged_path().string() + ": plugin 'checkpoint' refused its saved state: ";
    SECTION("a kept path that is no checkpoint file is refused, in dirpath or not") {
        for (const fs::path& kept : {dir / "victim.txt", saved.ckpt() / "victim.txt", saved.ckpt() / ".safetensors",
                                     saved.ckpt() / "last.safetensors" / ".."}) {
            INFO(kept);
            const auto victim = saved.dir().write("victim.txt", "precious\n");
            auto run = saved.resume(keeping(kept).as_state_of("checkpoint", data));
            CHECK(run.exit_code == 1);
            CHECK_THAT(run.err, Contains(error + "saved state keeps '" + kept.string() +
                                         "', which is not a .safetensors checkpoint file\n"));
            CHECK(fs::exists(victim));
        }
    }
    SECTION("last.safetensors as a kept file is refused: top-k would delete what --resume last reads") {
        const fs::path kept = saved.ckpt() / "last.safetensors";
        auto run = saved.resume(keeping(kept).as_state_of("checkpoint", data));
        CHECK(run.exit_code == 1);
        CHECK_THAT(run.err, Contains(error + "saved state keeps '" + kept.string() +
                                     "' as a top-k file: it is what save_last writes and --resume last reads\n"));
    }
    SECTION("a checkpoint file outside dirpath is left alone, with a warning") {
        fs::create_directory(dir / "elsewhere");
        const auto precious = saved.dir().write("elsewhere/precious.safetensors", "precious\n");
        for (const fs::path& kept : {precious, saved.ckpt() / ".." / "elsewhere" / "precious.safetensors"}) {
            INFO(kept);
            auto run = saved.resume(keeping(kept).as_state_of("checkpoint", data));
            CHECK(run.exit_code == 0);
            CHECK_THAT(run.err, Contains("warning: [checkpoint] the saved state keeps 1 checkpoint file(s) outside dirpath '" +
                                         saved.ckpt().string() + "' (" + kept.string() +
                                         "); they are left alone, neither ranked nor deleted\n"));
            CHECK(fs::exists(precious));
        }
    }
    SECTION("a file of dirpath spelt another way is still deleted once it drops out of the top k") {
        REQUIRE(fs::exists(saved.ckpt() / "epoch=0-step=2.safetensors"));
        auto run = saved.resume(keeping(saved.ckpt() / "sub" / ".." / "epoch=0-step=2.safetensors").as_state_of("checkpoint", data));
        CHECK(run.exit_code == 0);
        CHECK_THAT(run.err, !Contains("outside dirpath"));
        CHECK(files_in(saved.ckpt()) == std::vector<std::string>{"epoch=1-step=4.safetensors", "last.safetensors"});
    }
}

TEST_CASE("a relative dirpath is another directory in another working directory: a resume there ranks and deletes "
          "none of the files its state kept",
          "[checkpoint][state]") {
    TempDir dir;
    fs::create_directories(dir.path() / "a");
    fs::create_directories(dir.path() / "b");
    const auto config = dir.write("run.toml", tiny_config(2, "\n[plugins.checkpoint]\ndirpath = \"ck\"\nsave_last = true\n"));
    const auto run_in = [&](const std::string& where, std::vector<std::string> arguments) {
        arguments.insert(arguments.begin(), {"--config", config.string(), "--plugins=checkpoint"});
        return test_support::run_trainhost(arguments, "cd '" + (dir.path() / where).string() + "'");
    };
    REQUIRE(run_in("a", {"--epochs", "1"}).exit_code == 0);
    const std::string last = (dir.path() / "a" / "ck" / "last.safetensors").string();
    // Another run's file of the same name in b's ck: its kept file is a's, as Lightning's
    // realpath of dirpath says, and b's is not pushed out in its place.
    fs::create_directories(dir.path() / "b" / "ck");
    const auto unrelated = dir.write("b/ck/epoch=0-step=2.safetensors", "another run's");
    auto elsewhere = run_in("b", {"--resume", last});
    CHECK(elsewhere.exit_code == 0);
    CHECK_THAT(elsewhere.err, Contains("warning: [checkpoint] the saved state keeps 1 checkpoint file(s) outside dirpath "
                                       "'ck' (" + (dir.path() / "a" / "ck" / "epoch=0-step=2.safetensors").string() +
                                       "); they are left alone, neither ranked nor deleted\n"));
    CHECK(test_support::read_file(unrelated) == "another run's");
    CHECK(files_in(dir.path() / "b" / "ck") ==
          std::vector<std::string>{"epoch=0-step=2.safetensors", "epoch=1-step=4.safetensors", "last.safetensors"});
    CHECK(fs::exists(dir.path() / "a" / "ck" / "epoch=0-step=2.safetensors"));
    auto here = run_in("a", {"--resume", last});
    CHECK(here.exit_code == 0);
    CHECK(files_in(dir.path() / "a" / "ck") == std::vector<std::string>{"epoch=1-step=4.safetensors", "last.safetensors"});
    // The same directory spelt absolutely: its files are still this run's to rank and delete.
    const auto absolute = dir.write("absolute.toml", tiny_config(3, "\n[plugins.checkpoint]\ndirpath = \"" +
                                                                     (dir.path() / "a" / "ck").string() +
                                                                     "\"\nsave_last = true\n"));
    auto spelt = test_support::run_trainhost({"--config", absolute.string(), "--plugins=checkpoint", "--resume", last},
                                             "cd '" + (dir.path() / "a").string() + "'");
    CHECK(spelt.exit_code == 0);
    CHECK_THAT(spelt.err, !Contains("outside dirpath"));
    CHECK(files_in(dir.path() / "a" / "ck") == std::vector<std::string>{"epoch=2-step=6.safetensors", "last.safetensors"});
}

TEST_CASE("train_state.resumed is 1 from setup on in the fit that resumes, and 0 in any other", "[checkpoint][resume][abi]") {
    TempDir dir;
    const std::string tables =
        checkpoint_runs::checkpoint_table(dir.path() / "ckpt") + "\n[plugins.test_recorder]\nsay_resumed = true\n";
    const auto config = dir.write("run.toml", tiny_config(1, tables)).string();
    const std::string plugins = "--plugins=checkpoint," + test_support::test_plugin("test_recorder");
    auto fresh = test_support::run_trainhost({"--config", config, plugins});
    REQUIRE(fresh.exit_code == 0);
    CHECK_THAT(fresh.out, Contains("test_recorder: fit 1 resumed = 0\n"));
    // Only the first fit of --repeat takes the checkpoint.
    auto resumed = test_support::run_trainhost({"--config", config, plugins, "--epochs", "2", "--resume", "last", "--repeat", "2"});
    INFO(resumed.out << resumed.err);
    REQUIRE(resumed.exit_code == 0);
    CHECK_THAT(resumed.out, Contains("test_recorder: fit 1 resumed = 1\n") && Contains("test_recorder: fit 2 resumed = 0\n"));
    // Parameters alone start a fresh fit.
    auto weights = test_support::run_trainhost({"--config", config, plugins, "--weights", "last"});
    REQUIRE(weights.exit_code == 0);
    CHECK_THAT(weights.out, Contains("test_recorder: fit 1 resumed = 0\n"));
}
