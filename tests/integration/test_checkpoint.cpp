// Checkpoints and resume: atomic files, top-k bookkeeping, corruption refused, and
// a resumed run that ends bit for bit where an uninterrupted one does.
#include "checkpoint/checkpoint_file.hpp"
#include "integration/checkpoint_runs.hpp"
#include "integration/process.hpp"
#include "integration/fashion_mnist.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <limits>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

using Catch::Matchers::Contains;
using Catch::Matchers::EndsWith;
using Catch::Matchers::StartsWith;
using checkpoint_runs::check_same_tensors;
using checkpoint_runs::checkpoint_table;
using checkpoint_runs::run_trainhost;
using test_support::files_in;
using test_support::RunResult;
using test_support::TempDir;
using test_support::tiny_config;
namespace fs = std::filesystem;

namespace {

// tiny_config with dropout, so the layers' random state must survive a resume too.
std::string dropout_config(int epochs, const std::string& extra) {
    std::string text = tiny_config(epochs, extra);
    text.replace(text.find("{ type = \"tanh\" }"), 17, "{ type = \"tanh\" }, { type = \"dropout\", rate = 0.3 }");
    return text;
}

// The epochs a resumed run trained end with the metrics of the run that never stopped,
// the resumed epoch's running train_loss included.
void check_same_epoch_metrics(const fs::path& straight_json, const fs::path& resumed_json) {
    const auto straight = nlohmann::json::parse(test_support::read_file(straight_json))["fits"][0]["epochs"];
    const auto resumed = nlohmann::json::parse(test_support::read_file(resumed_json))["fits"][0]["epochs"];
    REQUIRE(!resumed.empty());
    REQUIRE(resumed.size() <= straight.size());
    const std::size_t offset = straight.size() - resumed.size();
    for (std::size_t i = 0; i < resumed.size(); ++i) {
        INFO("epoch " << i + offset + 1);
        for (const char* key : {"train_loss", "val_loss"}) {
            INFO(key);
            REQUIRE(resumed[i]["metrics"].contains(key));
            CHECK(resumed[i]["metrics"][key].get<double>() == straight[i + offset]["metrics"][key].get<double>());
        }
        // Throughput counts only what this process trained: none for a resumed epoch
        // that had nothing left, never a figure divided by almost no time.
        if (i > 0 || resumed[i]["metrics"].contains("samples_per_second")) {
            REQUIRE(resumed[i]["metrics"].contains("samples_per_second"));
            CHECK(resumed[i]["metrics"]["samples_per_second"].get<double>() > 0);
            CHECK(resumed[i]["metrics"]["samples_per_second"].get<double>() < 1e9);
        }
    }
}

}  // namespace

TEST_CASE("4 epochs, or 2 and a resume for 2 more, end with identical parameters", "[checkpoint][resume]") {
    TempDir dir;
    auto straight = dir.write("straight.toml", dropout_config(4, checkpoint_table(dir.path() / "a")));
    REQUIRE(run_trainhost({"--config", straight.string(), "--report", (dir.path() / "a.json").string()}).exit_code == 0);

    SECTION("resumed at an epoch boundary, with --resume last") {
        auto first = dir.write("first.toml", dropout_config(2, checkpoint_table(dir.path() / "b")));
        REQUIRE(run_trainhost({"--config", first.string()}).exit_code == 0);
        auto rest = run_trainhost({"--config", first.string(), "--epochs", "4", "--resume", "last", "--verbose"});
        REQUIRE(rest.exit_code == 0);
        CHECK_THAT(rest.out, Contains("at epoch 3 batch 0"));
        check_same_tensors(dir.path() / "a" / "last.safetensors", dir.path() / "b" / "last.safetensors", "param/");
        check_same_tensors(dir.path() / "a" / "last.safetensors", dir.path() / "b" / "last.safetensors", "optimizer/");
        check_same_tensors(dir.path() / "a" / "last.safetensors", dir.path() / "b" / "last.safetensors", "rng/");
    }
    SECTION("resumed in the middle of an epoch, from a path") {
        auto first = dir.write("first.toml", dropout_config(2, checkpoint_table(dir.path() / "c", "every_n_train_steps = 3\n")));
        REQUIRE(run_trainhost({"--config", first.string()}).exit_code == 0);  // last saved after step 3: epoch 2, batch 1
        auto resumed = dir.write("resumed.toml", dropout_config(4, checkpoint_table(dir.path() / "d")));
        auto rest = run_trainhost({"--config", resumed.string(), "--verbose", "--resume",
                                   (dir.path() / "c" / "last.safetensors").string()});
        REQUIRE(rest.exit_code == 0);
        CHECK_THAT(rest.out, Contains("at epoch 2 batch 1"));
        check_same_tensors(dir.path() / "a" / "last.safetensors", dir.path() / "d" / "last.safetensors", "param/");
    }
    // Ctrl-C in a training step stops after it; in validation, after the epoch's end.
    // Either way --resume last continues to the very parameters of the straight run,
    // and weights_only does not stop the interrupt save from being resumable.
    for (const auto& [hook, resumed_at] : {std::pair{"batch_end", "at epoch 1 batch 1"},
                                           std::pair{"val_batch_end", "at epoch 2 batch 0"}}) {
        DYNAMIC_SECTION("resumed after Ctrl-C in " << hook << ", from the checkpoint saved on interrupt") {
            const fs::path saved = dir.path() / "e";
            auto first = dir.write("first.toml",
                                   dropout_config(4, checkpoint_table(saved, "save_on_interrupt = true\n") +
                                                         "\n[plugins.test_thrower]\nhook = \"" + hook +
                                                         "\"\nhow = \"sigint\"\n"));
            auto stopped = run_trainhost({"--config", first.string(),
                                          "--plugins=" + test_support::test_plugin("test_thrower") + ",checkpoint"});
            REQUIRE(stopped.exit_code == 128 + 2);
            CHECK_THAT(stopped.out, Contains("checkpoint: saved " + (saved / "last.safetensors").string() +
                                             " on interrupt; continue with --resume last"));
            auto rest = run_trainhost({"--config", first.string(), "--resume", "last", "--verbose", "--report",
                                       (dir.path() / "rest.json").string()});
            REQUIRE(rest.exit_code == 0);
            CHECK_THAT(rest.out, Contains(resumed_at));
            for (const char* prefix : {"param/", "optimizer/", "rng/"})
                check_same_tensors(dir.path() / "a" / "last.safetensors", saved / "last.safetensors", prefix);
            check_same_epoch_metrics(dir.path() / "a.json", dir.path() / "rest.json");
        }
    }
    SECTION("resumed from a save at an epoch's last step: nothing left to train in it, its metrics kept") {
        auto first = dir.write("first.toml", dropout_config(1, checkpoint_table(dir.path() / "l", "every_n_train_steps = 2\n")));
        REQUIRE(run_trainhost({"--config", first.string()}).exit_code == 0);  // saved after epoch 1's last batch
        auto resumed = dir.write("resumed.toml", dropout_config(4, checkpoint_table(dir.path() / "m")));
        auto rest = run_trainhost({"--config", resumed.string(), "--verbose", "--report", (dir.path() / "rest.json").string(),
                                   "--resume", (dir.path() / "l" / "last.safetensors").string()});
        REQUIRE(rest.exit_code == 0);
        CHECK_THAT(rest.out, Contains("at epoch 1 batch 2"));
        check_same_tensors(dir.path() / "a" / "last.safetensors", dir.path() / "m" / "last.safetensors", "param/");
        check_same_epoch_metrics(dir.path() / "a.json", dir.path() / "rest.json");
    }
    SECTION("weights_only checkpoints still save a resumable file on interrupt") {
        const fs::path saved = dir.path() / "w";
        auto first = dir.write("first.toml", dropout_config(4, checkpoint_table(saved, "save_on_interrupt = true\n"
                                                                                       "weights_only = true\n") +
                                                                  "\n[plugins.test_thrower]\nhook = \"batch_end\"\n"
                                                                  "how = \"sigint\"\n"));
        REQUIRE(run_trainhost({"--config", first.string(),
                               "--plugins=" + test_support::test_plugin("test_thrower") + ",checkpoint"})
                    .exit_code == 128 + 2);
        const auto data = trainhost::checkpoint::read_checkpoint(saved / "last.safetensors");
        CHECK(*data.meta("weights_only") == "0");
        CHECK(run_trainhost({"--config", first.string(), "--resume", "last"}).exit_code == 0);
    }
}

