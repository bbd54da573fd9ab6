#include "config/run_config.hpp"
#include "plugin/plugin_options.hpp"
#include "config/table_reader.hpp"
#include "errors.hpp"
#include "trainhost/nearest_name.hpp"

#include <catch2/catch.hpp>
#include <set>

using trainhost::ConfigError;
using trainhost::config::kMaxEpochs;
using trainhost::config::parse_run_config;
using trainhost::config::settle_epochs;

TEST_CASE("a full config is read with its values", "[config]") {
    auto config = parse_run_config(R"(seed = 3
epochs = 4
[data]
dataset = "synthetic_autoencoder"
samples = 100
batch_size = 10
[model]
loss = "mse"
layers = [ { type = "dense", units = 5 }, { type = "dropout", rate = 0.25 }, { type = "sigmoid" } ]
[optimizer]
type = "sgd"
lr = 0.5
momentum = 0.9
nesterov = true
[resources]
on_violation = "warn"
[plugins.early_stopping]
patience = 2
)",
                                   "run.toml");
    CHECK(config.seed == 3);
    CHECK(config.epochs == 4);
    CHECK(config.data.samples == 100);
    CHECK(config.model.loss == "mse");
    REQUIRE(config.model.layers.size() == 3);
    CHECK(config.model.layers[1].rate == 0.25);
    CHECK(config.optimizer.nesterov);
    CHECK(config.on_violation == trainhost::resources::ViolationPolicy::warn);
    CHECK(config.plugin_tables.count("early_stopping") == 1);
}

TEST_CASE("config errors point at the spot", "[config]") {
    const std::string model = "[model]\nlayers = [ { type = \"dense\", units = 10 } ]\n";
    // A path or name would end at the NUL on its way to the system: refused, not cut.
    CHECK_THROWS_WITH(parse_run_config("[data]\npath = \"data\\u0000/junk\"\n" + model, "r.toml"),
                      "r.toml:2:8: [data] path: contains a NUL character (\\u0000)");
    // A key is printed in messages as it is spelt: a NUL would cut them short, an escape would act on the terminal.
    CHECK_THROWS_WITH(parse_run_config("\"se\\u0000ed\" = 1\n" + model, "r.toml"),
                      "r.toml:1:1: key 'se\\u0000ed' holds a control character");
    CHECK_THROWS_WITH(parse_run_config("[model]\nlayers = [ { type = \"dense\", \"\\u001b[2J\" = 10 } ]\n", "r.toml"),
                      "r.toml:2:30: key '\\u001b[2J' holds a control character");
    CHECK_THROWS_WITH(parse_run_config(model + "[plugins.\"p\\u0007\"]\nx = 1\n", "r.toml"),
                      "r.toml:3:10: key 'p\\u0007' holds a control character");
    // A C1 control (the 8-bit CSI, U+009B) acts on a terminal as ESC [ does.
    CHECK_THROWS_WITH(parse_run_config("\"bad\\u009b31m\" = 1\n" + model, "r.toml"),
                      "r.toml:1:1: key 'bad\\u009b31m' holds a control character");
    // So do paths, which messages quote.
    CHECK_THROWS_WITH(parse_run_config("[data]\npath = \"no\\u001b[31mwhere\"\n" + model, "r.toml"),
                      "r.toml:2:8: [data] path: \"no\\u001b[31mwhere\" holds a control character, which no directory "
                      "name wants");
    CHECK_THROWS_WITH(parse_run_config("mode = \"predict\"\n[predict]\noutput = \"p\\u009b.csv\"\n" + model, "r.toml"),
                      "r.toml:3:10: [predict] output: \"p\\u009b.csv\" holds a control character, which no file name "
                      "wants");
    CHECK_THROWS_WITH(parse_run_config("seeed = 1\n" + model, "r.toml"),
                      "r.toml:1:1: unknown key 'seeed' in run config; did you mean 'seed'?");
    CHECK_THROWS_WITH(parse_run_config("[model]\nlayers = [ { type = \"dens\", units = 10 } ]\n", "r.toml"),
                      Catch::Contains("r.toml:2:21") && Catch::Contains("did you mean \"dense\"?"));
    CHECK_THROWS_WITH(parse_run_config("[model]\nlayers = [ { type = \"dense\" } ]\n", "r.toml"),
                      "r.toml:2:12: [[model.layers]] #1 units: missing: a dense layer needs its output width");
    // A required key misspelt: the misspelling is named where it stands.
    CHECK_THROWS_WITH(parse_run_config("[model]\nlayers = [ { type = \"dense\", unit = 16 } ]\n", "r.toml"),
                      "r.toml:2:30: [[model.layers]] #1 units: missing: a dense layer needs its output width; is "
                      "'unit' a misspelling of 'units'?");
    CHECK_THROWS_WITH(parse_run_config("[model]\nlayers = [ { type = \"conv2d\", channel = 4 } ]\n", "r.toml"),
                      Catch::EndsWith("#1 channels: missing: a conv2d layer needs its output channels; is 'channel' a "
                                      "misspelling of 'channels'?"));
    CHECK_THROWS_WITH(parse_run_config("[model]\nlayers = [ { typ = \"dense\", units = 4 } ]\n", "r.toml"),
                      Catch::EndsWith("#1 type: missing: a layer needs one (dense, relu, sigmoid, tanh, flatten, dropout, "
                                      "conv2d or max_pool2d); is 'typ' a misspelling of 'type'?"));
    CHECK_THROWS_WITH(parse_run_config("epochs = -1\n" + model, "r.toml"),
                      "r.toml:1:10: run config epochs: -1 is out of range [0, 1000000]");
    CHECK_THROWS_WITH(parse_run_config("seed = 1\n", "r.toml"), Catch::Contains("needs a [model] table"));
    CHECK_THROWS_WITH(parse_run_config(model + "[optimizer]\ntype = \"sgd\"\nbeta1 = 0.9\n", "r.toml"),
                      Catch::Contains("unknown key 'beta1' in [optimizer]"));
    CHECK_THROWS_AS(parse_run_config("[[[", "r.toml"), ConfigError);
    CHECK_THROWS_WITH(parse_run_config("[[[", "r.toml"),
                      "r.toml:1:3: invalid TOML: Error while parsing key: expected bare key starting character or string "
                      "delimiter, saw '['");
    CHECK_THROWS_WITH(parse_run_config(model + "[predict]\npasses = 3\n", "r.toml"),
                      "r.toml:3:1: run config predict: is read only with mode = \"predict\"; this config trains");
    CHECK(parse_run_config("mode = \"predict\"\n" + model + "[predict]\npasses = 3\n", "r.toml").predict_passes == 3);
}

