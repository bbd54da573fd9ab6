// metrics_logger: every metric, per optimizer step and per epoch, to CSV and/or JSON
// Lines, each row flushed as it is written so a crash loses nothing already logged.
//
// Files: <dir>/<prefix>.csv and <dir>/<prefix>.jsonl, one pair per run. The first fit
// truncates them (with a warning where they held rows); later fits of --repeat N and a fit resumed from a checkpoint append
// (the `fit` column tells repeats apart; rows the interrupted run logged after its
// checkpoint stay, so a step may appear twice, the later row being the one that counts).
//
// Rows: kind ("step" | "epoch" | "test"), fit, epoch (0-based, as in train_state and
// the report), step (global_step), then every metric as it stands at that moment, in
// key order: a step row every `every_n_steps` optimizer steps (batch_end), an epoch
// row at epoch_end, after validation, and a test row at fit_end where the fit
// evaluated a test split. A step row thus repeats the last epoch end's val_*
// and train_* (Lightning's CSVLogger leaves them empty there): plot those from the
// epoch rows. An epoch row without a validation (check_val_every_n_epoch, or a stop
// that took effect before the epoch's first batch) leaves val_* out, as they would be
// an earlier epoch's.
//
// CSV keeps one header naming every column, as pandas expects. The metric set grows
// during a fit (val_* appear at the first epoch end), so a row bringing a new key
// rewrites the file once, the column added at the end and an empty cell in each
// earlier row, through a temporary file renamed over the old one (a crash leaves one
// or the other). New keys stop appearing after the first epoch, but for the test
// row's test_*, which rewrite it once more at the fit's end (a repeat's test row
// finds its columns there). NaN and infinities are null in JSON Lines, nan/inf/-inf
// in CSV (both read back by pandas).
#include <trainhost/sdk.hpp>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <unistd.h>
#include <utility>
#include <vector>

namespace {

using trainhost::sdk::Context;
namespace fs = std::filesystem;

[[noreturn]] void fail(const std::string& what, const std::string& path) {
    throw std::runtime_error(what + " '" + path + "': " + std::strerror(errno));
}

std::string number(double value) {
    if (std::isnan(value)) return "nan";
    if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
    char text[32];
    auto end = std::to_chars(text, text + sizeof text, value).ptr;  // shortest text that reads back exactly
    return std::string(text, end);
}

std::string csv_field(std::string text) {
    for (char& c : text)
        if (c == '\n' || c == '\r') c = ' ';  // one record per line keeps the rewrite a line-by-line copy
    if (text.find_first_of(",\"") == std::string::npos) return text;
    std::string quoted = "\"";
    for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
    return quoted + "\"";
}

// The fields of one CSV line (RFC 4180 quoting), to read back an existing header.
std::vector<std::string> csv_fields(const std::string& line) {
    std::vector<std::string> fields(1);
    bool quoted = false;
    for (std::size_t i = 0; i < line.size(); ++i) {
        const char c = line[i];
        if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') fields.back() += line[i++];
        else if (c == '"') quoted = !quoted;
        else if (c == ',' && !quoted) fields.emplace_back();
        else fields.back() += c;
    }
    return fields;
}

std::string json_string(const std::string& text) {
    std::string out = "\"";
    for (unsigned char c : text) {
        if (c == '"' || c == '\\') out += {'\\', static_cast<char>(c)};
        else if (c < 0x20) {
            char escaped[8];
            std::snprintf(escaped, sizeof escaped, "\\u%04x", c);
            out += escaped;
        } else out += static_cast<char>(c);
    }
    return out + "\"";
}

std::string read_all(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("cannot read", path);
    std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    if (in.bad()) fail("cannot read", path);
    return text;
}

// A file written row by row; every row reaches the kernel before write() returns.
class RowFile {
public:
    RowFile() = default;
    RowFile(const RowFile&) = delete;
    RowFile& operator=(const RowFile&) = delete;
    ~RowFile() {
        if (file_) std::fclose(file_);
    }