TEST_CASE("a resume within an epoch in another batch_size, shuffle, seed or samples is refused, as it would train "
          "other samples",
          "[checkpoint]") {
    TempDir dir;
    const fs::path saved = dir.path() / "c";
    // 30 training samples in batches of 16: the save after step 1 is within epoch 1.
    const std::string text = tiny_config(2, checkpoint_table(saved, "every_n_train_steps = 1\n"));
    REQUIRE(run_trainhost({"--config", dir.write("first.toml", text).string(), "--max-steps", "1"}).exit_code == 0);
    const std::string last = (saved / "last.safetensors").string();
    const auto resumed_with = [&](const std::string& from, const std::string& to) {
        std::string changed = text;
        changed.replace(changed.find(from), from.size(), to);
        return run_trainhost({"--config", dir.write("resumed.toml", changed).string(), "--resume", last});
    };
    const std::string remaining = "the epoch's remaining samples would not be those the saved run had left";
    const auto refused = [&](const std::string& from, const std::string& to, const std::string& why,
                             const std::string& resume_with) {
        INFO(to);
        auto run = resumed_with(from, to);
        CHECK(run.exit_code == 1);
        CHECK(run.err == "error: --resume " + last + ": saved within epoch 1 with " + why + ": " + remaining +
                             " (resume with the saved " + resume_with + ", or from a save at an epoch's end)\n");
    };
    refused("batch_size = 16", "batch_size = 8", "[data] batch_size = 16; this run's is 8", "value");
    refused("batch_size = 16", "batch_size = 16\nshuffle = false", "[data] shuffle = true; this run's is false",
            "value");
    // Another seed orders the epoch otherwise; other samples are others whatever the order.
    refused("seed = 7", "seed = 8", "seed = 7; this run's is 8", "value");
    refused("samples = 40", "samples = 44",
            "other training samples than this run's (the seed, [data] path, limit or validation_fraction, or the "
            "files changed)",
            "data");
    CHECK(resumed_with("batch_size = 16", "batch_size = 16").exit_code == 0);
    // Saved at the epoch's last batch: none of its samples are left, so another seed only warns.
    REQUIRE(run_trainhost({"--config", dir.write("first.toml", text).string(), "--max-steps", "2"}).exit_code == 0);
    REQUIRE(*trainhost::checkpoint::read_checkpoint(last).meta("trainer.epoch_complete") == "0");
    auto run = resumed_with("seed = 7", "seed = 8");
    CHECK(run.exit_code == 0);
    CHECK_THAT(run.err, Contains("saved with seed 7, resuming with seed 8"));
}

TEST_CASE("a checkpoint that --weights cannot read is named with the option", "[checkpoint]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(1)).string();
    const auto notes = dir.write("notes.txt", "these are not tensors\n");
    auto run = run_trainhost({"--config", config, "--weights", notes.string()});
    CHECK(run.exit_code == 1);
    CHECK_THAT(run.err, StartsWith("error: --weights " + notes.string() + ": not a valid trainhost checkpoint: header "
                                   "size "));
    CHECK_THAT(run.out, !Contains("fit 1/1"));  // read before any fit
    const auto missing = (dir.path() / "nope.safetensors").string();
    run = run_trainhost({"--config", config, "--weights", missing});
    CHECK(run.exit_code == 1);
    CHECK(run.err == "error: --weights " + missing + ": cannot open checkpoint: No such file or directory\n");
}