TEST_CASE("each kind of config mistake is named with its place and what is expected", "[config]") {
    const std::string model = "[model]\nlayers = [ { type = \"dense\", units = 10 } ]\n";
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"[model]\nlayers = []\n", "r.toml:2:10: [model] layers: missing or empty: list the layers as [[model.layers]]"},
        {"[model]\nlayers = [ 3 ]\n", "r.toml:2:12: [model] layers #1: expected a table like { type = \"dense\", units = 10 }"},
        {"model = 3\n", "r.toml:1:9: run config model: expected a table, found an integer"},
        {"[model]\nlayers = { type = \"dense\" }\n", "r.toml:2:10: [model] layers: expected an array, found a table"},
        {"device = 3\n" + model, "r.toml:1:10: run config device: expected a string, found an integer"},
        {"mode = \"xyz\"\n" + model, "r.toml:1:8: run config mode: unknown value \"xyz\" (expected one of: predict, train)"},
        {model + "[optimizer]\ntype = \"sgd\"\nnesterov = true\n",
         "r.toml:5:12: [optimizer] nesterov: needs momentum > 0 and dampening = 0"},
        {model + "[optimizer]\ngradient_clip_val = -1.0\n",
         "r.toml:4:21: [optimizer] gradient_clip_val: -1 is out of range [0, 1000000]"},
        {model + "[optimizer]\ngradient_clip_algorithm = \"l2\"\n",
         "r.toml:4:27: [optimizer] gradient_clip_algorithm: unknown value \"l2\" (expected one of: norm, value)"},
        {"max_steps = 0\n" + model,
         "r.toml:1:13: run config max_steps: 0 would train nothing (epochs = 0 does that); -1 sets no limit"},
        {"max_steps = -2\n" + model,
         "r.toml:1:13: run config max_steps: -2 is out of range [-1, 9223372036854775807]"},
        {"max_steps = 1.5\n" + model, "r.toml:1:13: run config max_steps: expected an integer, found a float"},
        {"min_epochs = -1\n" + model, "r.toml:1:14: run config min_epochs: -1 is out of range [0, 1000000]"},
        {"min_steps = -1\n" + model, "r.toml:1:13: run config min_steps: -1 is out of range [0, 9223372036854775807]"},
        {"num_sanity_val_steps = -2\n" + model,
         "r.toml:1:24: run config num_sanity_val_steps: -2 is out of range [-1, 9223372036854775807]"},
        {"fast_dev_run = -1\n" + model, "r.toml:1:16: run config fast_dev_run: -1 is out of range [0, 9223372036854775807]"},
        {"fast_dev_run = \"yes\"\n" + model,
         "r.toml:1:16: run config fast_dev_run: expected true, false or an integer, found a string"},
        {"fast_dev_run = 1.0\n" + model,
         "r.toml:1:16: run config fast_dev_run: expected true, false or an integer, found a float"},
        {"mode = \"predict\"\nfast_dev_run = true\n" + model,
         "r.toml:2:16: run config fast_dev_run: checks a training fit; this config predicts ([predict] passes limits "
         "its batches)"},
        {"check_val_every_n_epoch = 0\n" + model,
         "r.toml:1:27: run config check_val_every_n_epoch: 0 is out of range [1, 1000000]"},
        {"check_val_every_n_epoch = 1000001\n" + model,
         "r.toml:1:27: run config check_val_every_n_epoch: 1000001 is out of range [1, 1000000]"},
        {"check_val_every_n_epoch = 2.0\n" + model,
         "r.toml:1:27: run config check_val_every_n_epoch: expected an integer, found a float"},
        {model + "[optimizer]\naccumulate_grad_batches = 0\n",
         "r.toml:4:27: [optimizer] accumulate_grad_batches: 0 is out of range [1, 1000000]"},
        {model + "[optimizer]\naccumulate_grad_batches = 2.0\n",
         "r.toml:4:27: [optimizer] accumulate_grad_batches: expected an integer, found a float"},
        {model + "[resources]\nallocation_stacks = \"yes\"\n",
         "r.toml:4:21: [resources] allocation_stacks: expected a boolean, found a string"},
        {model + "[plugins]\nprogress = 1\n", "r.toml:4:12: [plugins] progress: expected a table of options, found a value"},
        {"epochs = 1979-05-27\n" + model, "r.toml:1:10: run config epochs: expected an integer, found a date or time"},
        {"epochs = true\n" + model, "r.toml:1:10: run config epochs: expected an integer, found a boolean"},
        {"epochs = [ 3 ]\n" + model, "r.toml:1:10: run config epochs: expected an integer, found an array"},
        {"[data]\nlimit_test_batches = -2\n" + model,
         "r.toml:2:22: [data] limit_test_batches: -2 is out of range [-1, 9223372036854775807]"},
        {"[data]\ndataset = \"synthetic_autoencoder\"\nlimit_test_batches = 1\n" + model,
         "r.toml:3:22: [data] limit_test_batches: is read only with dataset = \"fashion_mnist\"; this config's is "
         "\"synthetic_autoencoder\""},
        {"[data]\nwidth = 8\n" + model,
         "r.toml:2:9: [data] width: is read only with dataset = \"synthetic_autoencoder\"; this config's is "
         "\"fashion_mnist\""},
        {"mode = \"predict\"\n[data]\ndataset = \"fashion_mnist\"\ntest = false\n[predict]\nsplit = \"test\"\n" + model,
         "r.toml:6:9: [predict] split: \"test\" needs the test files: [data] test = false leaves them out"},
    };
    for (const auto& [text, message] : cases) {
        INFO(text);
        CHECK_THROWS_WITH(parse_run_config(text, "r.toml"), message);
    }
}

