// The ownership contract end to end: each of the four real leaks, reproduced by a
// buggy twin plugin, is caught at the first boundary where it exists, naming the
// plugin; the correct versions keep memory flat.
#include "integration/process.hpp"

#include <catch2/catch.hpp>
#include <set>
#include <nlohmann/json.hpp>

using Catch::Matchers::Contains;
using Catch::Matchers::EndsWith;
using Catch::Matchers::StartsWith;
using test_support::run_trainhost;
using test_support::test_plugin;
using test_support::TempDir;
using test_support::tiny_config;

namespace {

nlohmann::json report_of(const TempDir& dir) {
    return nlohmann::json::parse(test_support::read_file(dir.path() / "report.json"));
}

std::vector<std::string> with_report(const TempDir& dir, std::vector<std::string> arguments) {
    arguments.push_back("--report");
    arguments.push_back((dir.path() / "report.json").string());
    return arguments;
}

}  // namespace

TEST_CASE("FluxTraining: state keyed by storage is stranded by the first move", "[contract][failures]") {
    TempDir dir;
    // Keyed by storage, the bug; keyed by ParamId but not attached, the state is still
    // left on the device the model leaves.
    const std::string key = GENERATE(as<std::string>{}, "storage", "param_id");
    INFO("key = " << key);
    auto config = dir.write("run.toml", tiny_config(3, "\n[plugins.togpu]\ntarget = \"cpu:1\"\nwhen = \"every_epoch\"\n"
                                                       "[plugins.test_stale_state]\nkey = \"" + key + "\"\n"));
    auto run = run_trainhost(with_report(dir, {"--config", config.string(),
                                               "--plugins=togpu," + test_plugin("test_stale_state")}));
    CHECK(run.exit_code == 3);
    CHECK_THAT(run.err, Contains("leak: plugin=test_stale_state kind=device_memory") &&
                            Contains("acquired_in=setup fit=0 epoch=0") &&
                            Contains("detected_at=model_move rule=stranded"));
    CHECK_THAT(run.err, Contains("at the model's move from cpu:0 to cpu:1"));
    CHECK(report_of(dir)["fits"][0]["epochs"].empty());  // caught before the first epoch ran
}

TEST_CASE("FluxTraining: state re-keyed at every move piles up and is caught as growth", "[contract][failures]") {
    TempDir dir;
    // The model moves at every epoch start and each move gives its parameters new
    // storage: attached state moves along, but the plugin takes a fresh set for the new
    // keys each epoch. Epoch 1's set is the warm-up (state made late); epoch 2's is growth.
    auto config = dir.write("run.toml", tiny_config(5, "\n[plugins.test_shuttle]\ndevices = \"cpu:1,cpu:0\"\n"
                                                       "[plugins.test_stale_state]\nattach = true\n"));
    auto run = run_trainhost(with_report(dir, {"--config", config.string(), "--plugins=" + test_plugin("test_shuttle") +
                                                                                "," + test_plugin("test_stale_state")}));
    CHECK(run.exit_code == 3);
    CHECK_THAT(run.err, Contains("leak: plugin=test_stale_state kind=device_memory bytes=128 tag=dense0.weight.state "
                                 "scope=fit acquired_in=epoch_start fit=0 epoch=2 step=3") &&
                            Contains("detected_at=epoch_end rule=growth") && !Contains("rule=stranded"));
    CHECK_THAT(run.err, Contains("error: resource contract violated at epoch_end: leak: plugin=test_stale_state"));
    CHECK(report_of(dir)["fits"][0]["epochs"].size() == 2);
}

TEST_CASE("state attached to its ParamId moves with the model and memory stays flat", "[contract][moves]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(4, "\n[plugins.togpu]\ntarget = \"cpu:1\"\nwhen = \"every_epoch\"\n"
                                                       "[plugins.test_stale_state]\nkey = \"param_id\"\nattach = true\n"));
    auto run = run_trainhost(with_report(dir, {"--config", config.string(), "--verbose",
                                               "--plugins=togpu," + test_plugin("test_stale_state")}));
    REQUIRE(run.exit_code == 0);
    CHECK_THAT(run.out, Contains("moved the model from cpu:0 to cpu:1"));
    CHECK_THAT(run.last_line(), StartsWith("resources: clean"));
    const auto epochs = report_of(dir)["fits"][0]["epochs"];
    REQUIRE(epochs.size() == 4);
    for (const auto& epoch : epochs) {
        CHECK(epoch["memory"]["bytes_in_use"] == epochs[0]["memory"]["bytes_in_use"]);
        CHECK(epoch["memory"]["bytes_reserved"] == epochs[0]["memory"]["bytes_reserved"]);
    }
    CHECK(report_of(dir)["fits"][0]["memory_after_teardown"]["bytes_in_use"] == 0);
}

TEST_CASE("under warn a pool that grows every step prints three leak lines and counts the rest", "[contract][failures]") {
    TempDir dir;
    // 4 epochs of 2 steps: every step after the first takes one more fit-scoped buffer.
    auto config = dir.write("run.toml", tiny_config(4, "\n[resources]\non_violation = \"warn\"\n"));
    auto run = run_trainhost(with_report(dir, {"--config", config.string(), "--plugins=" + test_plugin("test_growing_pool")}));
    CHECK(run.exit_code == 0);
    const auto lines = test_support::lines_of(run.err);
    CHECK(std::count_if(lines.begin(), lines.end(), [](const std::string& line) {
              return line.starts_with("leak: plugin=test_growing_pool kind=device_memory");
          }) == 3);
    CHECK_THAT(run.err, Contains("leak: plugin=test_growing_pool rule=growth tag=scratch: 4 more not shown\n"));
    CHECK(report_of(dir)["violations"].size() == 7);  // every one of them in the report
}

TEST_CASE("a grown lease still held at teardown is found again there, and counts once in the verdict",
          "[contract][failures]") {
    TempDir dir;
    // 2 steps: the second step's buffer is growth; both are still held at teardown.
    auto config = dir.write("run.toml", tiny_config(1, "\n[plugins.test_growing_pool]\nbytes = 4096\ncollect = false\n"));
    auto run = run_trainhost(with_report(dir, {"--config", config.string(), "--plugins=" + test_plugin("test_growing_pool")}));
    CHECK(run.exit_code == 3);
    CHECK_THAT(run.err, Contains("detected_at=batch_end rule=growth"));
    CHECK(report_of(dir)["violations"].size() == 3);  // the grown lease twice, each finding listed
    CHECK_THAT(run.last_line(), StartsWith("resources: VIOLATION - 2 leaks, 0 misuses (policy fail): "
                                           "test_growing_pool leaked 8.0 KiB"));
}

