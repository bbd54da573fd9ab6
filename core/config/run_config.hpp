// The run's configuration, as read from run.toml and overridden by the command line.
#pragma once

#include "resources/violation.hpp"
#include "trainhost/abi.h"

#include <toml++/toml.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace trainhost::config {

// The most epochs a run may ask for (config, command line and checkpoints alike).
inline constexpr std::uint32_t kMaxEpochs = TH_MAX_EPOCHS;
// [optimizer] lr, and every learning rate a plugin or a checkpoint sets: [0, kMaxLearningRate].
inline constexpr double kMaxLearningRate = 1000;
// [optimizer] accumulate_grad_batches: [1, kMaxAccumulatedBatches].
inline constexpr std::int64_t kMaxAccumulatedBatches = 1'000'000;

struct LayerSpec {
    std::string type;       // dense, relu, sigmoid, tanh, flatten, dropout, conv2d, max_pool2d
    std::size_t units = 0;  // dense; conv2d: output channels
    double rate = 0;        // dropout
    std::size_t kernel = 0;  // conv2d, max_pool2d
    std::size_t stride = 1;  // conv2d; max_pool2d defaults to its kernel
    std::size_t padding = 0;  // conv2d
    std::string origin;       // "file:line:column" of the layer's table, for errors found once the data is known
};

struct ModelSpec {
    std::vector<LayerSpec> layers;
    std::string loss = "cross_entropy";  // cross_entropy, bce_with_logits, mse
    std::string loss_origin;  // "file:line:column" of `loss`, or of [model] where the default is taken
};

struct OptimizerSpec {
    std::string type = "adam";  // sgd, adam, adamw
    double lr = 1e-3;
    double momentum = 0;
    double dampening = 0;
    bool nesterov = false;
    double weight_decay = 0;
    double beta1 = 0.9;
    double beta2 = 0.999;
    double eps = 1e-8;
    // Lightning's gradient clipping, before each step: 0 clips nothing.
    double gradient_clip_val = 0;
    std::string gradient_clip_algorithm = "norm";  // norm (the global L2 norm), value (each element)
    // Lightning's accumulate_grad_batches: one step per this many batches.
    std::size_t accumulate_grad_batches = 1;
};

struct DataSpec {
    std::string dataset = "fashion_mnist";  // fashion_mnist (any IDX pair), synthetic_autoencoder
    std::filesystem::path path;             // IDX directory; empty = the Debian default
    std::size_t batch_size = 64;
    double validation_fraction = 0.1;
    bool shuffle = true;
    std::size_t limit = 0;       // IDX: use only the first N training samples (0 = all)
    std::int64_t limit_train_batches = -1;  // batches per training epoch (-1 = all), as Lightning's
    std::int64_t limit_val_batches = -1;    // batches per validation pass (-1 = all)
    bool test = true;            // IDX: evaluate on the t10k test files at fit end
    std::int64_t limit_test_batches = -1;   // IDX: batches of that evaluation (-1 = all)
    std::size_t samples = 1024;  // synthetic
    std::size_t width = 3072;    // synthetic
    std::size_t latent = 6;      // synthetic
};

struct RunConfig {
    std::filesystem::path file;
    std::string mode = "train";        // train, or predict: forward passes only
    // [predict]: forward passes (0: one, or with an output one over the whole split),
    // the split they run over, and where the predictions go (none: nowhere).
    std::uint64_t predict_passes = 0;
    std::string predict_split = "train";
    std::filesystem::path predict_output;
    std::uint64_t seed = 42;
    // The fit ends at whichever limit it reaches first. Without `epochs` set (in the
    // file or by --epochs), max_steps alone limits the fit, as Lightning's max_epochs
    // defaults to -1 when max_steps is given (settle_epochs).
    std::uint32_t epochs = 1;
    bool epochs_given = false;
    std::uint64_t max_steps = 0;  // optimizer steps; 0: no limit
    // Lightning's min_epochs and min_steps: a stop a plugin asks for before both are
    // met is held until they are (0: none).
    std::uint32_t min_epochs = 0;
    std::uint64_t min_steps = 0;
    // Lightning's check_val_every_n_epoch: the validation split is evaluated after
    // epochs whose number (1-based) it divides.
    std::uint32_t check_val_every_n_epoch = 1;
    // Lightning's num_sanity_val_steps: validation batches run after fit_start, before
    // the first epoch, their metrics dropped (-1: all; 0: none, here the default).
    std::int64_t num_sanity_val_steps = 0;
    // Lightning's fast_dev_run: a quick check of the whole fit on this many batches
    // (0: off); apply_fast_dev_run sets the limits it stands for.
    std::int64_t fast_dev_run = 0;
    std::string device = "auto";  // auto, cpu, cpu:N, cuda, cuda:N
    // Where `device` was chosen, to start a message about it: `run.toml:3:10: device
    // "cuda"`, or `--device cuda` when the command line set it.
    std::string device_origin = "device \"auto\"";
    int threads = 0;  // 0 = the BLAS library's default
    DataSpec data;
    ModelSpec model;
    OptimizerSpec optimizer;
    resources::ViolationPolicy on_violation = resources::ViolationPolicy::fail;
    bool allocation_stacks = false;  // record where each lease was taken (costly)
    // Each plugin's own table, kept as TOML until its schema is known; shared, never
    // copied, because a copied TOML node loses its line and column for errors.
    std::map<std::string, std::shared_ptr<const toml::table>> plugin_tables;
};

[[nodiscard]] bool is_device_name(std::string_view name);

// Throws ConfigError with file:line:column for every problem it finds first.
// The text of a config file, read once (it may be a pipe); ConfigError naming the
// file when it cannot be opened.
[[nodiscard]] std::string read_config_text(const std::filesystem::path& file);
// The TOML in `text`, or ConfigError "file:line:column: invalid TOML: ...".
[[nodiscard]] toml::table parse_toml(std::string_view text, const std::filesystem::path& file);
[[nodiscard]] RunConfig load_run_config(const std::filesystem::path& file);
[[nodiscard]] RunConfig parse_run_config(std::string_view text, const std::filesystem::path& file);
// After `epochs_given` or `max_steps` changes: epochs left unset are 1, or as many as
// a run may have where max_steps limits a training fit.
void settle_epochs(RunConfig& config) noexcept;
// Where fast_dev_run is set, as Lightning's: one epoch of at most that many training,
// validation and test batches, without a sanity check, min_epochs, min_steps, max_steps
// or check_val_every_n_epoch. What it returns says so, for the run's output.
[[nodiscard]] std::string apply_fast_dev_run(RunConfig& config);

}  // namespace trainhost::config
