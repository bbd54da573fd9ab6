// The logging plugins end to end: metrics_logger's CSV and JSON Lines files (rows,
// header, values, crash safety) and memory_monitor's per-epoch table, metrics and
// growth warning. Both must leave the ledger clean.
#include "integration/process.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using test_support::run_trainhost;
using test_support::test_plugin;
using test_support::TempDir;
using test_support::tiny_config;

namespace {

std::vector<std::string> split(const std::string& line) {
    std::vector<std::string> fields(1);
    for (char c : line) {
        if (c == ',') fields.emplace_back();
        else fields.back() += c;
    }
    return fields;
}

// A CSV file as a header plus rows of name -> cell; every row must have the header's width.
struct Csv {
    std::vector<std::string> header;
    std::vector<std::map<std::string, std::string>> rows;
    std::size_t header_lines = 0;
};

Csv read_csv(const std::filesystem::path& file) {
    Csv csv;
    const auto lines = test_support::lines_of(test_support::read_file(file));
    REQUIRE(!lines.empty());
    csv.header = split(lines[0]);
    for (std::size_t i = 0; i < lines.size(); ++i) {
        if (lines[i].starts_with("kind,")) ++csv.header_lines;
        if (i == 0) continue;
        const auto cells = split(lines[i]);
        REQUIRE(cells.size() == csv.header.size());
        std::map<std::string, std::string> row;
        for (std::size_t c = 0; c < cells.size(); ++c) row[csv.header[c]] = cells[c];
        csv.rows.push_back(std::move(row));
    }
    return csv;
}

std::vector<nlohmann::json> read_jsonl(const std::filesystem::path& file) {
    std::vector<nlohmann::json> rows;
    for (const auto& line : test_support::lines_of(test_support::read_file(file))) rows.push_back(nlohmann::json::parse(line));
    return rows;
}

std::string logger_table(const std::filesystem::path& dir, const std::string& extra = "") {
    return "\n[plugins.metrics_logger]\ndir = \"" + dir.string() + "\"\n" + extra;
}

std::vector<std::string> kinds(const Csv& csv) {
    std::vector<std::string> out;
    for (const auto& row : csv.rows) out.push_back(row.at("kind"));
    return out;
}

}  // namespace

TEST_CASE("metrics_logger writes every step and epoch row to CSV and JSON Lines", "[plugins][metrics_logger]") {
    TempDir dir;
    const auto logs = dir.path() / "logs";
    auto config = dir.write("run.toml", tiny_config(2, logger_table(logs)));
    auto run = run_trainhost({"--config", config.string(), "--plugins=metrics_logger", "--report",
                              (dir.path() / "report.json").string()});
    REQUIRE(run.exit_code == 0);
    CHECK_THAT(run.last_line(), StartsWith("resources: clean"));
    const auto report = nlohmann::json::parse(test_support::read_file(dir.path() / "report.json"));
    const auto& final_metrics = report["fits"][0]["final_metrics"];

    const Csv csv = read_csv(logs / "metrics.csv");
    CHECK(csv.header_lines == 1);
    REQUIRE(csv.header.size() >= 6);
    CHECK(std::vector<std::string>(csv.header.begin(), csv.header.begin() + 4) ==
          std::vector<std::string>{"kind", "fit", "epoch", "step"});
    CHECK(std::find(csv.header.begin(), csv.header.end(), "train_loss") != csv.header.end());
    CHECK(std::find(csv.header.begin(), csv.header.end(), "val_loss") != csv.header.end());
    // 2 training batches per epoch: two step rows, then the epoch row.
    CHECK(kinds(csv) == std::vector<std::string>{"step", "step", "epoch", "step", "step", "epoch"});
    std::vector<std::string> steps, epochs;
    for (const auto& row : csv.rows) {
        steps.push_back(row.at("step"));
        epochs.push_back(row.at("epoch"));
        CHECK(row.at("fit") == "0");
        CHECK_NOTHROW(std::stod(row.at("train_loss")));
    }
    CHECK(steps == std::vector<std::string>{"1", "2", "2", "3", "4", "4"});
    CHECK(epochs == std::vector<std::string>{"0", "0", "0", "1", "1", "1"});
    CHECK(csv.rows[0].at("val_loss").empty());  // no validation has run yet: an empty cell
    const auto& last = csv.rows.back();
    CHECK(std::stod(last.at("train_loss")) == final_metrics["train_loss"].get<double>());
    CHECK(std::stod(last.at("val_loss")) == final_metrics["val_loss"].get<double>());

    const auto jsonl = read_jsonl(logs / "metrics.jsonl");
    REQUIRE(jsonl.size() == 6);
    CHECK(jsonl[0]["kind"] == "step");
    CHECK(jsonl[0]["step"] == 1);
    CHECK(!jsonl[0].contains("val_loss"));
    CHECK(jsonl[2]["kind"] == "epoch");
    CHECK(jsonl[5]["kind"] == "epoch");
    CHECK(jsonl[5]["epoch"] == 1);
    CHECK(jsonl[5]["train_loss"].get<double>() == final_metrics["train_loss"].get<double>());
    CHECK(jsonl[5]["val_loss"].get<double>() == final_metrics["val_loss"].get<double>());
}