TEST_CASE("a corrupt, truncated or foreign checkpoint is refused with a clear message", "[checkpoint]") {
    TempDir dir;
    const auto ckpt = dir.path() / "ckpt";
    auto config = dir.write("run.toml", tiny_config(1, checkpoint_table(ckpt)));
    REQUIRE(run_trainhost({"--config", config.string()}).exit_code == 0);
    const auto good = ckpt / "last.safetensors";
    const std::string bytes = test_support::read_file(good);
    auto resume_from = [&](const std::string& name, const std::string& contents) {
        auto file = dir.write(name, contents);
        return run_trainhost({"--config", config.string(), "--resume", file.string()});
    };
    const auto refusal = [&](const std::string& name, const std::string& why) {
        return "error: --resume " + (dir.path() / name).string() + ": not a valid trainhost checkpoint: " + why + "\n";
    };
    // The first 8 bytes: the header's size, little-endian.
    const auto header_size = [](const std::string& file) {
        std::uint64_t size = 0;
        for (int i = 0; i < 8; ++i) size |= std::uint64_t{static_cast<unsigned char>(file[i])} << (8 * i);
        return size;
    };
    const std::string stored_crc =
        nlohmann::json::parse(bytes.substr(8, header_size(bytes)))["__metadata__"]["crc32"].get<std::string>();
    std::string flipped = bytes;
    flipped[flipped.size() - 5] ^= 0x40;
    auto corrupt = resume_from("corrupt.safetensors", flipped);
    CHECK(corrupt.exit_code == 1);
    CHECK_THAT(corrupt.err, StartsWith("error: --resume " + (dir.path() / "corrupt.safetensors").string() +
                                       ": not a valid trainhost checkpoint: checksum mismatch: stored crc32 " +
                                       stored_crc + ", data has ") &&
                                EndsWith(" (corrupt file)\n"));
    const std::string half = bytes.substr(0, bytes.size() / 2);
    REQUIRE(header_size(half) > half.size() - 8);  // the tiny model's header is most of the file
    auto truncated = resume_from("truncated.safetensors", half);
    CHECK(truncated.exit_code == 1);
    CHECK(truncated.err == refusal("truncated.safetensors", "header size " + std::to_string(header_size(half)) +
                                                                " does not fit in a file of " +
                                                                std::to_string(half.size()) + " bytes (truncated?)"));
    const std::string notes = "these are not tensors\n";
    auto foreign = resume_from("notes.txt", notes);
    CHECK(foreign.exit_code == 1);
    CHECK(foreign.err == refusal("notes.txt", "header size " + std::to_string(header_size(notes)) +
                                                  " does not fit in a file of 22 bytes (truncated?)"));
    // A header size past the limit in a file that holds it (sparse: no disk taken).
    const auto huge = dir.path() / "huge.safetensors";
    {
        std::ofstream out(huge, std::ios::binary);
        const std::uint64_t size = std::uint64_t{150} << 20U;
        for (int i = 0; i < 8; ++i) out.put(static_cast<char>((size >> (8 * i)) & 0xffU));
    }
    fs::resize_file(huge, std::uint64_t{200} << 20U);
    auto oversized = run_trainhost({"--config", config.string(), "--resume", huge.string()});
    CHECK(oversized.exit_code == 1);
    CHECK(oversized.err == refusal("huge.safetensors", "header size 157286400 is over the 100 MiB a checkpoint's header "
                                                       "takes at most (a damaged or forged file)"));
    auto missing = run_trainhost({"--config", config.string(), "--resume", (dir.path() / "nope.safetensors").string()});
    CHECK(missing.exit_code == 1);
    CHECK_THAT(missing.err, Contains("nope.safetensors: cannot open checkpoint"));
    auto no_last = run_trainhost({"--config", dir.write("plain.toml", tiny_config(1)).string(), "--resume", "last"});
    CHECK(no_last.exit_code == 1);
    CHECK_THAT(no_last.err, Contains("--resume last: there is no checkpoints/last.safetensors"));
}

TEST_CASE("checkpoint I/O errors surface", "[checkpoint]") {
    TempDir dir;
    auto blocker = dir.write("file", "a regular file where a directory should be\n");
    auto config = dir.write("run.toml", tiny_config(1, checkpoint_table(blocker / "sub")));
    auto run = run_trainhost({"--config", config.string()});
    CHECK(run.exit_code == 4);
    CHECK_THAT(run.err, Contains("plugin 'checkpoint' failed in epoch_end") && Contains("cannot create directory"));
}

TEST_CASE("early_stopping options and its state across a resume", "[checkpoint][early_stopping]") {
    TempDir dir;
    SECTION("stopping_threshold and divergence_threshold") {
        auto reached = dir.write("a.toml", tiny_config(5, "\n[plugins.early_stopping]\nstopping_threshold = 100.0\n"));
        auto run = run_trainhost({"--config", reached.string(), "--plugins=early_stopping"});
        REQUIRE(run.exit_code == 0);
        CHECK_THAT(run.out, Contains("fit 1/1: 1 epoch") && Contains("reached stopping_threshold 100"));
        auto diverged = dir.write("b.toml", tiny_config(5, "\n[plugins.early_stopping]\ndivergence_threshold = 0.0001\n"));
        run = run_trainhost({"--config", diverged.string(), "--plugins=early_stopping"});
        REQUIRE(run.exit_code == 0);
        CHECK_THAT(run.out, Contains("fit 1/1: 1 epoch") && Contains("diverged past 0.0001"));
    }
    SECTION("check_finite stops on NaN; mode max") {
        auto nan = dir.write("c.toml", tiny_config(5, "\n[plugins.test_recorder]\nnan_metric = true\n"
                                                      "[plugins.early_stopping]\nmonitor = \"recorder.value\"\n"));
        auto run = run_trainhost({"--config", nan.string(),
                                  "--plugins=" + test_support::test_plugin("test_recorder") + ",early_stopping"});
        REQUIRE(run.exit_code == 0);
        CHECK_THAT(run.out, Contains("fit 1/1: 1 epoch") && Contains("recorder.value = nan is not finite"));
        // val_loss falls here, so watching it with mode max sees no improvement after the first epoch.
        auto max = dir.write("d.toml", tiny_config(6, "\n[plugins.early_stopping]\nmode = \"max\"\npatience = 2\n"));
        run = run_trainhost({"--config", max.string(), "--plugins=early_stopping"});
        REQUIRE(run.exit_code == 0);
        CHECK_THAT(run.out, Contains("fit 1/1: 3 epochs"));
    }
    SECTION("a resumed run that had already met the stop condition stops at once, with patience 0 too") {
        for (const int patience : {1, 0}) {
            INFO("patience = " << patience);
            const std::string name = "ck" + std::to_string(patience);
            std::string text = tiny_config(6, "\n[plugins.early_stopping]\npatience = " + std::to_string(patience) +
                                                  "\n" + checkpoint_table(dir.path() / name));
            text.replace(text.find("lr = 0.01"), 9, "lr = 0.0");
            auto config = dir.write(name + ".toml", text);
            auto first = run_trainhost({"--config", config.string(), "--plugins=early_stopping,checkpoint"});
            REQUIRE(first.exit_code == 0);
            CHECK_THAT(first.out, Contains("fit 1/1: 2 epochs"));
            auto resumed =
                run_trainhost({"--config", config.string(), "--plugins=early_stopping,checkpoint", "--resume", "last"});
            REQUIRE(resumed.exit_code == 0);
            CHECK_THAT(resumed.out,
                       Contains("fit 1/1: 0 epochs") && Contains("had already not improved for 1 epoch(s) when saved"));
        }
    }
    SECTION("a stop before any value was a best says so, naming no best epoch") {
        auto config = dir.write("f.toml", tiny_config(5, "\n[plugins.test_recorder]\nvalues = \"nan\"\n"
                                                         "[plugins.early_stopping]\nmonitor = \"recorder.value\"\n"
                                                         "check_finite = false\npatience = 2\n"));
        auto run = run_trainhost({"--config", config.string(),
                                  "--plugins=" + test_support::test_plugin("test_recorder") + ",early_stopping"});
        REQUIRE(run.exit_code == 0);
        CHECK_THAT(run.out, Contains("fit 1/1: 2 epochs") &&
                                Contains("(stopped by early_stopping: recorder.value did not improve by more than 0 for "
                                         "2 epoch(s); no value was a best yet)"));
    }
}