    void open(std::string path, bool append) {
        path_ = std::move(path);
        file_ = std::fopen(path_.c_str(), append ? "a" : "w");
        if (!file_) fail("cannot open", path_);
    }
    void write(const std::string& text) {
        if (std::fputs(text.c_str(), file_) == EOF || std::fflush(file_) == EOF) fail("cannot write", path_);
    }
    // fflush covers a crash of the process; fsync, done at epoch rows and on close,
    // also covers a crash of the machine without paying a disk sync per step.
    void sync() {
        if (file_ && fsync(fileno(file_)) != 0) fail("cannot sync", path_);
    }
    void close() {
        if (!file_) return;
        sync();
        const int status = std::fclose(std::exchange(file_, nullptr));
        if (status != 0) fail("cannot close", path_);
    }
    [[nodiscard]] bool is_open() const noexcept { return file_ != nullptr; }
    [[nodiscard]] const std::string& path() const noexcept { return path_; }

private:
    std::string path_;
    std::FILE* file_ = nullptr;
};

class MetricsLogger final : public trainhost::sdk::Callback {
public:
    static constexpr const char* name = "metrics_logger";
    static constexpr const char* version = "1.2.1";  // 1.2.1: dir checked at create, test row by test_loss; 1.2: a test row
    static constexpr const char* description = "every metric per step and per epoch to CSV and JSON Lines";
    static constexpr const char* reads = "metrics";
    static constexpr th_option_spec options[] = {
        {"dir", TH_OPTION_STRING, "\"logs\"", "directory of the log files, created if missing"},
        {"format", TH_OPTION_STRING, "\"both\"", "both, csv or jsonl"},
        {"every_n_steps", TH_OPTION_INT, "1", "a step row every N optimizer steps; 0: epoch rows only"},
        {"prefix", TH_OPTION_STRING, "\"metrics\"", "file name stem: <dir>/<prefix>.csv, <dir>/<prefix>.jsonl"},
    };

    MetricsLogger(Context&, const trainhost::sdk::Options& options)
        : dir_(options.get_string("dir")), prefix_(options.get_string("prefix")),
          every_n_steps_(options.get_int("every_n_steps")) {
        const std::string format = options.get_string("format");
        if (format != "both" && format != "csv" && format != "jsonl")
            throw trainhost::sdk::OptionError("format must be both, csv or jsonl, not '" + format + "'");
        if (every_n_steps_ < 0) throw trainhost::sdk::OptionError("every_n_steps must be >= 0");
        if (dir_.empty()) throw trainhost::sdk::OptionError("dir must not be empty");
        // A file there is a slip in the config, found before the run (one that cannot be
        // made is found at fit_start, where it would be made).
        if (std::error_code error; fs::exists(dir_, error) && !fs::is_directory(dir_, error))
            throw trainhost::sdk::OptionError("dir '" + dir_ + "' names a file, not a directory");
        if (prefix_.empty() || prefix_.find('/') != std::string::npos)
            throw trainhost::sdk::OptionError("prefix must be a non-empty file name without '/', not '" + prefix_ + "'");
        csv_wanted_ = format != "jsonl";
        jsonl_wanted_ = format != "csv";
    }

    // Files are opened here, not in the constructor, so that a bad path is a hook
    // failure of this plugin (named, with the path) rather than a refused instance.
    void on_fit_start(Context& ctx) override {
        const auto state = ctx.state();
        // As Lightning's loggers, a fast_dev_run logs nothing: no file is opened, so no
        // row is written, and an earlier run's files stay as they are.
        if (state.fast_dev_run > 0) return;
        // A later repeat, or resumed (at step 0 too; a host before ABI 1.11 does not say,
        // and a resume is then told by a step taken).
        const bool append = state.fit_index > 0 || state.resumed != 0 || state.global_step > 0;
        std::error_code error;
        fs::create_directories(dir_, error);
        if (error) throw std::runtime_error("cannot create directory '" + dir_ + "': " + error.message());
        const std::string stem = (fs::path(dir_) / prefix_).string();
        // A new run starts the files afresh: say so where that drops an earlier run's rows.
        for (const auto& [wanted, path] : {std::pair{csv_wanted_, stem + ".csv"}, std::pair{jsonl_wanted_, stem + ".jsonl"}})
            if (wanted && !append && fs::file_size(path, error) > 0 && !error)
                ctx.warn(path + " holds an earlier run's rows; this run writes it afresh (another dir or prefix keeps both)");
        error.clear();
        if (csv_wanted_) {
            const std::string path = stem + ".csv";
            if (append && fs::exists(path)) {
                const std::string text = read_all(path);
                if (!text.empty()) {
                    columns_ = csv_fields(text.substr(0, text.find('\n')));
                    columns_.erase(columns_.begin(), columns_.begin() + std::min<std::size_t>(4, columns_.size()));
                    header_written_ = true;
                }
            }
            csv_.open(path, append);
        }
        if (jsonl_wanted_) jsonl_.open(stem + ".jsonl", append);
        last_logged_step_ = state.global_step;
    }

    void on_batch_end(Context& ctx) override {
        const auto state = ctx.state();
        // Only a step actually taken is logged (a skipped batch leaves global_step as is).
        if (every_n_steps_ == 0 || state.global_step == last_logged_step_ ||
            state.global_step % static_cast<std::uint64_t>(every_n_steps_) != 0)
            return;
        last_logged_step_ = state.global_step;
        log_row(ctx, "step", state);
    }