TEST_CASE("host calls from a plugin's own thread are refused, touch nothing, and are a wrong_thread misuse",
          "[contract][misuse]") {
    TempDir dir;
    SECTION("three calls from a thread joined inside setup: one misuse, at setup's end") {
        auto config = dir.write("run.toml", tiny_config(1));
        auto run = run_trainhost(with_report(dir, {"--config", config.string(), "--plugins=" + test_plugin("test_thread_caller")}));
        CHECK(run.exit_code == 3);
        CHECK_THAT(run.err, Contains("misuse: plugin=test_thread_caller kind=wrong_thread phase=setup id=0 detail=3 host "
                                     "calls from a thread other than the one that runs its hooks (the first: acquire), "
                                     "refused: the host API serves that thread alone\n"));
        CHECK(run.out.find("from the worker") == std::string::npos);
        CHECK_THAT(run.last_line(), StartsWith("resources: VIOLATION - 0 leaks, 1 misuse (policy fail): "
                                               "test_thread_caller wrong_thread"));
    }
    SECTION("a thread that acquires and releases while the hooks do: refused throughout, the ledger intact") {
        auto config = dir.write("run.toml", tiny_config(3, "\n[plugins.test_thread_caller]\nmode = \"concurrent\"\n"));
        auto run = run_trainhost(with_report(dir, {"--config", config.string(), "--plugins=" + test_plugin("test_thread_caller")}));
        INFO(run.err);
        CHECK(run.exit_code == 3);
        CHECK_THAT(run.err, Contains("kind=wrong_thread"));
        CHECK(run.err.find("kind=wrong_thread phase=") != std::string::npos);
        CHECK(run.err.find("leak:") == std::string::npos);
        CHECK_THAT(run.last_line(), StartsWith("resources: VIOLATION - 0 leaks, "));
        CHECK(report_of(dir)["fits"][0]["memory_after_teardown"]["bytes_in_use"] == 0);
    }
    SECTION("a thread left running by an ended instance: its calls are a misuse before the verdict") {
        auto config = dir.write("run.toml", tiny_config(1, "\n[plugins.test_thread_caller]\nmode = \"detached\"\n"));
        auto run = run_trainhost(with_report(
            dir, {"--config", config.string(), "--plugins=" + test_plugin("test_thread_caller"), "--repeat", "2"}));
        INFO(run.out << run.err);
        CHECK(run.exit_code == 3);
        CHECK_THAT(run.err, Contains("misuse: plugin=test_thread_caller kind=wrong_thread phase=core id=0 detail=3 host "
                                     "calls from a thread other than the one that runs its hooks (the first: acquire), "
                                     "after its instance ended, refused: the host API serves that thread alone\n"));
        CHECK_THAT(run.last_line(), StartsWith("resources: VIOLATION - 0 leaks, 1 misuse (policy fail): "
                                               "test_thread_caller wrong_thread"));
        CHECK(report_of(dir)["fits"].size() == 2);
    }
}

TEST_CASE("moves back and forth carry the optimizer's state: training stays identical and memory flat",
          "[contract][moves]") {
    // SGD with momentum, so that both optimizers have state to carry; and Adam
    // accumulating both batches of an epoch, whose buffers for the sums move too.
    for (const char* optimizer : {"type = \"sgd\"\nmomentum = 0.9", "type = \"adam\"",
                                  "type = \"adam\"\naccumulate_grad_batches = 2"}) {
        DYNAMIC_SECTION(optimizer) {
            TempDir dir;
            std::string text = tiny_config(4);
            text.replace(text.find("type = \"adam\""), 13, optimizer);
            auto stay = dir.write("stay.toml", text);
            auto move = dir.write("move.toml", text + "\n[plugins.test_shuttle]\ndevices = \"cpu:0,cpu:1\"\n");
            auto a = run_trainhost({"--config", stay.string(), "--report", (dir.path() / "a.json").string()});
            auto b = run_trainhost({"--config", move.string(), "--plugins=" + test_plugin("test_shuttle"), "--verbose",
                                    "--report", (dir.path() / "b.json").string()});
            REQUIRE(a.exit_code == 0);
            REQUIRE(b.exit_code == 0);
            // Epoch 1 starts where the model is; each later epoch moves it, after steps.
            std::vector<std::string> moves;
            for (const std::string& line : test_support::lines_of(b.out))
                if (line.starts_with("moved the model")) moves.push_back(line);
            CHECK(moves == std::vector<std::string>{"moved the model from cpu:0 to cpu:1",
                                                    "moved the model from cpu:1 to cpu:0",
                                                    "moved the model from cpu:0 to cpu:1"});
            CHECK_THAT(b.last_line(), StartsWith("resources: clean"));
            auto ja = nlohmann::json::parse(test_support::read_file(dir.path() / "a.json"))["fits"][0];
            auto jb = nlohmann::json::parse(test_support::read_file(dir.path() / "b.json"))["fits"][0];
            REQUIRE(jb["epochs"].size() == 4);
            for (std::size_t epoch = 0; epoch < 4; ++epoch) {
                INFO("epoch " << epoch + 1);
                REQUIRE(jb["epochs"][epoch]["metrics"].contains("val_loss"));
                CHECK(ja["epochs"][epoch]["metrics"]["train_loss"] == jb["epochs"][epoch]["metrics"]["train_loss"]);
                CHECK(ja["epochs"][epoch]["metrics"]["val_loss"] == jb["epochs"][epoch]["metrics"]["val_loss"]);
                CHECK(jb["epochs"][epoch]["memory"]["bytes_in_use"] == ja["epochs"][epoch]["memory"]["bytes_in_use"]);
            }
            CHECK(jb["memory_after_teardown"]["bytes_in_use"] == 0);
        }
    }
}

TEST_CASE("CUDA.jl: a pool that only grows is caught at the second step's end", "[contract][failures]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(2));
    auto run = run_trainhost({"--config", config.string(), "--plugins=" + test_plugin("test_growing_pool")});
    CHECK(run.exit_code == 3);
    CHECK_THAT(run.err, Contains("leak: plugin=test_growing_pool kind=device_memory bytes=65536 tag=scratch scope=fit "
                                 "acquired_in=batch_start fit=0 epoch=0 step=1") &&
                            Contains("detected_at=batch_end rule=growth"));
    // The fit stops where the leak showed, and says so first.
    CHECK_THAT(run.err, Contains("\nerror: resource contract violated at batch_end: leak: plugin=test_growing_pool "
                                 "kind=device_memory bytes=65536 tag=scratch"));
    CHECK_THAT(run.out, Contains("fit 1/1: 0 epochs, ") && Contains(" - failed (exit 3)\n"));
}

