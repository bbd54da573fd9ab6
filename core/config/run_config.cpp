#include "config/run_config.hpp"

#include "config/table_reader.hpp"
#include "errors.hpp"

#include <algorithm>
#include <cctype>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <string_view>
#include <vector>

namespace trainhost::config {

namespace {

// Where the config's relative paths start: its own directory, or for a pipe
// (--config <(...), whose directory is /dev/fd) or a descriptor (--config /dev/stdin <
// run.toml, a regular file whose name's directory is /dev) the working directory.
std::filesystem::path relative_base(const std::filesystem::path& config_file) {
    std::error_code ec;
    const auto status = std::filesystem::status(config_file, ec);
    const std::string name = config_file.lexically_normal().string();
    const bool descriptor = name == "/dev/stdin" || name.starts_with("/dev/fd/") ||
                            (name.starts_with("/proc/") && name.find("/fd/") != std::string::npos);
    return descriptor || (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status))
               ? std::filesystem::path()
               : config_file.parent_path();
}

constexpr std::int64_t kMaxWidth = std::int64_t{1} << 24;
constexpr std::size_t kMaxConfigBytes = std::size_t{16} << 20;  // a config with 1,000 plugin tables is under 1 MiB

LayerSpec read_layer(const toml::table& table, std::size_t index, const std::filesystem::path& file) {
    TableReader reader(table, fmt::format("[[model.layers]] #{}", index + 1), file);
    LayerSpec layer;
    layer.origin = source_position(file, table.source());
    reader.require("type", "a layer needs one (dense, relu, sigmoid, tanh, flatten, dropout, conv2d or max_pool2d)");
    layer.type = reader.one_of("type", "", {"dense", "relu", "sigmoid", "tanh", "flatten", "dropout", "conv2d", "max_pool2d"});
    if (layer.type == "conv2d") {
        reader.require("channels", "a conv2d layer needs its output channels");
        layer.units = static_cast<std::size_t>(reader.integer_in("channels", 0, 1, 1 << 16));
        layer.kernel = static_cast<std::size_t>(reader.integer_in("kernel", 3, 1, 64));
        layer.stride = static_cast<std::size_t>(reader.integer_in("stride", 1, 1, 64));
        layer.padding = static_cast<std::size_t>(reader.integer_in("padding", 0, 0, 64));
    } else if (layer.type == "max_pool2d") {
        layer.kernel = static_cast<std::size_t>(reader.integer_in("kernel", 2, 1, 64));
        layer.stride = static_cast<std::size_t>(reader.integer_in("stride", static_cast<std::int64_t>(layer.kernel), 1, 64));
    } else if (layer.type == "dense") {
        reader.require("units", "a dense layer needs its output width");
        layer.units = static_cast<std::size_t>(reader.integer_in("units", 0, 1, kMaxWidth));
    } else if (layer.type == "dropout") {
        layer.rate = reader.number_in("rate", 0.5, 0.0, 0.99);
    }
    reader.reject_unknown_keys(fmt::format("a {} layer", layer.type));
    return layer;
}

void read_model(TableReader& root, RunConfig& config) {
    const toml::table* table = root.table("model");
    if (!table) root.fail("model", "missing: the config needs a [model] table with its layers");
    TableReader reader(*table, "[model]", config.file);
    config.model.loss = reader.one_of("loss", "cross_entropy", {"cross_entropy", "bce_with_logits", "mse"});
    config.model.loss_origin = reader.position_of("loss");
    const toml::array* layers = reader.array("layers");
    if (!layers || layers->empty()) reader.fail("layers", "missing or empty: list the layers as [[model.layers]]");
    for (std::size_t i = 0; i < layers->size(); ++i) {
        const toml::table* layer = layers->get(i)->as_table();
        if (!layer)
            throw ConfigError(fmt::format("{}: [model] layers #{}: expected a table like {{ type = \"dense\", units = 10 }}",
                                          source_position(config.file, layers->get(i)->source()), i + 1));
        config.model.layers.push_back(read_layer(*layer, i, config.file));
    }
    reader.reject_unknown_keys();
}

void read_optimizer(TableReader& root, RunConfig& config) {
    OptimizerSpec& o = config.optimizer;
    const toml::table* table = root.table("optimizer");
    if (!table) return;
    TableReader reader(*table, "[optimizer]", config.file);
    o.type = reader.one_of("type", o.type, {"sgd", "adam", "adamw"});
    o.lr = reader.number_in("lr", o.type == "sgd" ? 0.01 : 1e-3, 0.0, kMaxLearningRate);
    o.weight_decay = reader.number_in("weight_decay", o.type == "adamw" ? 1e-2 : 0.0, 0.0, 1e3);
    if (o.type == "sgd") {
        o.momentum = reader.number_in("momentum", 0.0, 0.0, 1.0);
        o.dampening = reader.number_in("dampening", 0.0, 0.0, 1.0);
        o.nesterov = reader.boolean("nesterov").value_or(false);
        if (o.nesterov && (o.momentum <= 0 || o.dampening != 0))
            reader.fail("nesterov", "needs momentum > 0 and dampening = 0");
    } else {
        o.beta1 = reader.number_in("beta1", o.beta1, 0.0, 0.999999);
        o.beta2 = reader.number_in("beta2", o.beta2, 0.0, 0.999999);
        o.eps = reader.number_in("eps", o.eps, 0.0, 1.0);
    }
    o.gradient_clip_val = reader.number_in("gradient_clip_val", 0.0, 0.0, 1e6);
    o.gradient_clip_algorithm = reader.one_of("gradient_clip_algorithm", o.gradient_clip_algorithm, {"norm", "value"});
    o.accumulate_grad_batches =
        static_cast<std::size_t>(reader.integer_in("accumulate_grad_batches", 1, 1, kMaxAccumulatedBatches));
    reader.reject_unknown_keys();
}

void read_data(TableReader& root, RunConfig& config) {
    DataSpec& d = config.data;
    const toml::table* table = root.table("data");
    if (!table) return;
    TableReader reader(*table, "[data]", config.file);
    d.dataset = reader.one_of("dataset", d.dataset, {"fashion_mnist", "synthetic_autoencoder"});
    d.batch_size = static_cast<std::size_t>(reader.integer_in("batch_size", 64, 1, 1 << 20));
    d.validation_fraction = reader.number_in("validation_fraction", d.validation_fraction, 0.0, 0.9);
    d.shuffle = reader.boolean("shuffle").value_or(true);
    d.limit_train_batches = reader.integer_in("limit_train_batches", -1, -1, INT64_MAX);
    d.limit_val_batches = reader.integer_in("limit_val_batches", -1, -1, INT64_MAX);
    // A key of the other dataset is named as such, not as a likely misspelling.
    static const std::map<std::string, std::vector<std::string_view>> kDatasetKeys = {
        {"fashion_mnist", {"path", "limit", "test", "limit_test_batches"}},
        {"synthetic_autoencoder", {"samples", "width", "latent"}}};
    for (const auto& [dataset, keys] : kDatasetKeys)
        for (const std::string_view key : keys)
            if (dataset != d.dataset && table->contains(key))
                reader.fail(key, fmt::format("is read only with dataset = \"{}\"; this config's is \"{}\"", dataset,
                                             d.dataset));
    if (d.dataset == "fashion_mnist") {
        if (auto path = reader.string("path")) {
            if (path->empty()) reader.fail("path", "needs a directory, not \"\" (leave path out for the default)");
            if (has_control_character(*path))
                reader.fail("path", fmt::format("\"{}\" holds a control character, which no directory name wants",
                                                printable(*path)));
            d.path = *path;
            if (d.path.is_relative()) d.path = relative_base(config.file) / d.path;
        }
        d.limit = static_cast<std::size_t>(reader.integer_in("limit", 0, 0, 1'000'000'000));
        d.test = reader.boolean("test").value_or(true);
        d.limit_test_batches = reader.integer_in("limit_test_batches", -1, -1, INT64_MAX);
    } else {
        d.samples = static_cast<std::size_t>(reader.integer_in("samples", 1024, 1, 10'000'000));
        d.width = static_cast<std::size_t>(reader.integer_in("width", 3072, 1, kMaxWidth));
        d.latent = static_cast<std::size_t>(reader.integer_in("latent", 6, 1, kMaxWidth));
    }
    reader.reject_unknown_keys();
}

void read_resources(TableReader& root, RunConfig& config) {
    const toml::table* table = root.table("resources");
    if (!table) return;
    TableReader reader(*table, "[resources]", config.file);
    std::string policy = reader.one_of("on_violation", "fail", {"fail", "warn", "ignore"});
    config.on_violation = policy == "fail"   ? resources::ViolationPolicy::fail
                          : policy == "warn" ? resources::ViolationPolicy::warn
                                             : resources::ViolationPolicy::ignore;
    config.allocation_stacks = reader.boolean("allocation_stacks").value_or(false);
    reader.reject_unknown_keys();
}

// Moves the tables out of the parsed document: a move keeps their source positions.
void read_plugin_tables(TableReader& reader, toml::table& root, RunConfig& config) {
    if (!reader.table("plugins")) return;
    for (auto& [name, node] : *root.get_as<toml::table>("plugins")) {
        toml::table* options = node.as_table();
        if (!options)
            throw ConfigError(fmt::format("{}: [plugins] {}: expected a table of options, found a value",
                                          source_position(config.file, node.source()), name.str()));
        config.plugin_tables.emplace(std::string(name.str()), std::make_shared<const toml::table>(std::move(*options)));
    }
}

}  // namespace

bool is_device_name(std::string_view name) {
    if (name == "auto" || name == "cpu" || name == "cuda") return true;
    for (std::string_view prefix : {"cpu:", "cuda:"}) {
        if (!name.starts_with(prefix) || name.size() == prefix.size() || name.size() > prefix.size() + 3) continue;
        std::string_view ordinal = name.substr(prefix.size());
        // As the devices are named (cpu:1, never cpu:01), so a name that passes is one a run may have.
        return (ordinal == "0" || ordinal[0] != '0') &&
               std::all_of(ordinal.begin(), ordinal.end(), [](char c) { return c >= '0' && c <= '9'; });
    }
    return false;
}

std::string read_config_text(const std::filesystem::path& file) {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw ConfigError(fmt::format("{}: cannot open config file", file.string()));
    // Read up to a bound, not whole: --config may name a pipe (--config <(...)), and
    // /dev/zero or a wrong path to a large file would otherwise be read until memory ends.
    std::string text;
    char chunk[1 << 16];
    while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
        text.append(chunk, static_cast<std::size_t>(in.gcount()));
        if (text.size() > kMaxConfigBytes)
            throw ConfigError(fmt::format("{}: more than {} MiB: not a run config (is it the right file?)",
                                          file.string(), kMaxConfigBytes >> 20));
    }
    if (in.bad()) throw ConfigError(fmt::format("{}: cannot read config file", file.string()));
    return text;
}

namespace {

// A key is printed as it is spelt in every message about it (see has_control_character).
void refuse_control_characters(const toml::node& node, const std::filesystem::path& file) {
    if (const toml::table* table = node.as_table()) {
        for (const auto& [key, value] : *table) {
            if (has_control_character(key.str()))
                throw ConfigError(fmt::format("{}: key '{}' holds a control character", source_position(file, key.source()),
                                              printable(key.str())));
            refuse_control_characters(value, file);
        }
    } else if (const toml::array* array = node.as_array()) {
        for (const toml::node& element : *array) refuse_control_characters(element, file);
    }
}

// Where the string opening at `open` ends (the index of its last quote), or npos if it does not.
std::size_t string_end(std::string_view text, std::size_t open) {
    const char quote = text[open];
    const bool multi_line = text.compare(open, 3, std::string(3, quote)) == 0;
    const bool escapes = quote == '"';
    for (std::size_t i = open + (multi_line ? 3 : 1); i < text.size(); ++i) {
        if (escapes && text[i] == '\\') ++i;
        else if (text[i] == '\n' && !multi_line) return std::string_view::npos;
        else if (text[i] == quote && (!multi_line || text.compare(i, 3, std::string(3, quote)) == 0)) {
            if (!multi_line) return i;
            std::size_t end = i + 2;  // up to two more quotes belong to the string
            for (int extra = 0; extra < 2 && end + 1 < text.size() && text[end + 1] == quote; ++extra) ++end;
            return end;
        }
    }
    return std::string_view::npos;
}

// toml++ parses a dotted key (a.b.c = 1, [a.b.c]) by recursion, a level per part, with
// no limit of its own (its nesting limit covers arrays and inline tables): a key of
// 50,000 parts, a 100 KB file, overflowed the stack. Scanned first, strings and comments
// skipped: no value holds as many dots outside a string.
constexpr std::size_t kMostKeyParts = 256;

void refuse_deep_keys(std::string_view text, const std::filesystem::path& file) {
    std::size_t dots = 0, line = 1, line_start = 0;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (c == '#') {
            i = text.find('\n', i);
            if (i == std::string_view::npos) return;
            --i;  // the newline ends the key below
        } else if (c == '"' || c == '\'') {
            const std::size_t end = string_end(text, i);  // a quoted part of a key goes on with the key
            if (end == std::string_view::npos) return;     // unterminated: the parser says where
            for (; i < end; ++i)
                if (text[i] == '\n') line_start = i + 1, ++line;
        } else if (c == '.') {
            if (++dots >= kMostKeyParts)
                throw ConfigError(fmt::format("{}:{}:{}: invalid TOML: a dotted key or table name of more than {} "
                                              "parts",
                                              file.string(), line, i - line_start + 1, kMostKeyParts));
        } else if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != ' ' && c != '\t') {
            dots = 0;
            if (c == '\n') line_start = i + 1, ++line;
        }
    }
}

}  // namespace