    void on_epoch_start(Context&) override { validation_.epoch_started(); }
    void on_validation_end(Context& ctx) override { validation_.validation_ended(ctx.state()); }

    void on_epoch_end(Context& ctx) override {
        log_row(ctx, "epoch", ctx.state());
        csv_.sync();
        jsonl_.sync();
    }

    // Lightning's loggers log the test metrics too: they come after the last epoch
    // end, so they get a row of their own, where the fit evaluated a test split.
    void on_fit_end(Context& ctx) override {
        // The core's test_loss tells an evaluated test split; a plugin's test_* metric does not.
        if (!ctx.metric("test_loss")) return;
        log_row(ctx, "test", ctx.state());
        csv_.sync();
        jsonl_.sync();
    }

    void on_teardown(Context&) override {
        csv_.close();
        jsonl_.close();
    }

private:
    void log_row(Context& ctx, const char* kind, const trainhost::sdk::TrainState& state) {
        auto metrics = ctx.metrics();
        if (std::string_view(kind) == "epoch" && !validation_.validated_in_epoch())
            std::erase_if(metrics, [](const auto& metric) { return metric.first.starts_with("val_"); });
        // A metric may not pass for one of the fixed columns: "epoch" is written
        // "metric:epoch", and so that no other metric can have that name in any row, one
        // named "metric:..." gains the prefix too (the names stay apart, row after row).
        for (auto& metric : metrics)
            if (metric.first == "kind" || metric.first == "fit" || metric.first == "epoch" || metric.first == "step" ||
                metric.first.starts_with("metric:"))
                metric.first = "metric:" + metric.first;
        const std::string fixed = std::string(kind) + "," + std::to_string(state.fit_index) + "," +
                                  std::to_string(state.epoch) + "," + std::to_string(state.global_step);
        if (csv_.is_open()) write_csv(fixed, metrics);
        if (jsonl_.is_open()) {
            std::string line = "{\"kind\":\"" + std::string(kind) + "\",\"fit\":" + std::to_string(state.fit_index) +
                               ",\"epoch\":" + std::to_string(state.epoch) +
                               ",\"step\":" + std::to_string(state.global_step);
            for (const auto& [key, value] : metrics)
                line += "," + json_string(key) + ":" + (std::isfinite(value) ? number(value) : "null");
            jsonl_.write(line + "}\n");
        }
    }

    void write_csv(const std::string& fixed, const std::vector<std::pair<std::string, double>>& metrics) {
        std::vector<std::string> added;
        for (const auto& metric : metrics)
            if (std::find(columns_.begin(), columns_.end(), metric.first) == columns_.end()) added.push_back(metric.first);
        if (!added.empty() || !header_written_) add_columns(added);
        std::string line = fixed;
        for (const std::string& column : columns_) {
            line += ',';
            for (const auto& [key, value] : metrics)
                if (key == column) line += number(value);
        }
        csv_.write(line + "\n");
    }

    // Extends the header by `added` and pads every row already written with empty
    // cells, through a temporary file renamed over the old one.
    void add_columns(const std::vector<std::string>& added) {
        columns_.insert(columns_.end(), added.begin(), added.end());
        std::string header = "kind,fit,epoch,step";
        for (const std::string& column : columns_) header += "," + csv_field(column);
        if (!header_written_) {
            header_written_ = true;
            csv_.write(header + "\n");
            return;
        }
        const std::string path = csv_.path();
        csv_.close();
        const std::string old_text = read_all(path);
        std::string text = header + "\n";
        const std::string padding(added.size(), ',');
        for (std::size_t at = old_text.find('\n'); at != std::string::npos && at + 1 < old_text.size();) {
            const std::size_t end = old_text.find('\n', at + 1);
            text += old_text.substr(at + 1, end == std::string::npos ? std::string::npos : end - at - 1) + padding + "\n";
            at = end;
        }
        RowFile rewritten;
        rewritten.open(path + ".tmp", false);
        rewritten.write(text);
        rewritten.close();
        if (std::rename((path + ".tmp").c_str(), path.c_str()) != 0) fail("cannot replace", path);
        csv_.open(path, true);
    }

    std::string dir_;
    std::string prefix_;
    std::int64_t every_n_steps_;
    bool csv_wanted_ = true;
    bool jsonl_wanted_ = true;
    RowFile csv_;
    RowFile jsonl_;
    std::vector<std::string> columns_;  // metric columns, after kind, fit, epoch, step
    bool header_written_ = false;
    std::uint64_t last_logged_step_ = 0;
    trainhost::sdk::ValidationTracker validation_;
};

}  // namespace

TRAINHOST_PLUGIN(MetricsLogger)