TEST_CASE("memory made anew in place of memory freed is level, not growth", "[contract][failures]") {
    // The latest output kept at every step, and a best copy replaced at every epoch's end.
    for (const std::string hook : {"batch_start", "epoch_end", "batch_start,epoch_end"}) {
        DYNAMIC_SECTION(hook) {
            TempDir dir;
            auto config = dir.write("run.toml", tiny_config(3, "\n[plugins.test_growing_pool]\npattern = \"replace\"\n"
                                                               "hook = \"" + hook + "\"\n"));
            auto run = run_trainhost({"--config", config.string(), "--plugins=" + test_plugin("test_growing_pool")});
            INFO(run.err);
            CHECK(run.exit_code == 0);
            CHECK_THAT(run.last_line(), StartsWith("resources: clean"));
        }
    }
}

TEST_CASE("a pool grown a step at a time by promoting spares into the fit's scope is caught at the second step's end",
          "[contract][failures]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(2, "\n[plugins.test_growing_pool]\npattern = \"spares\"\n"));
    auto run = run_trainhost({"--config", config.string(), "--plugins=" + test_plugin("test_growing_pool")});
    CHECK(run.exit_code == 3);
    CHECK_THAT(run.err, Contains("leak: plugin=test_growing_pool kind=device_memory bytes=65536 tag=spare scope=fit "
                                 "acquired_in=epoch_start fit=0 epoch=0 step=0") &&
                            Contains("detected_at=batch_end rule=growth"));
}

TEST_CASE("under warn a lease that grows the fit from a step hook is named once, not again at the epoch's end",
          "[contract][failures]") {
    TempDir dir;
    // 3 epochs of 2 steps, each taking an epoch-scoped buffer into the fit's scope: the
    // first step is the warm-up, each of the other 5 grows the pool once.
    auto config = dir.write("run.toml", tiny_config(3, "\n[plugins.test_growing_pool]\npattern = \"promote\"\n"
                                                       "[resources]\non_violation = \"warn\"\n"));
    auto run = run_trainhost(with_report(dir, {"--config", config.string(), "--plugins=" + test_plugin("test_growing_pool")}));
    CHECK(run.exit_code == 0);
    const auto violations = report_of(dir)["violations"];
    CHECK(violations.size() == 5);
    std::set<std::uint64_t> ids;
    for (const auto& violation : violations) {
        CHECK(violation["rule"] == "growth");
        CHECK(violation["detected_at"] == "batch_end");
        ids.insert(violation["id"].get<std::uint64_t>());
    }
    CHECK(ids.size() == 5);
    CHECK_THAT(run.last_line(), Contains("5 leaks") && Contains("test_growing_pool leaked 320.0 KiB"));
}

// tiny_config: 30 training samples in batches of 16, so 2 steps per epoch, and 10
// validation samples, 1 validation batch.
TEST_CASE("a pool grown at every epoch start or validation batch is caught at the second epoch's end",
          "[contract][failures]") {
    for (const std::string hook : {"epoch_start", "val_batch_end"}) {
        DYNAMIC_SECTION(hook) {
            TempDir dir;
            auto config = dir.write("run.toml", tiny_config(3, "\n[plugins.test_growing_pool]\nhook = \"" + hook + "\"\n"));
            auto run = run_trainhost(with_report(dir, {"--config", config.string(), "--plugins=" + test_plugin("test_growing_pool")}));
            CHECK(run.exit_code == 3);
            CHECK_THAT(run.err, Contains("leak: plugin=test_growing_pool kind=device_memory bytes=65536 tag=scratch "
                                         "scope=fit acquired_in=" + hook + " fit=0 epoch=1 ") &&
                                    Contains(" detected_at=epoch_end rule=growth\n"));
            const auto report = report_of(dir);
            CHECK(report["fits"][0]["epochs"].size() == 1);  // the first epoch is the pool's warm-up
            CHECK(report["violations"].size() == 1);
        }
    }
}

// The first validation may come epochs after the first epoch_start: each hook has its
// own warm-up, and growth is caught at the second validation's epoch end.
TEST_CASE("with check_val_every_n_epoch, what validation hooks take warms up at the first validation",
          "[contract][failures][validation_interval]") {
    TempDir dir;
    const auto every_second = [](int epochs, const std::string& pool, const std::string& top = "") {
        std::string text = tiny_config(epochs, "\n[plugins.test_growing_pool]\n" + pool);
        const std::string epochs_line = "epochs = " + std::to_string(epochs) + "\n";
        return text.replace(text.find(epochs_line), epochs_line.size(),
                            epochs_line + "check_val_every_n_epoch = 2\n" + top);
    };
    const std::string plugins = "--plugins=" + test_plugin("test_growing_pool");
    // State made once at the first epoch start, and once at the first validation
    // (epoch 2): in a validation hook, or at the end of the epoch that had it.
    for (const std::string later : {"hook = \"epoch_start,val_batch_end\"\n",
                                    "hook = \"epoch_start,epoch_end\"\nepoch_end_after_validation = true\n"}) {
        auto once = run_trainhost({"--config", dir.write("once.toml", every_second(4, later + "once = true\n")).string(), plugins});
        INFO(later << once.out << once.err);
        CHECK(once.exit_code == 0);
        CHECK_THAT(once.out, Contains("resources: clean"));
    }
    // The sanity check's batch before the first epoch is no validation to warm up at.
    for (const std::string sanity : {"", "num_sanity_val_steps = 1\n"}) {
        INFO(sanity);
        auto pool = run_trainhost(with_report(
            dir, {"--config", dir.write("pool.toml", every_second(6, "hook = \"val_batch_end\"\n", sanity)).string(),
                  plugins}));
        CHECK(pool.exit_code == 3);
        CHECK_THAT(pool.err, Contains("leak: plugin=test_growing_pool kind=device_memory bytes=65536 tag=scratch "
                                      "scope=fit acquired_in=val_batch_end fit=0 epoch=3 ") &&
                                 Contains(" detected_at=epoch_end rule=growth\n"));
        CHECK(report_of(dir)["fits"][0]["epochs"].size() == 3);  // the 4th, the second validation's, failed
    }
}