TEST_CASE("an unknown layer key lists the keys of that layer type", "[config]") {
    const auto layers = [](const std::string& second) {
        return "[model]\nlayers = [ { type = \"flatten\" }, " + second + " ]\n";
    };
    CHECK_THROWS_WITH(parse_run_config(layers("{ type = \"dropout\", p = 0.5 }"), "r.toml"),
                      "r.toml:2:54: unknown key 'p' in [[model.layers]] #2 (a dropout layer takes: rate, type)");
    CHECK_THROWS_WITH(parse_run_config(layers("{ type = \"dense\", units = 10, unit = 3 }"), "r.toml"),
                      "r.toml:2:64: unknown key 'unit' in [[model.layers]] #2 (a dense layer takes: type, units); "
                      "did you mean 'units'?");
    CHECK_THROWS_WITH(parse_run_config(layers("{ type = \"relu\", units = 10 }"), "r.toml"),
                      "r.toml:2:51: unknown key 'units' in [[model.layers]] #2 (a relu layer takes: type)");
    CHECK_THROWS_WITH(parse_run_config(layers("{ type = \"max_pool2d\", size = 2 }"), "r.toml"),
                      "r.toml:2:57: unknown key 'size' in [[model.layers]] #2 (a max_pool2d layer takes: kernel, stride, "
                      "type)");
}