// An uncompressed IDX file (the spelling of torchvision's raw/): big-endian magic and
// dimensions, then the bytes.
void write_idx(const std::filesystem::path& file, std::uint32_t magic, const std::vector<std::uint32_t>& dims,
               const std::vector<std::uint8_t>& payload) {
    std::vector<std::uint32_t> words{magic};
    words.insert(words.end(), dims.begin(), dims.end());
    std::string bytes;
    for (const std::uint32_t word : words)
        for (int shift = 24; shift >= 0; shift -= 8) bytes += static_cast<char>((word >> shift) & 0xFF);
    bytes.append(payload.begin(), payload.end());
    std::ofstream(file, std::ios::binary) << bytes;
}

TEST_CASE("metrics_logger: the test split's metrics, which come after the last epoch end, get a row of their own",
          "[plugins][metrics_logger]") {
    TempDir dir;
    const auto data = dir.path() / "idx";
    std::filesystem::create_directories(data);
    for (const auto& [split, count] : {std::pair{"train", 8u}, std::pair{"t10k", 4u}}) {
        std::vector<std::uint8_t> pixels(count * 6), labels(count);
        for (std::uint32_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<std::uint8_t>(i * 37 % 251);
        for (std::uint32_t i = 0; i < count; ++i) labels[i] = static_cast<std::uint8_t>(i % 10);
        write_idx(data / (std::string(split) + "-images-idx3-ubyte"), 0x00000803, {count, 2, 3}, pixels);
        write_idx(data / (std::string(split) + "-labels-idx1-ubyte"), 0x00000801, {count}, labels);
    }
    const auto logs = dir.path() / "logs";
    auto config = dir.write("run.toml", "seed = 7\nepochs = 2\n[data]\ndataset = \"fashion_mnist\"\npath = \"" +
                                            data.string() + "\"\nbatch_size = 4\nvalidation_fraction = 0.25\n[model]\n"
                                            "layers = [ { type = \"flatten\" }, { type = \"dense\", units = 10 } ]\n" +
                                            logger_table(logs, "every_n_steps = 0\n"));
    auto run = run_trainhost({"--config", config.string(), "--plugins=metrics_logger", "--report",
                              (dir.path() / "report.json").string()});
    INFO(run.out << run.err);
    REQUIRE(run.exit_code == 0);
    const auto final_metrics =
        nlohmann::json::parse(test_support::read_file(dir.path() / "report.json"))["fits"][0]["final_metrics"];
    const Csv csv = read_csv(logs / "metrics.csv");
    CHECK(kinds(csv) == std::vector<std::string>{"epoch", "epoch", "test"});
    CHECK(csv.rows[1].at("test_loss").empty());
    CHECK(std::stod(csv.rows[2].at("test_loss")) == final_metrics["test_loss"].get<double>());
    CHECK(std::stod(csv.rows[2].at("test_accuracy")) == final_metrics["test_accuracy"].get<double>());
    CHECK(csv.rows[2].at("epoch") == "1");
    const auto jsonl = read_jsonl(logs / "metrics.jsonl");
    REQUIRE(jsonl.size() == 3);
    CHECK(jsonl[2]["kind"] == "test");
    CHECK(jsonl[2]["test_loss"].get<double>() == final_metrics["test_loss"].get<double>());
    CHECK_FALSE(jsonl[1].contains("test_loss"));
}

TEST_CASE("metrics_logger: a metric named as a fixed column is renamed, clear of every other metric's name",
          "[plugins][metrics_logger]") {
    TempDir dir;
    const auto logs = dir.path() / "logs";
    auto config = dir.write("run.toml", tiny_config(1, logger_table(logs, "every_n_steps = 0\n")));
    // Its metrics "epoch" (101) and "metric:epoch" (201): "epoch" is written
    // "metric:epoch", and "metric:epoch" "metric:metric:epoch", in every row whatever
    // metrics it holds, where both went into one column, their cells run together.
    auto run = run_trainhost({"--config", config.string(),
                              "--plugins=" + test_plugin("test_loose_declarations_abi11") + ",metrics_logger"});
    INFO(run.out << run.err);
    REQUIRE(run.exit_code == 0);
    const Csv csv = read_csv(logs / "metrics.csv");
    CHECK(std::count(csv.header.begin(), csv.header.end(), "metric:epoch") == 1);
    REQUIRE(csv.rows.size() == 1);
    CHECK(csv.rows[0].at("epoch") == "0");
    CHECK(csv.rows[0].at("metric:epoch") == "101");
    CHECK(csv.rows[0].at("metric:metric:epoch") == "201");
    const auto jsonl = read_jsonl(logs / "metrics.jsonl");
    REQUIRE(jsonl.size() == 1);
    CHECK(jsonl[0]["epoch"] == 0);
    CHECK(jsonl[0]["metric:epoch"] == 101);
    CHECK(jsonl[0]["metric:metric:epoch"] == 201);
}

TEST_CASE("metrics_logger: every_n_steps = 0 gives epoch rows only, and format picks the files", "[plugins][metrics_logger]") {
    TempDir dir;
    SECTION("both formats") {
        auto config = dir.write("run.toml", tiny_config(2, logger_table(dir.path(), "every_n_steps = 0\n")));
        auto run = run_trainhost({"--config", config.string(), "--plugins=metrics_logger"});
        REQUIRE(run.exit_code == 0);
        CHECK(kinds(read_csv(dir.path() / "metrics.csv")) == std::vector<std::string>{"epoch", "epoch"});
        CHECK(read_jsonl(dir.path() / "metrics.jsonl").size() == 2);
    }
    SECTION("jsonl only, with a prefix") {
        auto config = dir.write("run.toml", tiny_config(2, logger_table(dir.path(), "every_n_steps = 0\n"
                                                                                    "format = \"jsonl\"\n"
                                                                                    "prefix = \"run1\"\n")));
        auto run = run_trainhost({"--config", config.string(), "--plugins=metrics_logger"});
        REQUIRE(run.exit_code == 0);
        CHECK(read_jsonl(dir.path() / "run1.jsonl").size() == 2);
        CHECK(!std::filesystem::exists(dir.path() / "run1.csv"));
    }
    SECTION("every second step") {
        auto config = dir.write("run.toml", tiny_config(2, logger_table(dir.path(), "every_n_steps = 2\n")));
        auto run = run_trainhost({"--config", config.string(), "--plugins=metrics_logger"});
        REQUIRE(run.exit_code == 0);
        const Csv csv = read_csv(dir.path() / "metrics.csv");
        CHECK(kinds(csv) == std::vector<std::string>{"step", "epoch", "step", "epoch"});
        CHECK(csv.rows[2].at("step") == "4");
    }
}

TEST_CASE("metrics_logger: repeated fits share one file, told apart by the fit column", "[plugins][metrics_logger]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(1, logger_table(dir.path())));
    auto run = run_trainhost({"--config", config.string(), "--repeat", "2", "--plugins=metrics_logger"});
    REQUIRE(run.exit_code == 0);
    const Csv csv = read_csv(dir.path() / "metrics.csv");
    CHECK(csv.header_lines == 1);
    std::vector<std::string> fits;
    for (const auto& row : csv.rows) fits.push_back(row.at("fit"));
    CHECK(fits == std::vector<std::string>{"0", "0", "0", "1", "1", "1"});
    CHECK(read_jsonl(dir.path() / "metrics.jsonl").size() == 6);
}

TEST_CASE("metrics_logger: a fit resumed before its first step appends, as any resume", "[plugins][metrics_logger]") {
    TempDir dir;
    // No training batch: the checkpoint at epoch 1's end is at step 0.
    std::string text = tiny_config(1, logger_table(dir.path(), "every_n_steps = 0\n") + "\n[plugins.checkpoint]\ndirpath = \"" +
                                          (dir.path() / "ck").string() + "\"\n");
    text.replace(text.find("validation_fraction = 0.25\n"), 27, "validation_fraction = 0.25\nlimit_train_batches = 0\n");
    auto config = dir.write("run.toml", text);
    REQUIRE(run_trainhost({"--config", config.string(), "--plugins=checkpoint,metrics_logger"}).exit_code == 0);
    auto resumed = run_trainhost({"--config", config.string(), "--plugins=checkpoint,metrics_logger", "--epochs", "2",
                                  "--resume", (dir.path() / "ck" / "epoch=0-step=0.safetensors").string()});
    INFO(resumed.out << resumed.err);
    REQUIRE(resumed.exit_code == 0);
    CHECK(resumed.err.find("holds an earlier run's rows") == std::string::npos);
    std::vector<std::string> epochs;
    for (const auto& row : read_csv(dir.path() / "metrics.csv").rows) epochs.push_back(row.at("epoch"));
    CHECK(epochs == std::vector<std::string>{"0", "1"});
    CHECK(read_jsonl(dir.path() / "metrics.jsonl").size() == 2);
}

TEST_CASE("metrics_logger: a directory that cannot be created fails the fit, naming it", "[plugins][metrics_logger]") {
    TempDir dir;
    const auto blocker = dir.write("not_a_dir", "a regular file");
    auto config = dir.write("run.toml", tiny_config(1, logger_table(blocker / "logs")));
    auto run = run_trainhost({"--config", config.string(), "--plugins=metrics_logger"});
    CHECK(run.exit_code == 4);
    CHECK_THAT(run.err, Contains("plugin 'metrics_logger' failed in fit_start") &&
                            Contains((blocker / "logs").string()));
}

TEST_CASE("metrics_logger: rows already logged survive a later plugin's failure", "[plugins][metrics_logger]") {
    for (const char* hook : {"batch_end", "epoch_end"}) {
        DYNAMIC_SECTION(hook) {
            TempDir dir;
            auto config = dir.write("run.toml", tiny_config(2, logger_table(dir.path()) + "[plugins.test_thrower]\nhook = \"" +
                                                                   hook + "\"\nhow = \"throw\"\n"));
            auto run = run_trainhost({"--config", config.string(),
                                      "--plugins=metrics_logger," + test_plugin("test_thrower")});
            CHECK(run.exit_code == 4);
            CHECK_THAT(run.err, Contains("plugin 'test_thrower' failed in " + std::string(hook)));
            const auto expected = std::string(hook) == "batch_end" ? std::vector<std::string>{"step"}
                                                                   : std::vector<std::string>{"step", "step", "epoch"};
            CHECK(kinds(read_csv(dir.path() / "metrics.csv")) == expected);
            CHECK(read_jsonl(dir.path() / "metrics.jsonl").size() == expected.size());
        }
    }
}

TEST_CASE("memory_monitor prints memory by owner per epoch and sets memory metrics", "[plugins][memory_monitor]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(2, logger_table(dir.path())));
    // metrics_logger first on the command line: memory_monitor's declared writes still
    // put it first, so the epoch rows carry its metrics.
    auto run = run_trainhost({"--config", config.string(), "--plugins=metrics_logger,memory_monitor", "--report",
                              (dir.path() / "report.json").string()});
    REQUIRE(run.exit_code == 0);
    CHECK_THAT(run.last_line(), StartsWith("resources: clean"));
    CHECK_THAT(run.out, Contains("memory after epoch 1/2: ") && Contains("memory after epoch 2/2: ") &&
                            Contains("\n  core ") && Contains(" in use ") && Contains(" allocated ") && Contains(" peak "));
    CHECK(run.err.find("memory_monitor") == std::string::npos);  // a clean run: no warning
    const auto report = nlohmann::json::parse(test_support::read_file(dir.path() / "report.json"));
    REQUIRE(report["fits"][0]["epochs"].size() == 2);
    for (const auto& epoch : report["fits"][0]["epochs"]) {
        CHECK(epoch["metrics"]["memory_in_use_bytes"].get<double>() > 0);
        const double in_use = epoch["metrics"]["memory_in_use_bytes"].get<double>();
        const double allocated = epoch["metrics"]["memory_allocated_bytes"].get<double>();
        CHECK(allocated >= in_use);
        CHECK(epoch["metrics"]["memory_reserved_bytes"].get<double>() >= allocated);
        // The same totals as the core's own snapshot of that epoch's end.
        CHECK(allocated == epoch["memory"]["bytes_allocated"].get<double>());
    }
    const Csv csv = read_csv(dir.path() / "metrics.csv");
    CHECK(!csv.rows.at(2).at("memory_in_use_bytes").empty());  // the first epoch row
}

TEST_CASE("memory_monitor warns when an owner's memory grows between epochs", "[plugins][memory_monitor]") {
    TempDir dir;
    SECTION("a pool that only grows is named") {
        auto config = dir.write("run.toml", tiny_config(3, "\n[resources]\non_violation = \"warn\"\n"));
        auto run = run_trainhost({"--config", config.string(),
                                  "--plugins=memory_monitor," + test_plugin("test_growing_pool")});
        CHECK(run.exit_code == 0);  // warn: the run goes on
        // From its second growth on: one growth may be state made late.
        CHECK(run.err.find("at the end of epoch 2 than at the end of epoch 1") == std::string::npos);
        CHECK_THAT(run.err, Contains("warning: [memory_monitor] test_growing_pool holds 131072 bytes more at the end "
                                     "of epoch 3 than at the end of epoch 2 (384.0 KiB in use, was 256.0 KiB), and "
                                     "grew by the end of epoch 2 too") &&
                                Contains("nothing in its scopes explains it"));
        CHECK(run.err.find("[memory_monitor] core") == std::string::npos);
    }
    // None is a leak, as the ledger's verdict agrees: epoch-scoped memory made each
    // epoch; memory that grows once, between two epochs' ends, and never again.
    struct NoGrowth {
        const char* what;
        const char* options;
        bool monitor_first;
    };
    for (const NoGrowth& each : {
             NoGrowth{"epoch-scoped memory made lazily each epoch", "per_epoch = true\n", true},
             NoGrowth{"state made once, late", "once = true\nstart_step = 4\n", true},
             NoGrowth{"epoch-scoped memory a plugin before it takes at epoch_start, from some epoch on",
                      "per_epoch = true\nhook = \"epoch_start\"\nstart_step = 4\n", false},
         }) {
        DYNAMIC_SECTION(each.what << " is not growth") {
            auto config = dir.write("run.toml", tiny_config(4, std::string("\n[plugins.test_growing_pool]\n") + each.options));
            const std::string pool = test_plugin("test_growing_pool");
            auto run = run_trainhost({"--config", config.string(), "--plugins=" + (each.monitor_first
                                                                                       ? "memory_monitor," + pool
                                                                                       : pool + ",memory_monitor")});
            CHECK(run.exit_code == 0);
            CHECK_THAT(run.last_line(), StartsWith("resources: clean"));
            CHECK(run.err.find("memory_monitor") == std::string::npos);
        }
    }
    SECTION("growth within the tolerance is not warned about") {
        auto config = dir.write("run.toml", tiny_config(2, "\n[resources]\non_violation = \"warn\"\n"
                                                           "[plugins.memory_monitor]\ngrowth_tolerance_bytes = 131072\n"
                                                           "log = false\n"));
        auto run = run_trainhost({"--config", config.string(),
                                  "--plugins=memory_monitor," + test_plugin("test_growing_pool")});
        CHECK(run.exit_code == 0);
        CHECK(run.err.find("[memory_monitor]") == std::string::npos);
        CHECK(run.out.find("memory after epoch") == std::string::npos);
    }
}

TEST_CASE("metrics_logger and memory_monitor refuse option values they cannot use", "[plugins][options]") {
    struct Case {
        std::string plugin;
        std::string options;
        std::string message;
    };
    const std::vector<Case> cases = {
        {"metrics_logger", "format = \"xml\"", "format must be both, csv or jsonl, not 'xml'"},
        {"metrics_logger", "every_n_steps = -1", "every_n_steps must be >= 0"},
        {"metrics_logger", "dir = \"\"", "dir must not be empty"},
        {"metrics_logger", "dir = \"/dev/null\"", "dir '/dev/null' names a file, not a directory"},
        {"metrics_logger", "prefix = \"\"", "prefix must be a non-empty file name without '/', not ''"},
        {"metrics_logger", "prefix = \"a/b\"", "prefix must be a non-empty file name without '/', not 'a/b'"},
        {"memory_monitor", "growth_tolerance_bytes = -1", "growth_tolerance_bytes must be >= 0"},
    };
    for (const Case& c : cases) {
        DYNAMIC_SECTION(c.plugin << " " << c.options) {
            TempDir dir;
            auto config = dir.write("run.toml", tiny_config(1, "\n[plugins." + c.plugin + "]\n" + c.options + "\n"));
            auto run = run_trainhost({"--config", config.string(), "--plugins=" + c.plugin});
            CHECK(run.exit_code == 1);
            CHECK_THAT(run.err, Contains("error: " + config.string() + ":20:1: [plugins." + c.plugin +
                                         "]: the plugin refused its options: " + c.message + "\n"));
        }
    }
}

TEST_CASE("metrics_logger says when a new run writes over an earlier run's files", "[plugins][metrics_logger]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(1, "\n[plugins.metrics_logger]\ndir = \"" + (dir.path() / "logs").string() +
                                                           "\"\n"));
    auto first = run_trainhost({"--config", config.string(), "--plugins=metrics_logger"});
    REQUIRE(first.exit_code == 0);
    CHECK_THAT(first.err, !Contains("earlier run"));
    auto second = run_trainhost({"--config", config.string(), "--plugins=metrics_logger"});
    REQUIRE(second.exit_code == 0);
    for (const char* file : {"metrics.csv", "metrics.jsonl"})
        CHECK_THAT(second.err, Contains("warning: [metrics_logger] " + (dir.path() / "logs" / file).string() +
                                        " holds an earlier run's rows; this run writes it afresh (another dir or prefix "
                                        "keeps both)\n"));
}