// CUDA.jl's pool in inference: predict mode's passes are its steps, and the pass
// hooks (val_batch_start, val_batch_end) its step hooks.
TEST_CASE("in predict mode a pool grown every pass is caught at the second pass's end", "[contract][failures][predict]") {
    TempDir dir;
    const std::string pool = "\n[plugins.test_growing_pool]\nhook = \"val_batch_end\"\n";
    auto config = dir.write("run.toml", "mode = \"predict\"\n" + tiny_config(1, "\n[predict]\npasses = 5\n" + pool));
    auto run = run_trainhost(with_report(dir, {"--config", config.string(), "--plugins=" + test_plugin("test_growing_pool")}));
    CHECK(run.exit_code == 3);
    CHECK_THAT(run.err, Contains("leak: plugin=test_growing_pool kind=device_memory bytes=65536 tag=scratch scope=fit "
                                 "acquired_in=val_batch_end fit=0 epoch=0 step=1 ") &&
                            Contains(" detected_at=val_batch_end rule=growth\n"));
    const auto report = report_of(dir);
    const auto& fit = report["fits"][0];
    CHECK(fit["predict_passes"] == 1);  // the first, the pool's warm-up; the second failed
    CHECK(fit["predict_memory"]["after_last_pass"] == fit["predict_memory"]["after_first_pass"]);
    CHECK(report["violations"].size() == 1);
    // While state made once, in the first pass, is not growth.
    auto once = dir.write("once.toml", "mode = \"predict\"\n" +
                                           tiny_config(1, "\n[predict]\npasses = 5\n" + pool + "once = true\n"));
    auto clean = run_trainhost({"--config", once.string(), "--plugins=" + test_plugin("test_growing_pool")});
    CHECK(clean.exit_code == 0);
    CHECK_THAT(clean.last_line(), StartsWith("resources: clean"));
}

// An average that starts late (EMA's start_step), made once and kept, is set up
// lazily like an optimizer's state: its first step is its warm-up, wherever it falls.
TEST_CASE("state made once, lazily, in a late step is not growth", "[contract]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(3, "\n[plugins.test_growing_pool]\nonce = true\nstart_step = 3\n"));
    auto run = run_trainhost({"--config", config.string(), "--plugins=" + test_plugin("test_growing_pool")});
    CHECK(run.exit_code == 0);
    CHECK_THAT(run.last_line(), StartsWith("resources: clean"));
    // While a pool that starts growing late is caught at its second growth.
    auto late_pool = dir.write("late.toml", tiny_config(3, "\n[plugins.test_growing_pool]\nstart_step = 3\n"));
    run = run_trainhost({"--config", late_pool.string(), "--plugins=" + test_plugin("test_growing_pool")});
    CHECK(run.exit_code == 3);
    CHECK_THAT(run.err, Contains("tag=scratch scope=fit acquired_in=batch_start fit=0 epoch=2 step=4 ") &&
                            Contains("detected_at=batch_end rule=growth"));
}

// Each step hook has a warm-up of its own: with accumulate_grad_batches, the optimizer
// step hooks first run at a window's last batch, after the batch hooks' first step.
TEST_CASE("state made once in the first optimizer step of an accumulation window is not growth", "[contract]") {
    TempDir dir;
    const auto accumulating = [](const std::string& pool) {
        std::string text = tiny_config(3, "\n[plugins.test_growing_pool]\n" + pool);
        return text.replace(text.find("[optimizer]\n"), 12, "[optimizer]\naccumulate_grad_batches = 2\n");
    };
    const std::string plugins = "--plugins=" + test_plugin("test_growing_pool");
    const std::string lazy = "once = true\nhook = \"batch_start,before_optimizer_step\"\n";
    auto once = run_trainhost({"--config", dir.write("once.toml", accumulating(lazy)).string(), plugins});
    INFO(once.err);
    CHECK(once.exit_code == 0);
    CHECK_THAT(once.last_line(), StartsWith("resources: clean"));
    // While a pool in that hook is caught at its second step.
    auto pool = run_trainhost(
        {"--config", dir.write("pool.toml", accumulating("hook = \"before_optimizer_step\"\n")).string(), plugins});
    CHECK(pool.exit_code == 3);
    CHECK_THAT(pool.err, Contains("tag=scratch scope=fit acquired_in=before_optimizer_step fit=0 epoch=1 ") &&
                             Contains("rule=growth"));
}

// The growth rule's step is the optimizer step: a window's batches are one.
TEST_CASE("memory kept for each batch of an accumulation window and given back at its optimizer step is not growth",
          "[contract]") {
    TempDir dir;
    // 30 training samples in batches of 16: two batches an epoch, one window of both.
    const auto accumulating = [&](const std::string& name, int window, const std::string& pool) {
        std::string text = tiny_config(3, "\n[plugins.test_growing_pool]\nhook = \"after_backward\"\n" + pool);
        text.replace(text.find("[optimizer]\n"), 12,
                     "[optimizer]\naccumulate_grad_batches = " + std::to_string(window) + "\n");
        return dir.write(name, text).string();
    };
    const std::string plugins = "--plugins=" + test_plugin("test_growing_pool");
    for (const int window : {2, 3}) {
        INFO("accumulate_grad_batches = " << window);
        auto kept = run_trainhost({"--config", accumulating("window.toml", window, "pattern = \"window\"\n"), plugins});
        INFO(kept.err);
        CHECK(kept.exit_code == 0);
        CHECK_THAT(kept.last_line(), StartsWith("resources: clean"));
        // Kept past the step, the same buffers are a pool, caught in the second window.
        auto pool = run_trainhost({"--config", accumulating("pool.toml", window, ""), plugins});
        CHECK(pool.exit_code == 3);
        CHECK_THAT(pool.err, Contains("tag=scratch scope=fit acquired_in=after_backward fit=0 epoch=1 step=2 ") &&
                                 Contains("detected_at=batch_end rule=growth"));
    }
    // Several windows an epoch (8 batches of 4, windows of 4), the fit's first batch
    // skipped: that first window, not run whole, is no warm-up of 3 for windows of 4.
    std::string text = tiny_config(2, "\n[plugins.test_growing_pool]\nhook = \"after_backward\"\npattern = \"window\"\n"
                                      "[plugins.test_batch_outputs]\nskip_first = 1\n");
    text.replace(text.find("batch_size = 16"), 15, "batch_size = 4");
    text.replace(text.find("[optimizer]\n"), 12, "[optimizer]\naccumulate_grad_batches = 4\n");
    auto skipped = run_trainhost({"--config", dir.write("skipped.toml", text).string(),
                                  plugins + "," + test_plugin("test_batch_outputs")});
    INFO(skipped.err);
    CHECK(skipped.exit_code == 0);
    CHECK_THAT(skipped.last_line(), StartsWith("resources: clean"));
}

TEST_CASE("lazy epoch-scoped memory made in each epoch's first step is not growth", "[contract]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(3, "\n[plugins.test_growing_pool]\nper_epoch = true\n"));
    auto run = run_trainhost({"--config", config.string(), "--plugins=" + test_plugin("test_growing_pool")});
    CHECK(run.exit_code == 0);
    CHECK_THAT(run.last_line(), StartsWith("resources: clean"));
}