TEST_CASE("a well-formed checkpoint whose tensors do not fit the model is refused", "[checkpoint]") {
    TempDir dir;
    const auto ckpt = dir.path() / "ckpt";
    auto config = dir.write("run.toml", tiny_config(1, checkpoint_table(ckpt)));
    REQUIRE(run_trainhost({"--config", config.string()}).exit_code == 0);
    auto data = trainhost::checkpoint::read_checkpoint(ckpt / "last.safetensors");
    // Forged, but with a valid checksum: the optimizer state as bytes of another size.
    for (auto& tensor : data.tensors)
        if (tensor.name == "optimizer/dense0.weight/first") {
            tensor.dtype = "U8";
            tensor.bytes.resize(tensor.bytes.size() - 1);
            tensor.shape = {tensor.bytes.size()};
        }
    trainhost::checkpoint::write_checkpoint(dir.path() / "forged.safetensors", data);
    auto run = run_trainhost({"--config", config.string(), "--resume", (dir.path() / "forged.safetensors").string()});
    CHECK(run.exit_code == 1);
    CHECK_THAT(run.err, Contains("optimizer/dense0.weight/first does not fit parameter dense0.weight"));
}

TEST_CASE("a mid-epoch checkpoint whose running totals or metrics are not numbers or do not fit together is refused",
          "[checkpoint]") {
    TempDir dir;
    const auto ckpt = dir.path() / "ckpt";
    // Saved after the first step: in the middle of epoch 1, so the resume reads the totals.
    auto config = dir.write("run.toml", tiny_config(1, checkpoint_table(ckpt, "every_n_train_steps = 1\nsave_top_k = -1\n")));
    REQUIRE(run_trainhost({"--config", config.string()}).exit_code == 0);
    auto data = trainhost::checkpoint::read_checkpoint(ckpt / "epoch=0-step=1.safetensors");
    REQUIRE(data.metadata.at("trainer.epoch_complete") == "0");
    struct Forgery {
        const char* key;
        const char* value;
        const char* complaint;
        std::string why;  // what a value out of range is judged by
    };
    const std::string loss_sum = data.metadata.at("trainer.epoch_loss_sum");
    for (const Forgery& forgery : {Forgery{"trainer.epoch_loss_sum", "0x1.8p+1junk", "is not a number"},
                                   Forgery{"trainer.epoch_loss_sum", "inf", "is not finite"},
                                   Forgery{"trainer.epoch_correct", "many", "is not a number"},
                                   Forgery{"trainer.epoch_correct", "5junk", "is not a number"},
                                   Forgery{"trainer.epoch_samples", "-1", "is not a number"},
                                   Forgery{"metric/train_loss", "low", "is not a number"},
                                   Forgery{"metric/train_loss", " 0x1p+0", "is not a number"},
                                   Forgery{"metric/train_loss", "1e309", "is not a number"},
                                   // 30 training samples in batches of 16: 2 batches, 16 samples in the first.
                                   Forgery{"trainer.batches_done", "3", "is out of range",
                                           " (an epoch of this run has 2 training batches)"},
                                   Forgery{"trainer.epoch_samples", "17", "is out of range",
                                           " (1 batch of this run holds 16 training samples at most)"},
                                   Forgery{"trainer.epoch_samples", "0", "is out of range",
                                           " (though trainer.epoch_loss_sum, " + loss_sum + ", sums the loss of some)"},
                                   Forgery{"trainer.epoch_correct", "17", "is out of range",
                                           " (more than trainer.epoch_samples, 16)"}}) {
        DYNAMIC_SECTION(forgery.key << " = " << forgery.value) {
            auto forged = data;
            forged.metadata[forgery.key] = forgery.value;
            trainhost::checkpoint::write_checkpoint(dir.path() / "forged.safetensors", forged);
            auto run = run_trainhost({"--config", config.string(), "--resume", (dir.path() / "forged.safetensors").string()});
            CHECK(run.exit_code == 1);
            CHECK_THAT(run.err, Contains(std::string("checkpoint '") + forgery.key + "' " + forgery.complaint + ": " +
                                         forgery.value + forgery.why + "\n"));
        }
    }
    for (const auto& [key, complaint] : std::vector<std::pair<std::string, std::string>>{
             {"metric/", "checkpoint metadata 'metric/' names no metric: "},
             {"metric/a\x01" "b", "not a valid trainhost checkpoint: header holds 'metric/a\\u0001b', with a control character\n"}}) {
        DYNAMIC_SECTION("a metric named '" << key << "'") {
            auto forged = data;
            forged.metadata[key] = "0x1p+0";
            trainhost::checkpoint::write_checkpoint(dir.path() / "forged.safetensors", forged);
            auto run = run_trainhost({"--config", config.string(), "--resume", (dir.path() / "forged.safetensors").string()});
            CHECK(run.exit_code == 1);
            CHECK_THAT(run.err, Contains(complaint));
        }
    }
}