toml::table parse_toml(std::string_view text, const std::filesystem::path& file) {
    refuse_deep_keys(text, file);
    toml::table table;
    try {
        table = toml::parse(text, file.string());
    } catch (const toml::parse_error& e) {
        throw ConfigError(fmt::format("{}: invalid TOML: {}", source_position(file, e.source()), e.description()));
    }
    refuse_control_characters(table, file);
    return table;
}

RunConfig parse_run_config(std::string_view text, const std::filesystem::path& file) {
    toml::table root = parse_toml(text, file);
    RunConfig config;
    config.file = file;
    TableReader reader(root, "run config", file);
    config.mode = reader.one_of("mode", "train", {"train", "predict"});
    config.seed = static_cast<std::uint64_t>(reader.integer_in("seed", 42, 0, INT64_MAX));
    config.epochs_given = reader.has("epochs");
    config.epochs = static_cast<std::uint32_t>(reader.integer_in("epochs", 1, 0, kMaxEpochs));
    // Lightning's -1 for no limit; 0 would train nothing, which epochs = 0 says.
    if (const std::int64_t max_steps = reader.integer_in("max_steps", -1, -1, INT64_MAX); max_steps == 0)
        reader.fail("max_steps", "0 would train nothing (epochs = 0 does that); -1 sets no limit");
    else
        config.max_steps = max_steps < 0 ? 0 : static_cast<std::uint64_t>(max_steps);
    settle_epochs(config);
    config.min_epochs = static_cast<std::uint32_t>(reader.integer_in("min_epochs", 0, 0, kMaxEpochs));
    config.min_steps = static_cast<std::uint64_t>(reader.integer_in("min_steps", 0, 0, INT64_MAX));
    config.check_val_every_n_epoch =
        static_cast<std::uint32_t>(reader.integer_in("check_val_every_n_epoch", 1, 1, kMaxEpochs));
    config.num_sanity_val_steps = reader.integer_in("num_sanity_val_steps", 0, -1, INT64_MAX);
    config.fast_dev_run = reader.count_or_boolean_in("fast_dev_run", 0, INT64_MAX);
    // A quick check of a fit: a predict run has none to check (Lightning's would limit
    // the predict batches, which [predict] passes does here).
    if (config.fast_dev_run > 0 && config.mode == "predict")
        reader.fail("fast_dev_run", "checks a training fit; this config predicts ([predict] passes limits its batches)");
    config.device = reader.string("device").value_or("auto");
    if (!is_device_name(config.device))
        reader.fail("device", fmt::format("\"{}\" is not a device (auto, cpu, cpu:N, cuda or cuda:N)", printable(config.device)));
    if (reader.has("device")) config.device_origin = fmt::format("{}: device \"{}\"", reader.position_of("device"), config.device);
    config.threads = static_cast<int>(reader.integer_in("threads", 0, 0, 1024));
    read_data(reader, config);
    read_model(reader, config);
    read_optimizer(reader, config);
    read_resources(reader, config);
    if (const toml::table* predict = reader.table("predict")) {
        // As a key of the other dataset or optimizer: set for nothing, it would
        // silently not apply.
        if (config.mode != "predict")
            reader.fail("predict", "is read only with mode = \"predict\"; this config trains");
        TableReader predict_reader(*predict, "[predict]", config.file);
        if (predict_reader.has("passes"))
            config.predict_passes = static_cast<std::uint64_t>(predict_reader.integer_in("passes", 1, 1, 1'000'000'000));
        config.predict_split = predict_reader.one_of("split", "train", {"train", "validation", "test"});
        if (config.predict_split == "test" && config.data.dataset != "fashion_mnist")
            predict_reader.fail("split", fmt::format("dataset {} has no test split", config.data.dataset));
        if (config.predict_split == "test" && !config.data.test)
            predict_reader.fail("split", "\"test\" needs the test files: [data] test = false leaves them out");
        if (auto output = predict_reader.string("output")) {
            if (output->empty()) predict_reader.fail("output", "needs a path, not \"\"");
            if (has_control_character(*output))
                predict_reader.fail("output", fmt::format("\"{}\" holds a control character, which no file name wants",
                                                          printable(*output)));
            config.predict_output = *output;
            if (config.predict_output.is_relative()) config.predict_output = relative_base(config.file) / config.predict_output;
        }
        predict_reader.reject_unknown_keys();
    }
    read_plugin_tables(reader, root, config);
    reader.reject_unknown_keys();
    return config;
}

void settle_epochs(RunConfig& config) noexcept {
    if (!config.epochs_given) config.epochs = config.max_steps > 0 && config.mode == "train" ? kMaxEpochs : 1;
}

std::string apply_fast_dev_run(RunConfig& config) {
    const std::int64_t batches = config.fast_dev_run;
    if (batches <= 0) return {};
    config.epochs = 1;
    config.epochs_given = true;
    config.max_steps = 0;
    config.min_epochs = 0;
    config.min_steps = 0;
    config.check_val_every_n_epoch = 1;
    config.num_sanity_val_steps = 0;
    config.data.limit_train_batches = config.data.limit_val_batches = config.data.limit_test_batches = batches;
    return fmt::format("fast_dev_run = {}: one epoch of at most {} batch{} each of training, validation and test; "
                       "plugins that honour it (checkpoint, early_stopping, metrics_logger) save, stop and log nothing",
                       batches, batches, batches == 1 ? "" : "es");
}

RunConfig load_run_config(const std::filesystem::path& file) { return parse_run_config(read_config_text(file), file); }

}  // namespace trainhost::config