TEST_CASE("Lightning: optimizer state left after teardown is named at teardown", "[contract][failures]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(2));
    auto run = run_trainhost(with_report(dir, {"--config", config.string(), "--plugins=" + test_plugin("test_teardown_leftover")}));
    CHECK(run.exit_code == 3);
    CHECK_THAT(run.err, Contains("leak: plugin=test_teardown_leftover kind=device_memory bytes=128 tag=dense0.weight.exp_avg "
                                 "scope=fit acquired_in=fit_start") &&
                            Contains("detected_at=teardown rule=scope_end"));
    // The epochs ran normally: the leak only exists once teardown is over.
    CHECK(report_of(dir)["fits"][0]["epochs"].size() == 2);
    CHECK(report_of(dir)["violations"].size() == 4);  // one per parameter
    CHECK_THAT(report_of(dir)["fits"][0]["failure"].get<std::string>(),
               StartsWith("resource contract violated at the end of fit 1: leak: plugin=test_teardown_leftover "
                          "kind=device_memory bytes=128 tag=dense0.weight.exp_avg"));
}

TEST_CASE("Lightning: pruning copies kept across fits are named at the first fit's end", "[contract][failures]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(1));
    auto run = run_trainhost({"--config", config.string(), "--repeat", "20", "--plugins=" + test_plugin("test_pruning_copies")});
    CHECK(run.exit_code == 3);
    CHECK_THAT(run.err, Contains("leak: plugin=test_pruning_copies kind=device_memory bytes=128 tag=lottery_originals "
                                 "scope=plugin acquired_in=setup fit=0") &&
                            Contains("detected_at=destroy rule=owner_end"));
    CHECK_THAT(run.out, Contains("fit 1/20: 1 epoch, ") && Contains(" - failed (exit 3)\nfit 2/20 to 20/20: not run, fit 1 "
                                                                  "failed\n"));
}

// The SDK's owning buffers in a library-wide cache outlive their instance: cleared
// at a later fit's setup, or destroyed when the library goes at exit, they release
// through a host that no longer exists. Each leak is named where it happened; the
// late releases are refused, and nothing crashes.
TEST_CASE("owning buffers kept past their instance release through a dead host without a crash", "[contract][failures]") {
    TempDir dir;
    const std::string plugin = "--plugins=" + test_plugin("test_pruning_copies");
    auto config = dir.write("run.toml", tiny_config(1, "\n[plugins.test_pruning_copies]\ncache = \"buffers\"\n"));
    auto run = run_trainhost({"--config", config.string(), "--repeat", "3", plugin});
    CHECK(run.exit_code == 3);
    CHECK_THAT(run.err, Contains("leak: plugin=test_pruning_copies kind=device_memory bytes=128 tag=lottery_originals "
                                 "scope=plugin acquired_in=setup fit=0"));
    CHECK_THAT(run.out, Contains("fit 2/3 to 3/3: not run, fit 1 failed\n"));
    CHECK_THAT(run.last_line(), StartsWith("resources: VIOLATION - 4 leaks, 0 misuses"));

    auto cleared = dir.write("cleared.toml", tiny_config(1, "\n[resources]\non_violation = \"warn\"\n[plugins.test_pruning_copies]\n"
                                                            "cache = \"buffers\"\nclear_at_setup = true\n"));
    run = run_trainhost({"--config", cleared.string(), "--repeat", "3", plugin});
    CHECK(run.exit_code == 0);
    CHECK_THAT(run.out, Contains("fit 3/3: 1 epoch"));
    CHECK_THAT(run.last_line(), StartsWith("resources: VIOLATION - 12 leaks, 0 misuses (policy warn)"));
}

// batch_size past every split's size is legal (up to 1,048,576) and means one batch
// per split: the core sizes its buffers for the largest split, not for batch_size.
TEST_CASE("a batch_size larger than every split costs the memory of the largest split", "[contract][memory]") {
    TempDir dir;
    const auto run_with = [&](const std::string& batch_size) {
        std::string text = tiny_config(2);  // 30 training samples, 10 for validation
        text.replace(text.find("batch_size = 16"), 15, "batch_size = " + batch_size);
        const auto report = dir.path() / (batch_size + ".json");
        auto run = run_trainhost({"--config", dir.write(batch_size + ".toml", text).string(), "--report", report.string()});
        INFO(run.out << run.err);
        REQUIRE(run.exit_code == 0);
        return nlohmann::json::parse(test_support::read_file(report));
    };
    const auto exact = run_with("30");
    const auto huge = run_with("1048576");
    CHECK(huge["owners"][0]["owner"] == "core");
    CHECK(huge["owners"][0]["peak_bytes_in_use"] == exact["owners"][0]["peak_bytes_in_use"]);
    CHECK(huge["fits"][0]["final_metrics"]["val_loss"] == exact["fits"][0]["final_metrics"]["val_loss"]);
    CHECK(huge["fits"][0]["final_metrics"]["train_loss"] == exact["fits"][0]["final_metrics"]["train_loss"]);
}

TEST_CASE("repeated fits re-create plugins and keep libraries loaded", "[contract][repeat]") {
    TempDir dir;
    auto log = dir.path() / "hooks.log";
    auto config = dir.write("run.toml", tiny_config(1, "\n[plugins.test_recorder]\nfile = \"" + log.string() + "\"\n"));
    auto run = run_trainhost(with_report(dir, {"--config", config.string(), "--repeat", "3",
                                               "--plugins=progress,early_stopping," + test_plugin("test_recorder")}));
    REQUIRE(run.exit_code == 0);
    CHECK_THAT(run.out, Contains("test_recorder instance 3") && Contains("fit 3/3"));
    const auto lines = test_support::read_file(log);
    std::size_t creates = 0, destroys = 0;
    for (std::size_t at = 0; (at = lines.find("test_recorder:create", at)) != std::string::npos; ++at) ++creates;
    for (std::size_t at = 0; (at = lines.find("test_recorder:destroy", at)) != std::string::npos; ++at) ++destroys;
    CHECK(creates == 3);
    CHECK(destroys == 3);
    auto fits = report_of(dir)["fits"];
    REQUIRE(fits.size() == 3);
    for (const auto& fit : fits) {
        CHECK(fit["memory_after_teardown"]["bytes_in_use"] == 0);
        CHECK(fit["memory_after_teardown"]["bytes_reserved"] == 0);
    }
}