TEST_CASE("a resume with another optimizer or another model is refused naming both", "[checkpoint]") {
    TempDir dir;
    const auto ckpt = dir.path() / "ckpt";
    const std::string text = tiny_config(1, checkpoint_table(ckpt));
    REQUIRE(run_trainhost({"--config", dir.write("run.toml", text).string()}).exit_code == 0);
    const std::string last = (ckpt / "last.safetensors").string();
    std::string sgd = text;
    sgd.replace(sgd.find("type = \"adam\""), 13, "type = \"sgd\"\nmomentum = 0.9");
    auto run = run_trainhost({"--config", dir.write("sgd.toml", sgd).string(), "--resume", last});
    CHECK(run.exit_code == 1);
    CHECK_THAT(run.err, Contains("last.safetensors: saved by optimizer 'adam', this run configures 'sgd with momentum': "
                                 "its state (Adam's two moments) cannot become a momentum buffer"));
    // Adam and AdamW keep the same moments: a switch between them resumes.
    std::string adamw = text;
    adamw.replace(adamw.find("type = \"adam\""), 13, "type = \"adamw\"");
    run = run_trainhost({"--config", dir.write("adamw.toml", adamw).string(), "--resume", last});
    CHECK(run.exit_code == 0);
    std::string wider = text;
    wider.replace(wider.find("units = 4"), 9, "units = 5");
    run = run_trainhost({"--config", dir.write("wider.toml", wider).string(), "--resume", last});
    CHECK(run.exit_code == 1);
    CHECK_THAT(run.err, Contains("last.safetensors: parameter dense0.weight is F32 [4, 8] in the checkpoint, the "
                                 "model's is F32 [5, 8]"));
    // A deeper model's checkpoint holds every parameter of a shallower one by name and
    // shape: its extra layer is what gives it away, for --resume and --weights alike.
    const std::string layers = "layers = [ { type = \"dense\", units = 4 }, { type = \"tanh\" }, { type = \"dense\", units = 8 } ]";
    std::string deeper = text;
    deeper.replace(deeper.find(layers), layers.size(),
                   "layers = [ { type = \"dense\", units = 8 }, { type = \"tanh\" }, { type = \"dense\", units = 8 }, "
                   "{ type = \"tanh\" }, { type = \"dense\", units = 8 } ]");
    const auto deeper_dir = dir.path() / "deeper";
    deeper.replace(deeper.find(ckpt.string()), ckpt.string().size(), deeper_dir.string());
    REQUIRE(run_trainhost({"--config", dir.write("deeper.toml", deeper).string()}).exit_code == 0);
    std::string shallower = text;
    shallower.replace(shallower.find(layers), layers.size(), "layers = [ { type = \"dense\", units = 8 } ]");
    const std::string shallower_config = dir.write("shallower.toml", shallower).string();
    for (const char* flag : {"--resume", "--weights"}) {
        INFO(flag);
        run = run_trainhost({"--config", shallower_config, flag, (deeper_dir / "last.safetensors").string()});
        CHECK(run.exit_code == 1);
        CHECK_THAT(run.err, Contains("last.safetensors: the checkpoint has 4 parameter(s) this model lacks "
                                     "(dense1.bias, ...): was it saved from another model?"));
    }
}

TEST_CASE("a resume whose epochs are all done says there is nothing to train", "[checkpoint][resume]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(2, checkpoint_table(dir.path() / "ckpt")));
    REQUIRE(run_trainhost({"--config", config.string()}).exit_code == 0);
    const auto report = dir.path() / "r.json";
    auto run = run_trainhost({"--config", config.string(), "--resume", "last", "--report", report.string()});
    CHECK(run.exit_code == 0);
    CHECK_THAT(run.out, Contains("its 2 epochs already reach the run's 2; nothing to train (raise --epochs to train on)") &&
                            Contains("fit 1/1: 0 epochs"));
    // The saved metrics come back, but not the saving process's throughput: nothing trained here.
    const auto final_metrics = nlohmann::json::parse(test_support::read_file(report))["fits"][0]["final_metrics"];
    CHECK(final_metrics.contains("val_loss"));
    CHECK_FALSE(final_metrics.contains("samples_per_second"));
    // From a run of one epoch, resumed with one.
    auto one = dir.write("one.toml", tiny_config(1, checkpoint_table(dir.path() / "one")));
    REQUIRE(run_trainhost({"--config", one.string()}).exit_code == 0);
    run = run_trainhost({"--config", one.string(), "--resume", "last"});
    CHECK(run.exit_code == 0);
    CHECK_THAT(run.out, Contains("its 1 epoch already reaches the run's 1; nothing to train (raise --epochs to train "
                                 "on)\n"));
}

TEST_CASE("a checkpoint with a non-finite weight is refused and state for an absent plugin is warned of", "[checkpoint]") {
    TempDir dir;
    const auto ckpt = dir.path() / "ckpt";
    auto config = dir.write("run.toml", tiny_config(1, checkpoint_table(ckpt)));
    REQUIRE(run_trainhost({"--config", config.string(), "--plugins=early_stopping,checkpoint"}).exit_code == 0);
    auto data = trainhost::checkpoint::read_checkpoint(ckpt / "last.safetensors");
    for (auto& tensor : data.tensors)
        if (tensor.name == "param/dense1.bias") {
            const float nan = std::numeric_limits<float>::quiet_NaN();
            std::memcpy(tensor.bytes.data() + 3 * sizeof(float), &nan, sizeof nan);
        }
    trainhost::checkpoint::write_checkpoint(dir.path() / "nan.safetensors", data);
    auto run = run_trainhost({"--config", config.string(), "--resume", (dir.path() / "nan.safetensors").string()});
    CHECK(run.exit_code == 1);
    CHECK_THAT(run.err, Contains("nan.safetensors: parameter dense1.bias holds a non-finite value (nan at index 3)"));
    // Saved with early_stopping, resumed without it: the run goes on and says what it drops.
    auto two = dir.write("two.toml", tiny_config(2, checkpoint_table(ckpt)));
    run = run_trainhost({"--config", two.string(), "--plugins=checkpoint", "--resume", "last"});
    CHECK(run.exit_code == 0);
    CHECK_THAT(run.err, Contains("last.safetensors: it holds state for plugin 'early_stopping', which is not loaded; "
                                 "that state is dropped"));
    // State for a loaded plugin that keeps none (another build of it, say) is dropped as loudly.
    auto stateless = trainhost::checkpoint::read_checkpoint(ckpt / "last.safetensors");
    stateless.tensors.push_back({"plugin/progress", "U8", {4}, {1, 2, 3, 4}});
    stateless.metadata["plugin/progress/state_version"] = "1";
    trainhost::checkpoint::write_checkpoint(dir.path() / "stateless.safetensors", stateless);
    run = run_trainhost({"--config", two.string(), "--plugins=checkpoint,progress", "--resume",
                         (dir.path() / "stateless.safetensors").string()});
    CHECK(run.exit_code == 0);
    CHECK_THAT(run.err, Contains("stateless.safetensors: it holds state for plugin 'progress', which keeps none in this "
                                 "build; that state is dropped"));
    auto directory = run_trainhost({"--config", config.string(), "--resume", dir.path().string()});
    CHECK(directory.exit_code == 1);
    CHECK_THAT(directory.err, Contains(dir.path().string() + ": is a directory, not a checkpoint file"));
}