TEST_CASE("suggestions only for plausible typos and shortenings", "[config]") {
    using trainhost::nearest_name;
    const std::set<std::string> keys = {"patience", "monitor", "min_delta", "val_accuracy", "val_loss"};
    CHECK(nearest_name("patiense", keys) == "patience");
    CHECK(nearest_name("val_acc", keys) == "val_accuracy");  // an edit distance would call these far apart
    CHECK(nearest_name("val_los", keys) == "val_loss");
    CHECK(nearest_name("mindelta", keys) == "min_delta");
    CHECK_FALSE(nearest_name("zzzzzzzz", keys).has_value());
    CHECK_FALSE(nearest_name("seed", keys).has_value());
    CHECK_FALSE(nearest_name("size", std::set<std::string>{"kernel", "stride", "type"}).has_value());
    CHECK_FALSE(nearest_name("", keys).has_value());
    CHECK_FALSE(nearest_name("patience", std::set<std::string>{}).has_value());
    CHECK(nearest_name("LR", std::set<std::string>{"lr", "momentum"}) == "lr");  // case is no distance
}

TEST_CASE("only a near-certain typo of a plugin's name counts as one", "[config]") {
    using trainhost::kTypoLikeness;
    using trainhost::nearest_name;
    const std::set<std::string> loaded = {"early_stopping", "checkpoint", "progress", "metrics_logger", "togpu"};
    CHECK(nearest_name("early_stoping", loaded, kTypoLikeness) == "early_stopping");
    CHECK(nearest_name("checkpoints", loaded, kTypoLikeness) == "checkpoint");
    CHECK(nearest_name("to_gpu", loaded, kTypoLikeness) == "togpu");
    CHECK(nearest_name("metric_logger", loaded, kTypoLikeness) == "metrics_logger");
    for (const char* relative : {"model_checkpoint", "csv_logger", "rich_progress", "progress_bar", "lr_monitor"}) {
        INFO(relative);
        CHECK_FALSE(nearest_name(relative, loaded, kTypoLikeness).has_value());
    }
}

TEST_CASE("max_steps without epochs leaves the epochs unlimited, as Lightning's max_epochs = -1", "[config]") {
    const std::string model = "[model]\nlayers = [ { type = \"dense\", units = 10 } ]\n";
    auto config = parse_run_config(model, "r.toml");
    CHECK(config.max_steps == 0);
    CHECK(config.epochs == 1);
    config = parse_run_config("max_steps = 500\n" + model, "r.toml");
    CHECK(config.max_steps == 500);
    CHECK(config.epochs == kMaxEpochs);
    config = parse_run_config("max_steps = 500\nepochs = 3\n" + model, "r.toml");
    CHECK(config.epochs == 3);
    config = parse_run_config("max_steps = -1\n" + model, "r.toml");
    CHECK(config.max_steps == 0);
    CHECK(config.epochs == 1);
    // --max-steps -1 over a file's max_steps: the epochs fall back to the default again.
    config = parse_run_config("max_steps = 500\n" + model, "r.toml");
    config.max_steps = 0;
    settle_epochs(config);
    CHECK(config.epochs == 1);
}