TEST_CASE("misuse is refused, counted and fails the run, never crashes", "[contract][misuse]") {
    // {id} is the lease's id, which depends on the core's own allocations before it.
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"out_of_phase", "request_stop is not allowed in phase setup (allowed from fit_start to epoch_end)"},
        {"size_mismatch", "release of lease {id} as 128 bytes; it holds 256"},
        {"out_of_range", "access of bytes [0, 128) of lease {id}, which holds 64 bytes"},
    };
    for (const auto& [misuse, detail] : cases) {
        DYNAMIC_SECTION(misuse) {
            TempDir dir;
            auto config = dir.write("run.toml", tiny_config(1, "\n[plugins.test_misuser]\nmisuse = \"" + misuse + "\"\n"));
            auto run = run_trainhost(with_report(dir, {"--config", config.string(), "--plugins=" + test_plugin("test_misuser")}));
            CHECK(run.exit_code == 3);
            CHECK_THAT(run.last_line(), Contains("1 misuse") && Contains("test_misuser " + misuse));
            auto violations = report_of(dir)["violations"];
            REQUIRE(violations.size() == 1);
            CHECK(violations[0]["kind"] == misuse);
            CHECK(violations[0]["phase"] == "setup");
            std::string expected = detail;
            if (const auto at = expected.find("{id}"); at != std::string::npos) {
                REQUIRE(violations[0]["id"].is_number_unsigned());
                expected.replace(at, 4, std::to_string(violations[0]["id"].get<std::uint64_t>()));
            }
            CHECK(violations[0]["detail"] == expected);
        }
    }
}

TEST_CASE("a plugin's message at an unknown log level is shown as a warning, not lost", "[contract][misuse]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(1, "\n[plugins.test_misuser]\nmisuse = \"unknown_log_level\"\n"));
    auto run = run_trainhost({"--config", config.string(), "--plugins=" + test_plugin("test_misuser")});
    CHECK(run.exit_code == 0);
    CHECK_THAT(run.err, Contains("warning: [test_misuser] logged at level seven (logged at unknown level 7)\n"));
}

TEST_CASE("a freed or foreign or made-up handle is refused as its own misuse kind", "[contract][misuse]") {
    struct Case {
        std::string misuse;
        std::string detail_start;  // the lease id of a freed or foreign lease depends on the core's allocations
        std::string detail_end;
    };
    const std::vector<Case> cases = {
        {"use_after_free", "access of lease ", ", which was already released"},
        {"foreign_handle", "access of lease ", ", which belongs to core"},
        {"unknown_handle", "access of lease 1000000", ", which does not exist"},
    };
    for (const Case& c : cases) {
        DYNAMIC_SECTION(c.misuse) {
            TempDir dir;
            auto config = dir.write("run.toml", tiny_config(1, "\n[plugins.test_misuser]\nmisuse = \"" + c.misuse + "\"\n"));
            auto run = run_trainhost(with_report(dir, {"--config", config.string(), "--plugins=" + test_plugin("test_misuser")}));
            CHECK(run.exit_code == 3);
            CHECK_THAT(run.err, Contains("misuse: plugin=test_misuser kind=" + c.misuse + " phase=setup id=") &&
                                    Contains(" detail=" + c.detail_start) && Contains(c.detail_end + "\n"));
            CHECK_THAT(run.last_line(), StartsWith("resources: VIOLATION") && Contains("1 misuse") &&
                                            EndsWith("test_misuser " + c.misuse));
            auto violations = report_of(dir)["violations"];
            REQUIRE(violations.size() == 1);
            CHECK(violations[0]["plugin"] == "test_misuser");
            CHECK(violations[0]["kind"] == c.misuse);
            CHECK_THAT(violations[0]["detail"].get<std::string>(), StartsWith(c.detail_start) && EndsWith(c.detail_end));
        }
    }
}

TEST_CASE("a late release of a reclaimed lease still names its size", "[contract][misuse]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(1, "\n[resources]\non_violation = \"warn\"\n"
                                                       "[plugins.test_misuser]\nmisuse = \"reclaimed_wrong_size\"\n"));
    auto run = run_trainhost(with_report(dir, {"--config", config.string(), "--plugins=" + test_plugin("test_misuser")}));
    CHECK(run.exit_code == 0);
    CHECK_THAT(run.err, Contains("tag=kept scope=step acquired_in=batch_start") && Contains("rule=scope_end"));
    CHECK_THAT(run.err, Contains("misuse: plugin=test_misuser kind=size_mismatch phase=batch_start") &&
                            Contains(" as 1 bytes; it held 4096 (reclaimed)\n"));
    CHECK_THAT(run.last_line(), Contains("1 leak, 1 misuse"));
}

TEST_CASE("a reclaimed handle is an error for the plugin, not a crash", "[contract][misuse]") {
    TempDir dir;
    // 3 epochs of 2 batches: each batch after the first uses the lease reclaimed at the last batch_end.
    auto config = dir.write("run.toml", tiny_config(3, "\n[resources]\non_violation = \"warn\"\n"
                                                       "[plugins.test_misuser]\nmisuse = \"use_after_reclaim\"\n"));
    auto run = run_trainhost(with_report(dir, {"--config", config.string(), "--plugins=" + test_plugin("test_misuser")}));
    CHECK(run.exit_code == 0);  // warn: reported, reclaimed, training goes on
    CHECK_THAT(run.err, Contains("tag=kept scope=step") && Contains("detected_at=batch_end"));
    // Three lines of a kind, then a count; the verdict counts each kind once.
    CHECK_THAT(run.err, Contains("misuse: plugin=test_misuser kind=use_after_reclaim phase=batch_start") &&
                            Contains("misuse: plugin=test_misuser kind=use_after_reclaim: 2 more not shown"));
    CHECK_THAT(run.last_line(), Contains("5 misuses (policy warn)") && EndsWith("; test_misuser use_after_reclaim x5"));
    bool reclaimed_use = false;
    const auto violations = report_of(dir)["violations"];
    for (const auto& v : violations) reclaimed_use = reclaimed_use || v["kind"] == "use_after_reclaim";
    CHECK(reclaimed_use);
}

TEST_CASE("a plugin over its device_memory_limit is refused with the top holders", "[contract][budget]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(1, "\n[plugins.test_misuser]\nmisuse = \"over_budget\"\n"
                                                       "device_memory_limit = \"64KiB\"\n"));
    auto run = run_trainhost({"--config", config.string(), "--plugins=" + test_plugin("test_misuser")});
    CHECK(run.exit_code == 4);
    CHECK_THAT(run.err, Contains("test_misuser is over its device_memory_limit of 64.0 KiB: holds 0 B, asked for 1.0 MiB "
                                 "more; top holders: core (fit scope)"));
    // The same allocation fits a limit in the largest units.
    for (const char* limit : {"1TiB", "0.001TB"}) {
        auto roomy = dir.write("roomy.toml", tiny_config(1, "\n[plugins.test_misuser]\nmisuse = \"over_budget\"\n"
                                                            "device_memory_limit = \"" + std::string(limit) + "\"\n"));
        auto fits = run_trainhost({"--config", roomy.string(), "--plugins=" + test_plugin("test_misuser")});
        INFO(limit << ": " << fits.err);
        CHECK(fits.exit_code == 0);
    }
    auto bad = dir.write("bad.toml", tiny_config(1, "\n[plugins.test_misuser]\ndevice_memory_limit = \"lots\"\n"));
    auto refused = run_trainhost({"--config", bad.string(), "--plugins=" + test_plugin("test_misuser")});
    CHECK(refused.exit_code == 1);
    CHECK_THAT(refused.err, Contains("bad.toml:") && Contains("\"lots\" is not a size"));
}