TEST_CASE("each fit starts from a checkpoint's parameters alone with --weights and predicts with them", "[checkpoint][weights]") {
    TempDir dir;
    const auto ckpt = dir.path() / "ckpt";
    auto trained = dir.write("trained.toml", tiny_config(3, checkpoint_table(ckpt, "weights_only = true\n")));
    REQUIRE(run_trainhost({"--config", trained.string(), "--report", (dir.path() / "a.json").string()}).exit_code == 0);
    const std::string weights = (ckpt / "last.safetensors").string();
    // Learning rate 0: a fit from those weights validates exactly as the trained run's last epoch did.
    std::string frozen_text = tiny_config(1, "");
    frozen_text.replace(frozen_text.find("lr = 0.01"), 9, "lr = 0.0");
    auto frozen = dir.write("frozen.toml", frozen_text);
    auto run = run_trainhost({"--config", frozen.string(), "--plugins=progress", "--weights", weights, "--repeat", "2",
                              "--verbose", "--report", (dir.path() / "b.json").string()});
    INFO(run.out << run.err);
    REQUIRE(run.exit_code == 0);
    CHECK_THAT(run.out, Contains("parameters from " + weights));
    const auto a = nlohmann::json::parse(test_support::read_file(dir.path() / "a.json"))["fits"][0]["epochs"];
    const auto b = nlohmann::json::parse(test_support::read_file(dir.path() / "b.json"))["fits"];
    REQUIRE(b.size() == 2);
    for (const auto& fit : b)  // every fit starts from them
        CHECK(fit["epochs"][0]["metrics"]["val_loss"].get<double>() == a[2]["metrics"]["val_loss"].get<double>());
    auto predict = dir.write("predict.toml", "mode = \"predict\"\n" + tiny_config(1, "\n[predict]\npasses = 3\n"));
    run = run_trainhost({"--config", predict.string(), "--plugins=progress", "--weights", weights, "--verbose"});
    CHECK(run.exit_code == 0);
    CHECK_THAT(run.out, Contains("fit 1/1: 3 predict passes\n"));
    CHECK_THAT(run.out, Contains("parameters from " + weights));
    run = run_trainhost({"--config", predict.string(), "--plugins=progress", "--resume", weights});
    CHECK(run.exit_code == 1);
    CHECK_THAT(run.err, Contains("--resume: predict mode runs no training to resume (--weights PATH predicts with a "
                                 "checkpoint's parameters)"));
    run = run_trainhost({"--config", trained.string(), "--resume", weights});
    CHECK(run.exit_code == 1);
    CHECK_THAT(run.err, Contains("a weights-only checkpoint cannot resume training (it has no optimizer state; "
                                 "--weights starts a run from its parameters)"));
    run = run_trainhost({"--config", trained.string(), "--resume", weights, "--weights", weights});
    CHECK(run.exit_code == 1);
    CHECK_THAT(run.err, Contains("--resume and --weights: give one"));
    std::string wider = tiny_config(1, "");
    wider.replace(wider.find("units = 4"), 9, "units = 5");
    run = run_trainhost({"--config", dir.write("wider.toml", wider).string(), "--plugins=progress", "--weights", weights});
    CHECK(run.exit_code == 1);
    CHECK_THAT(run.err, Contains("parameter dense0.weight is F32 [4, 8] in the checkpoint, the model's is F32 [5, 8]"));
}

TEST_CASE("a plugin state that fails to save fails the fit and leaves no checkpoint", "[checkpoint][state]") {
    TempDir dir;
    const auto ckpt = dir.path() / "ckpt";
    auto config = dir.write("run.toml", tiny_config(2, checkpoint_table(ckpt) + "\n[plugins.test_stateful]\nfail = \"save\"\n"));
    auto run = run_trainhost({"--config", config.string(),
                              "--plugins=" + test_support::test_plugin("test_stateful") + ",checkpoint"});
    CHECK(run.exit_code == 4);
    CHECK_THAT(run.err, Contains("error: plugin 'checkpoint' failed in epoch_end: ") &&
                            Contains("plugin 'test_stateful' failed to save its state: no room for the state of "
                                     "test_stateful\n"));
    CHECK_THAT(run.out, Contains("fit 1/1: 0 epochs"));
    CHECK_THAT(run.last_line(), Contains("resources: clean"));
    CHECK((!fs::exists(ckpt) || files_in(ckpt).empty()));
}

TEST_CASE("a checkpoint that cannot take its place fails the fit, naming both files, and leaves no stray file",
          "[checkpoint]") {
    TempDir dir;
    const auto ckpt = dir.path() / "ckpt";
    // A directory where save_last writes: the rename over it fails, after the whole file was written.
    fs::create_directories(ckpt / "last.safetensors");
    (void)dir.write("ckpt/last.safetensors/kept", "not touched");
    auto config = dir.write("run.toml", tiny_config(1, checkpoint_table(ckpt)));
    auto run = run_trainhost({"--config", config.string()});
    CHECK(run.exit_code == 4);
    const std::string last = (ckpt / "last.safetensors").string();
    CHECK_THAT(run.err, Contains("error: plugin 'checkpoint' failed in epoch_end: save_checkpoint: cannot rename " +
                                 last + ".tmp") &&
                            Contains(" to " + last + ": Is a directory\n"));
    CHECK(test_support::read_file(ckpt / "last.safetensors" / "kept") == "not touched");
    for (const auto& entry : fs::directory_iterator(ckpt))
        CHECK_THAT(entry.path().filename().string(), !Contains(".tmp"));
}