TEST_CASE("fast_dev_run is a boolean or a count, and stands for one epoch of that many batches", "[config]") {
    const std::string model = "[model]\nlayers = [ { type = \"dense\", units = 10 } ]\n";
    CHECK(parse_run_config(model, "r.toml").fast_dev_run == 0);
    CHECK(parse_run_config("fast_dev_run = true\n" + model, "r.toml").fast_dev_run == 1);
    CHECK(parse_run_config("fast_dev_run = false\n" + model, "r.toml").fast_dev_run == 0);
    CHECK(parse_run_config("fast_dev_run = 0\n" + model, "r.toml").fast_dev_run == 0);
    auto config = parse_run_config("fast_dev_run = 3\nepochs = 7\nmax_steps = 2\nmin_epochs = 4\nmin_steps = 9\n"
                                   "check_val_every_n_epoch = 2\nnum_sanity_val_steps = -1\n"
                                   "[data]\nlimit_train_batches = 0\nlimit_val_batches = 100\n" + model,
                                   "r.toml");
    CHECK(trainhost::config::apply_fast_dev_run(config) ==
          "fast_dev_run = 3: one epoch of at most 3 batches each of training, validation and test; plugins that "
          "honour it (checkpoint, early_stopping, metrics_logger) save, stop and log nothing");
    CHECK(config.epochs == 1);
    CHECK(config.epochs_given);
    CHECK(config.max_steps == 0);
    CHECK(config.min_epochs == 0);
    CHECK(config.min_steps == 0);
    CHECK(config.check_val_every_n_epoch == 1);
    CHECK(config.num_sanity_val_steps == 0);
    CHECK(config.data.limit_train_batches == 3);
    CHECK(config.data.limit_val_batches == 3);
    CHECK(config.data.limit_test_batches == 3);
    // Off, it changes nothing and says nothing.
    config = parse_run_config("epochs = 7\n" + model, "r.toml");
    CHECK(trainhost::config::apply_fast_dev_run(config).empty());
    CHECK(config.epochs == 7);
    CHECK(config.data.limit_train_batches == -1);
}

TEST_CASE("printable escapes control characters and bytes that are no UTF-8, and cuts long text", "[config][errors]") {
    using trainhost::printable;
    CHECK(printable("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x99\x82") == "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x99\x82");
    CHECK(printable("a\x01" "b\x7f") == "a\\u0001b\\u007f");
    CHECK(printable("x\xfdy") == "x\\xfdy");
    CHECK(printable("cut \xe2\x82") == "cut \\xe2\\x82");          // a sequence cut short
    CHECK(printable("\xc0\xaf") == "\\xc0\\xaf");                  // overlong '/'
    CHECK(printable("\xed\xa0\x80") == "\\xed\\xa0\\x80");          // a surrogate
    CHECK(printable("\xf4\x90\x80\x80") == "\\xf4\\x90\\x80\\x80");  // past U+10FFFF
    CHECK(printable(std::string(100, 'a')) == std::string(80, 'a') + "...");
    CHECK(printable(std::string(100, 'a'), 1000) == std::string(100, 'a'));
    // A cut that would fall inside a character falls before it.
    CHECK(printable(std::string(79, 'a') + "\xe2\x82\xac" + "bbb") == std::string(79, 'a') + "...");
    CHECK(printable("\xc2\x9b" "2J \xc2\xa0") == "\\u009b2J \xc2\xa0");  // a C1 control (8-bit CSI); a no-break space
}

TEST_CASE("a byte size in decimal is taken whole where only the decimal's rounding is off", "[config][budget]") {
    using trainhost::plugin::parse_byte_size;
    CHECK(parse_byte_size("1.1GB") == 1'100'000'000);
    CHECK(parse_byte_size("0.1KB") == 100);
    CHECK(parse_byte_size("1.5GiB") == 1'610'612'736);
    CHECK(parse_byte_size("4096") == 4096);
    CHECK_THROWS_WITH(parse_byte_size("2.5"), "\"2.5\" is 2.5 bytes, not a whole number of them");
}