TEST_CASE("a device_memory_limit of nothing, too much, or a negative or fractional count is refused where it is written",
          "[contract][budget]") {
    // tiny_config is 18 lines, then a blank one, the table's and the limit's: its value starts at 21:23.
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"0", "a limit must be positive"},
        {"-1", "a limit must be positive"},
        {"\"0B\"", "a limit must be positive"},
        {"\"0.0GiB\"", "a limit must be positive"},
        {"\"16384PiB\"", "\"16384PiB\" is not a size (write e.g. \"256MiB\", \"1.5GiB\" or a number of bytes)"},
        {"\"16777216TiB\"", "\"16777216TiB\" is more than 16 EiB"},
        {"\"18446744073709551616B\"", "\"18446744073709551616B\" is more than 16 EiB"},
        {"\"0.5B\"", "\"0.5B\" is 0.5 bytes, not a whole number of them"},
        {"\"0.0000001\"", "a limit must be at least one byte"},
        {"\"1.9\"", "\"1.9\" is 1.9 bytes, not a whole number of them"},  // cut off, it was one byte
        {"\"1.0001KiB\"", "\"1.0001KiB\" is 1024.1024 bytes, not a whole number of them"},
        {"\"-1MiB\"", "\"-1MiB\" is not a size (write e.g. \"256MiB\", \"1.5GiB\" or a number of bytes)"},
        {"1.5", "expected a whole number of bytes or a size such as \"256MiB\""},
    };
    for (const auto& [value, message] : cases) {
        DYNAMIC_SECTION(value) {
            TempDir dir;
            auto config = dir.write("run.toml", tiny_config(1, "\n[plugins.test_misuser]\ndevice_memory_limit = " + value + "\n"));
            auto run = run_trainhost({"--config", config.string(), "--plugins=" + test_plugin("test_misuser")});
            CHECK(run.exit_code == 1);
            CHECK_THAT(run.err, Contains("error: " + config.string() + ":21:23: [plugins.test_misuser] device_memory_limit: " +
                                         message));
            CHECK(run.out.find("resources:") == std::string::npos);  // refused before any fit
        }
    }
}

TEST_CASE("allocation stacks are printed on request", "[contract][stacks]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(1, "\n[resources]\nallocation_stacks = true\n"));
    auto run = run_trainhost({"--config", config.string(), "--plugins=" + test_plugin("test_leaky")});
    CHECK(run.exit_code == 3);
    CHECK_THAT(run.err, Contains("leak: plugin=test_leaky") && Contains("acquired at:") && Contains("#0"));
    auto plain = run_trainhost({"--config", dir.write("plain.toml", tiny_config(1)).string(),
                                "--plugins=" + test_plugin("test_leaky")});
    CHECK(plain.err.find("acquired at:") == std::string::npos);  // off by default
}

TEST_CASE("the failure scenarios run clean", "[contract][scenarios]") {
    const std::string root = std::string(TRAINHOST_SOURCE_DIR) + "/examples/failures/";
    SECTION("forward_loop: flat after the first pass, zero after teardown") {
        TempDir dir;
        auto run = run_trainhost(with_report(dir, {"--config", root + "forward_loop.toml"}));
        REQUIRE(run.exit_code == 0);
        auto fit = report_of(dir)["fits"][0];
        CHECK(fit["predict_memory"]["after_first_pass"]["bytes_in_use"] ==
              fit["predict_memory"]["after_last_pass"]["bytes_in_use"]);
        CHECK(fit["predict_memory"]["after_first_pass"]["bytes_reserved"] ==
              fit["predict_memory"]["after_last_pass"]["bytes_reserved"]);
        CHECK(fit["predict_memory"]["after_first_pass"]["bytes_in_use"].get<std::uint64_t>() > 0);
        CHECK(fit["predict_passes"] == 1000);
        CHECK_THAT(run.out, Contains("fit 1/1: 1000 predict passes\n"));
        CHECK(fit["memory_after_teardown"]["bytes_in_use"] == 0);
        CHECK(fit["memory_after_teardown"]["bytes_reserved"] == 0);
    }
    SECTION("teardown: optimizer state and every plugin handle gone") {
        TempDir dir;
        auto run = run_trainhost(with_report(dir, {"--config", root + "teardown.toml", "--plugins=early_stopping,progress"}));
        REQUIRE(run.exit_code == 0);
        auto json = report_of(dir);
        REQUIRE(json["fits"][0]["memory_after_teardown"]["by_owner"].size() == 3);  // core and the two plugins
        for (const auto& owner : json["fits"][0]["memory_after_teardown"]["by_owner"]) {
            INFO(owner["owner"]);
            CHECK(owner["bytes_in_use"] == 0);
            CHECK(owner["bytes_reserved"] == 0);
        }
        // Adam's state existed during the fit: the core's peak covers it.
        CHECK(json["owners"][0]["peak_bytes_in_use"].get<std::uint64_t>() > 0);
    }
    SECTION("togpu_every_epoch: one real move, then identical bytes in use at every epoch end (3 of its 50 epochs here)") {
        TempDir dir;
        auto run = run_trainhost(with_report(dir, {"--config", root + "togpu_every_epoch.toml", "--plugins=togpu",
                                                   "--epochs", "3", "--device", "cpu", "--verbose"}));
        REQUIRE(run.exit_code == 0);
        // to_device moves the model; the epoch-start requests find it there.
        const std::string moved = "moved the model from cpu:0 to cpu:1\n";
        REQUIRE(run.out.find(moved) != std::string::npos);
        CHECK(run.out.find("moved the model", run.out.find(moved) + moved.size()) == std::string::npos);
        CHECK(report_of(dir)["fits"][0]["memory_after_teardown"]["bytes_in_use"] == 0);
        auto epochs = report_of(dir)["fits"][0]["epochs"];
        REQUIRE(epochs.size() == 3);
        for (const auto& epoch : epochs) CHECK(epoch["memory"]["bytes_in_use"] == epochs[0]["memory"]["bytes_in_use"]);
    }
}