TEST_CASE("a resume is refused when a plugin's saved state is refused or of another version or missing", "[checkpoint][state]") {
    TempDir dir;
    const auto ckpt = dir.path() / "ckpt";
    const std::string plugins = "--plugins=" + test_support::test_plugin("test_stateful") + ",checkpoint";
    auto config = dir.write("run.toml", tiny_config(2, checkpoint_table(ckpt)));
    REQUIRE(run_trainhost({"--config", config.string(), plugins, "--epochs", "1"}).exit_code == 0);
    const auto last = ckpt / "last.safetensors";
    const auto data = trainhost::checkpoint::read_checkpoint(last);
    REQUIRE(data.meta("plugin/test_stateful/state_version") != nullptr);
    SECTION("load_state refuses") {
        auto refusing = dir.write("refusing.toml", tiny_config(2, checkpoint_table(ckpt) + "\n[plugins.test_stateful]\n"
                                                                                        "fail = \"load\"\n"));
        auto run = run_trainhost({"--config", refusing.string(), plugins, "--resume", "last"});
        CHECK(run.exit_code == 1);
        CHECK_THAT(run.err, Contains("error: --resume " + last.string() +
                                     ": plugin 'test_stateful' refused its saved state: saved "
                                     "after 1 epoch(s), too old\n"));
        CHECK_THAT(run.out, Contains("fit 1/1: 0 epochs"));
    }
    SECTION("a state of another version") {
        auto forged = data;
        forged.metadata["plugin/test_stateful/state_version"] = "2";
        const auto file = dir.path() / "forged.safetensors";
        trainhost::checkpoint::write_checkpoint(file, forged);
        auto run = run_trainhost({"--config", config.string(), plugins, "--resume", file.string()});
        CHECK(run.exit_code == 1);
        CHECK_THAT(run.err, Contains("error: --resume " + file.string() + ": plugin 'test_stateful' saved state version 2, this "
                                     "build of it reads version 1\n"));
    }
    SECTION("a state without its version") {
        auto forged = data;
        forged.metadata.erase("plugin/test_stateful/state_version");
        const auto file = dir.path() / "forged.safetensors";
        trainhost::checkpoint::write_checkpoint(file, forged);
        auto run = run_trainhost({"--config", config.string(), plugins, "--resume", file.string()});
        CHECK(run.exit_code == 1);
        CHECK_THAT(run.err, Contains("error: --resume " + file.string() + ": checkpoint lacks 'plugin/test_stateful/state_version'\n"));
    }
    SECTION("no state at all: the plugin starts fresh with a warning") {
        auto forged = data;
        forged.tensors.erase(std::remove_if(forged.tensors.begin(), forged.tensors.end(),
                                            [](const auto& t) { return t.name == "plugin/test_stateful"; }),
                             forged.tensors.end());
        const auto file = dir.path() / "forged.safetensors";
        trainhost::checkpoint::write_checkpoint(file, forged);
        auto run = run_trainhost({"--config", config.string(), plugins, "--resume", file.string()});
        CHECK(run.exit_code == 0);
        CHECK_THAT(run.err, Contains("warning: --resume " + file.string() + ": no state for plugin 'test_stateful'; it starts fresh\n"));
    }
}

TEST_CASE("a checkpoint without a trainer counter or a random generator state is refused", "[checkpoint]") {
    TempDir dir;
    const auto ckpt = dir.path() / "ckpt";
    auto config = dir.write("run.toml", dropout_config(2, checkpoint_table(ckpt)));
    REQUIRE(run_trainhost({"--config", config.string(), "--epochs", "1"}).exit_code == 0);
    const auto data = trainhost::checkpoint::read_checkpoint(ckpt / "last.safetensors");
    const auto file = dir.path() / "forged.safetensors";
    for (const char* key : {"trainer.epoch", "trainer.epoch_complete", "trainer.global_step", "trainer.seed"}) {
        DYNAMIC_SECTION("without " << key) {
            auto forged = data;
            REQUIRE(forged.metadata.erase(key) == 1);
            trainhost::checkpoint::write_checkpoint(file, forged);
            auto run = run_trainhost({"--config", config.string(), "--resume", file.string()});
            CHECK(run.exit_code == 1);
            CHECK_THAT(run.err, Contains("error: --resume " + file.string() + ": checkpoint lacks '" + key + "'\n"));
        }
    }
    SECTION("without the dropout layer's rng/ tensor") {
        auto forged = data;
        std::string name;
        for (const auto& tensor : forged.tensors)
            if (tensor.name.rfind("rng/", 0) == 0) name = tensor.name;
        REQUIRE(!name.empty());
        forged.tensors.erase(std::remove_if(forged.tensors.begin(), forged.tensors.end(),
                                            [&](const auto& t) { return t.name == name; }),
                             forged.tensors.end());
        trainhost::checkpoint::write_checkpoint(file, forged);
        auto run = run_trainhost({"--config", config.string(), "--resume", file.string()});
        CHECK(run.exit_code == 1);
        CHECK_THAT(run.err, Contains("error: --resume " + file.string() + ": no random generator state for " + name.substr(4) + "\n"));
    }
}

