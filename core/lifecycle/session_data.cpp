// The session's data: loading and splitting it, checking that the model can take
// it before anything else is built, and the model's summary.
#include "errors.hpp"
#include "lifecycle/fit_state.hpp"
#include "lifecycle/session.hpp"

#include "data/idx_reader.hpp"
#include "data/synthetic.hpp"
#include "nn/layer_shapes.hpp"
#include "resources/violation.hpp"

#include <algorithm>
#include <array>
#include <filesystem>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <ostream>

namespace trainhost::lifecycle {

void Session::load_data() {
    const config::DataSpec& spec = options_.config.data;
    data::Dataset all;
    if (spec.dataset == "synthetic_autoencoder") {
        all = data::make_synthetic_autoencoder(spec.samples, spec.width, spec.latent, options_.config.seed,
                                               spec.validation_fraction);
    } else {
        std::filesystem::path dir = spec.path.empty() ? std::filesystem::path(data::kFashionMnistDefaultDir) : spec.path;
        // Named as the directory it is, with where it came from: "file not found" for
        // its first file would leave the user looking for one file. A config error (exit
        // 1), as a misspelt path is, a file given for the directory, and a path that
        // cannot be looked in (a link loop, a parent that cannot be searched); a fault
        // of a file in it is left to the reader, which names it.
        std::error_code ec;
        const std::filesystem::file_type type = std::filesystem::status(dir, ec).type();
        if (type == std::filesystem::file_type::not_found)
            throw ConfigError(
                spec.path.empty()
                    ? fmt::format("{}: directory not found (the default [data] path: install Debian's "
                                  "dataset-fashion-mnist, or set [data] path in {})",
                                  dir.string(), options_.config.file.string())
                    : fmt::format("{}: directory not found ([data] path in {})", dir.string(),
                                  options_.config.file.string()));
        // A link loop, a name too long, a parent that cannot be searched: the path's
        // own fault, not that of a file in it.
        if (ec && type != std::filesystem::file_type::not_found)
            throw ConfigError(fmt::format("{}: cannot access: {} ({}[data] path in {})", dir.string(), ec.message(),
                                          spec.path.empty() ? "the default " : "", options_.config.file.string()));
        if (!ec && type != std::filesystem::file_type::directory)
            throw ConfigError(fmt::format("{}: is not a directory ({}[data] path in {} names the directory of the IDX "
                                          "files)",
                                          dir.string(), spec.path.empty() ? "the default " : "",
                                          options_.config.file.string()));
        all = data::load_idx_classification(dir, "train", 10, spec.limit);
        // Predict mode reads the test files only to predict on them.
        if (spec.test && (options_.config.mode != "predict" || options_.config.predict_split == "test")) {
            test_ = data::load_idx_classification(dir, "t10k", 10, 0);
            // The model is built for the training images; test images of another shape
            // would be read with the wrong width.
            if (test_->sample_shape != all.sample_shape)
                throw data::DataError(fmt::format("{}: images are {}, the training images are {}",
                                                  data::idx_images_path(dir, "t10k").string(),
                                                  fmt::join(test_->sample_shape, "x"), fmt::join(all.sample_shape, "x")));
        }
    }
    const std::size_t all_count = all.count;
    data::Split split = data::split_train_validation(std::move(all), spec.validation_fraction, options_.config.seed);
    train_ = std::move(split.train);
    validation_ = std::move(split.validation);
    if (train_.count == 0)
        throw ConfigError(fmt::format("{}: [data] the training split is empty: {}", options_.config.file.string(),
                                      all_count == 0 ? std::string("the data has no samples")
                                                     : fmt::format("validation_fraction {} of {} sample{} takes all "
                                                                   "{} for validation",
                                                                   spec.validation_fraction, all_count,
                                                                   all_count == 1 ? "" : "s", validation_.count)));
    // Asked for, but rounded away: no val_* metric will come, and a plugin monitoring
    // one would fail only once the first epoch ends.
    if (spec.validation_fraction > 0 && validation_.count == 0)
        err_ << fmt::format("warning: {}: [data] validation_fraction {} of {} samples rounds to none: this run has no "
                            "validation split and no val_* metrics\n",
                            options_.config.file.string(), spec.validation_fraction, all_count);
    if (options_.config.mode == "predict" && predict_data().count == 0)
        throw ConfigError(fmt::format("{}: [predict] split \"{}\" has no samples (validation_fraction {} of {} samples)",
                                      options_.config.file.string(), options_.config.predict_split,
                                      spec.validation_fraction, all_count));
    state_.train_samples = train_.count;
}

std::size_t Session::output_width() const noexcept {
    return train_.classes > 0 ? train_.classes : train_.target_width;
}

void Session::check_model_fits_data() const {
    const config::RunConfig& config = options_.config;
    const bool classes = train_.classes > 0;
    if ((nn::loss_kind(config.model.loss) == device::LossKind::cross_entropy) != classes)
        throw ConfigError(fmt::format("{}: [model] loss {} does not fit dataset {}: its samples have {} (use {})",
                                      config.model.loss_origin, config.model.loss, config.data.dataset,
                                      classes ? "class labels" : "target vectors",
                                      classes ? "cross_entropy" : "mse or bce_with_logits"));
    (void)nn::plan_layer_shapes(config.model, train_.sample_shape, output_width());
}

// Lightning's ModelSummary, shorter: the parameters in a line, and with --verbose
// each layer's output shape and parameters.
void Session::print_model_summary() {
    const config::ModelSpec& spec = options_.config.model;
    const nn::Model& model = *fit_->model;
    const std::size_t parameters = model.parameter_count();
    out_ << fmt::format("model: {} layer{}, {} parameters ({})\n", spec.layers.size(), spec.layers.size() == 1 ? "" : "s",
                        parameters, resources::human_bytes(parameters * sizeof(float)));
    if (!options_.verbose) return;
    const std::vector<nn::LayerShape> shapes = nn::plan_layer_shapes(spec, train_.sample_shape, output_width());
    const std::vector<std::size_t> counts = model.parameters_by_layer();
    std::vector<std::array<std::string, 4>> rows = {{"#", "layer", "output", "parameters"}};
    for (std::size_t i = 0; i < spec.layers.size(); ++i)
        rows.push_back({std::to_string(i + 1), spec.layers[i].type, fmt::format("{}", fmt::join(shapes[i].output, "x")),
                        std::to_string(counts[i])});
    std::array<std::size_t, 4> widths{};
    for (const auto& row : rows)
        for (std::size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
    for (const auto& row : rows)
        out_ << fmt::format("  {:>{}}  {:<{}}  {:<{}}  {:>{}}\n", row[0], widths[0], row[1], widths[1], row[2], widths[2],
                            row[3], widths[3]);
}

const data::Dataset& Session::predict_data() const {
    const std::string& split = options_.config.predict_split;
    if (split == "validation") return validation_;
    if (split == "test") return *test_;  // loaded: the config asks for the test files
    return train_;
}

}  // namespace trainhost::lifecycle