TEST_CASE("every resource kind is a real object, counted and checked the same way", "[contract][kinds]") {
    TempDir dir;
    auto clean = run_trainhost(with_report(dir, {"--config", dir.write("run.toml", tiny_config(1)).string(),
                                                 "--plugins=" + test_plugin("test_resource_user")}));
    REQUIRE(clean.exit_code == 0);
    CHECK_THAT(clean.last_line(), StartsWith("resources: clean"));
    const auto report = report_of(dir);
    const auto owners = report["owners"];
    CHECK(owners[1]["owner"] == "test_resource_user");
    CHECK(owners[1]["peak_bytes_in_use"] == 256);  // device memory; pinned memory and objects are counted apart
    {
        INFO("requested, allocated and reserved at the epoch's end, while every lease is held");
        const auto memory = report["fits"][0]["epochs"][0]["memory"];
        const auto core = memory["by_owner"][0];
        const auto user = memory["by_owner"][1];
        REQUIRE(user["owner"] == "test_resource_user");
        CHECK(user["bytes_in_use"] == 256);
        CHECK(user["bytes_allocated"] == 256);  // 256 is already a multiple of the CPU's 64
        // Also 256 pinned bytes, a stream, an event and two handles.
        CHECK(user["bytes_reserved"].get<std::uint64_t>() > 512);
        // The core's buffers hold floats: a 4-float bias is 16 bytes requested and 64 allocated.
        CHECK(core["bytes_allocated"].get<std::uint64_t>() > core["bytes_in_use"].get<std::uint64_t>());
        CHECK(core["bytes_allocated"].get<std::uint64_t>() % 64 == 0);
        // The core's batch is gathered in pinned memory (16 rows of 8 features and 8
        // targets); the CPU core holds no objects.
        CHECK(core["bytes_reserved"].get<std::uint64_t>() - core["bytes_allocated"].get<std::uint64_t>() ==
              2 * 16 * 8 * sizeof(float));
        CHECK(memory["bytes_allocated"].get<std::uint64_t>() ==
              core["bytes_allocated"].get<std::uint64_t>() + user["bytes_allocated"].get<std::uint64_t>());
        CHECK(memory["bytes_in_use"].get<std::uint64_t>() ==
              core["bytes_in_use"].get<std::uint64_t>() + user["bytes_in_use"].get<std::uint64_t>());
        CHECK(report["fits"][0]["memory_after_teardown"]["bytes_allocated"] == 0);
    }
    for (const char* kind : {"device_memory", "pinned_memory", "stream", "event", "blas_handle", "dnn_handle"}) {
        DYNAMIC_SECTION("forgetting a " << kind) {
            TempDir kind_dir;
            auto config = kind_dir.write("run.toml", tiny_config(1, std::string("\n[plugins.test_resource_user]\nforget = \"") +
                                                                        kind + "\"\n"));
            auto run = run_trainhost({"--config", config.string(), "--plugins=" + test_plugin("test_resource_user")});
            CHECK(run.exit_code == 3);
            CHECK_THAT(run.err, Contains(std::string("leak: plugin=test_resource_user kind=") + kind) &&
                                    Contains("scope=fit acquired_in=fit_start") && Contains("detected_at=teardown"));
            // Memory by its bytes, an object by its kind: not "leaked 0 B".
            const std::string what = std::string(kind).ends_with("memory") ? "256 B" : kind;
            CHECK_THAT(run.last_line(), EndsWith("(policy fail): test_resource_user leaked " + what));
        }
    }
}

// The move waits for the hook to end: what a plugin takes in that hook, on the device
// the model was still on, goes with it.
TEST_CASE("memory taken in the hook that asks for a move goes with the model", "[contract][moves]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(3, "\n[plugins.test_shuttle]\nscratch = true\n"));
    auto run = run_trainhost({"--config", config.string(), "--plugins=" + test_plugin("test_shuttle"), "--verbose"});
    INFO(run.err);
    CHECK(run.exit_code == 0);
    CHECK(test_support::occurrences(run.out, "moved the model") == 2);
    CHECK_THAT(run.last_line(), StartsWith("resources: clean"));
}

TEST_CASE("a move to where the model already is does nothing", "[contract][moves]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(2, "\n[plugins.togpu]\ntarget = \"auto\"\nwhen = \"every_epoch\"\n"));
    auto run = run_trainhost({"--config", config.string(), "--plugins=togpu", "--verbose"});
    REQUIRE(run.exit_code == 0);
    CHECK(run.out.find("moved the model") == std::string::npos);
    auto bad = dir.write("bad.toml", tiny_config(1, "\n[plugins.togpu]\ntarget = \"cpu:9\"\n"));
    auto refused = run_trainhost({"--config", bad.string(), "--plugins=togpu"});
    CHECK(refused.exit_code == 4);
    CHECK_THAT(refused.err, Contains("plugin 'togpu' failed in to_device: move_model: no device 'cpu:9' in this run"));
}

TEST_CASE("null buffers are refused as errors, and a lease promoted every step is growth", "[contract][misuse]") {
    TempDir dir;
    auto null_config = dir.write("null.toml", tiny_config(1, "\n[plugins.test_misuser]\nmisuse = \"null_buffer\"\n"));
    auto null_run = run_trainhost({"--config", null_config.string(), "--plugins=" + test_plugin("test_misuser")});
    CHECK(null_run.exit_code == 0);
    CHECK_THAT(null_run.last_line(), StartsWith("resources: clean"));
    auto grow = dir.write("grow.toml", tiny_config(2, "\n[plugins.test_misuser]\nmisuse = \"promote_growth\"\n"));
    auto run = run_trainhost({"--config", grow.string(), "--plugins=" + test_plugin("test_misuser")});
    CHECK(run.exit_code == 3);
    CHECK_THAT(run.err, Contains("tag=promoted scope=fit acquired_in=batch_start fit=0 epoch=0 step=1") &&
                            Contains("rule=growth"));
}

TEST_CASE("lazy fit-scoped state made in the first step after a resume is not growth", "[contract][checkpoint]") {
    TempDir dir;
    // One fit-scoped buffer made lazily in the first step: after a resume that step is
    // not step 0 of the count, and it is still the fit's warm-up.
    auto config = dir.write("run.toml", tiny_config(2, "\n[plugins.test_growing_pool]\nonce = true\n"
                                                       "[plugins.checkpoint]\ndirpath = \"" + (dir.path() / "ck").string() +
                                                       "\"\nsave_last = true\n"));
    const std::string plugins = "--plugins=checkpoint," + test_plugin("test_growing_pool");
    REQUIRE(run_trainhost({"--config", config.string(), plugins}).exit_code == 0);
    auto resumed = run_trainhost({"--config", config.string(), plugins, "--epochs", "4", "--resume", "last"});
    CHECK(resumed.exit_code == 0);
    CHECK_THAT(resumed.last_line(), StartsWith("resources: clean"));
}