TEST_CASE("a resume on other training or validation samples says so", "[checkpoint][resume]") {
    TempDir dir;
    const auto ckpt = dir.path() / "ckpt";
    const auto config = [&](const std::string& name, const std::string& fraction) {
        std::string text = tiny_config(2, checkpoint_table(ckpt));
        text.replace(text.find("validation_fraction = 0.25"), 26, "validation_fraction = " + fraction);
        return dir.write(name, text).string();
    };
    REQUIRE(run_trainhost({"--config", config("run.toml", "0.25"), "--epochs", "1"}).exit_code == 0);
    const std::string last = (ckpt / "last.safetensors").string();
    const auto saved = trainhost::checkpoint::read_checkpoint(last);
    REQUIRE(saved.meta("data.train_crc32") != nullptr);
    REQUIRE(saved.meta("data.validation_crc32") != nullptr);
    const std::string differ = "warning: --resume " + last + ": the ";
    const std::string why = " samples differ from the saved run's (the seed, [data] path, limit or validation_fraction, "
                            "or the files changed)";
    const std::string val_note = ": the saved run's val_* metrics are dropped, and this run's come from other samples "
                                 "than the saved scores early_stopping and checkpoint compare them with\n";
    SECTION("the same samples: no warning") {
        auto run = run_trainhost({"--config", config("same.toml", "0.25"), "--resume", last});
        CHECK(run.exit_code == 0);
        CHECK_THAT(run.err, !Contains("differ"));
    }
    SECTION("another validation_fraction") {
        auto run = run_trainhost({"--config", config("fraction.toml", "0.5"), "--resume", last});
        CHECK(run.exit_code == 0);
        CHECK_THAT(run.err, Contains(differ + "training and validation" + why + val_note));
    }
    SECTION("another seed") {
        auto run = run_trainhost({"--config", config("seed.toml", "0.25"), "--resume", last, "--seed", "8"});
        CHECK(run.exit_code == 0);
        CHECK_THAT(run.err, Contains("warning: --resume " + last + ": saved with seed 7, resuming with seed 8: data order will differ\n") &&
                                Contains(differ + "training and validation" + why + val_note));
    }
    SECTION("no validation split where there was one") {
        auto run = run_trainhost({"--config", config("none.toml", "0.0"), "--resume", last});
        CHECK(run.exit_code == 0);
        CHECK_THAT(run.err, Contains(differ + "training and validation" + why + "\n"));
        CHECK_THAT(run.err, Contains("warning: --resume " + last + ": this run validates nothing (no validation "
                                     "samples): the saved run's val_* metrics are dropped, and a monitor of one finds "
                                     "none, as in a fresh run\n"));
    }
    SECTION("a checkpoint from before the keys is taken as it is") {
        auto older = saved;
        older.metadata.erase("data.train_crc32");
        older.metadata.erase("data.validation_crc32");
        const auto file = dir.path() / "older.safetensors";
        trainhost::checkpoint::write_checkpoint(file, older);
        auto run = run_trainhost({"--config", config("older.toml", "0.5"), "--resume", file.string()});
        CHECK(run.exit_code == 0);
        CHECK_THAT(run.err, !Contains("differ"));
    }
}

// Lightning restores no metric: a monitor of val_loss in a run that validates nothing
// fails (early_stopping) or skips its ranked saves (checkpoint), resumed or not. It used
// to stop the fit and name files by the saved run's last val_loss, for good.
TEST_CASE("a resume that validates nothing drops the saved run's val_* metrics", "[checkpoint][resume]") {
    TempDir dir;
    const auto ckpt = dir.path() / "ckpt";
    const std::string ranked = "\n[plugins.checkpoint]\ndirpath = \"" + ckpt.string() +
                               "\"\nsave_last = true\nmonitor = \"val_loss\"\nsave_top_k = -1\n"
                               "filename = \"{epoch}-{val_loss:.4f}\"\n";
    REQUIRE(run_trainhost({"--config", dir.write("run.toml", tiny_config(1, ranked)).string(), "--plugins=checkpoint"})
                .exit_code == 0);
    const std::string last = (dir.path() / "saved.safetensors").string();
    fs::copy_file(ckpt / "last.safetensors", last);
    REQUIRE(trainhost::checkpoint::read_checkpoint(last).meta("metric/val_loss") != nullptr);
    for (const auto& [what, change] : std::vector<std::pair<std::string, std::string>>{
             {"no validation samples", "validation_fraction = 0.0"}, {"limit_val_batches = 0", "limit_val_batches = 0"}}) {
        DYNAMIC_SECTION(what) {
            std::string text = tiny_config(3, ranked + "[plugins.early_stopping]\npatience = 1\n");
            if (change.starts_with("validation_fraction"))
                text.replace(text.find("validation_fraction = 0.25"), 26, change);
            else
                text.replace(text.find("[data]\n"), 7, "[data]\n" + change + "\n");
            const std::string config = dir.write("resume.toml", text).string();
            const std::string dropped = "warning: --resume " + last + ": this run validates nothing (" + what +
                                        "): the saved run's val_* metrics are dropped";
            // As a fresh run of this config: checkpoint skips its ranked saves...
            auto saving = run_trainhost({"--config", config, "--resume", last, "--plugins=checkpoint"});
            INFO(saving.out << saving.err);
            CHECK(saving.exit_code == 0);
            CHECK_THAT(saving.err, Contains(dropped));
            CHECK_THAT(saving.out, !Contains("val_loss="));
            for (const auto& file : fs::directory_iterator(ckpt)) {
                const std::string name = file.path().filename().string();
                CHECK((name == "last.safetensors" || name.starts_with("epoch=0-")));
            }
            // ...and early_stopping's monitor is not there.
            auto stopping = run_trainhost({"--config", config, "--resume", last, "--plugins=checkpoint,early_stopping"});
            INFO(stopping.out << stopping.err);
            CHECK(stopping.exit_code == 4);
            CHECK_THAT(stopping.err, Contains(dropped) && Contains("monitored metric 'val_loss'"));
        }
    }
}

TEST_CASE("an epoch that trains no batch reports no training metrics, not the last epoch's", "[checkpoint][resume]") {
    SKIP_WITHOUT_FASHION_MNIST("train-images-idx3-ubyte.gz");
    TempDir dir;
    const auto ckpt = dir.path() / "ckpt";
    const auto config = [&](const std::string& name, const std::string& batches) {
        return dir.write(name, "seed = 3\nepochs = 2\n[data]\ndataset = \"fashion_mnist\"\nlimit = 256\nbatch_size = 64\n"
                               "test = false\nlimit_train_batches = " + batches + "\n[model]\nlayers = [ { type = "
                               "\"flatten\" }, { type = \"dense\", units = 10 } ]\n" + checkpoint_table(ckpt)).string();
    };
    REQUIRE(run_trainhost({"--config", config("run.toml", "-1"), "--epochs", "1", "--device", "cpu"}).exit_code == 0);
    const auto report = dir.path() / "r.json";
    auto run = run_trainhost({"--config", config("none.toml", "0"), "--resume", (ckpt / "last.safetensors").string(),
                              "--device", "cpu", "--report", report.string()});
    REQUIRE(run.exit_code == 0);
    const auto epochs = nlohmann::json::parse(test_support::read_file(report))["fits"][0]["epochs"];
    REQUIRE(epochs.size() == 1);
    CHECK_FALSE(epochs[0]["metrics"].contains("train_accuracy"));
    CHECK_FALSE(epochs[0]["metrics"].contains("train_loss"));
    CHECK(epochs[0]["metrics"].contains("val_accuracy"));
}
