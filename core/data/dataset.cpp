#include "data/dataset.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "data/random.hpp"

namespace trainhost::data {

std::size_t Dataset::feature_width() const {
    return std::accumulate(sample_shape.begin(), sample_shape.end(), std::size_t{1},
                           [](std::size_t a, std::size_t b) { return a * b; });
}

void check_consistent(const Dataset& dataset, std::string_view what) {
    const std::size_t width = dataset.feature_width();
    if (dataset.features.size() != dataset.count * width) {
        throw DataError(fmt::format("{}: features has {} values, expected count {} * feature width {}", what,
                                    dataset.features.size(), dataset.count, width));
    }
    if (dataset.classes > 0) {
        if (dataset.labels.size() != dataset.count) {
            throw DataError(fmt::format("{}: labels has {} entries, expected count {}", what, dataset.labels.size(),
                                        dataset.count));
        }
        for (std::size_t i = 0; i < dataset.labels.size(); ++i) {
            const std::int32_t label = dataset.labels[i];
            if (label < 0 || static_cast<std::size_t>(label) >= dataset.classes) {
                throw DataError(
                    fmt::format("{}: label {} at index {} is outside [0, {})", what, label, i, dataset.classes));
            }
        }
    } else if (!dataset.labels.empty()) {
        throw DataError(fmt::format("{}: has {} labels but classes == 0", what, dataset.labels.size()));
    }
    if (dataset.targets.size() != dataset.count * dataset.target_width) {
        throw DataError(fmt::format("{}: targets has {} values, expected count {} * target width {}", what,
                                    dataset.targets.size(), dataset.count, dataset.target_width));
    }
}

Dataset subset(const Dataset& dataset, std::span<const std::size_t> indices) {
    check_consistent(dataset, "subset source");
    const std::size_t width = dataset.feature_width();
    const std::size_t target_width = dataset.target_width;
    const bool has_labels = dataset.classes > 0;

    Dataset result;
    result.count = indices.size();
    result.sample_shape = dataset.sample_shape;
    result.classes = dataset.classes;
    result.target_width = target_width;
    result.features.reserve(indices.size() * width);
    if (has_labels) result.labels.reserve(indices.size());
    result.targets.reserve(indices.size() * target_width);

    for (const std::size_t index : indices) {
        if (index >= dataset.count) {
            throw DataError(
                fmt::format("subset: index {} out of range for dataset of {} samples", index, dataset.count));
        }
        const auto feature_row = dataset.features.begin() + static_cast<std::ptrdiff_t>(index * width);
        result.features.insert(result.features.end(), feature_row, feature_row + static_cast<std::ptrdiff_t>(width));
        if (has_labels) result.labels.push_back(dataset.labels[index]);
        const auto target_row = dataset.targets.begin() + static_cast<std::ptrdiff_t>(index * target_width);
        result.targets.insert(result.targets.end(), target_row, target_row + static_cast<std::ptrdiff_t>(target_width));
    }
    return result;
}

namespace {

// Keeps the rows at `indices` (ascending, no repeats), in place: row indices[i] moves
// to row i, which is never after it, so no row is overwritten before it has moved.
void keep_rows(Dataset& dataset, std::span<const std::size_t> indices) {
    const std::size_t width = dataset.feature_width();
    const std::size_t target_width = dataset.target_width;
    const bool has_labels = dataset.classes > 0;
    for (std::size_t row = 0; row < indices.size(); ++row) {
        const std::size_t from = indices[row];
        if (from == row) continue;
        std::copy_n(dataset.features.begin() + static_cast<std::ptrdiff_t>(from * width), width,
                    dataset.features.begin() + static_cast<std::ptrdiff_t>(row * width));
        std::copy_n(dataset.targets.begin() + static_cast<std::ptrdiff_t>(from * target_width), target_width,
                    dataset.targets.begin() + static_cast<std::ptrdiff_t>(row * target_width));
        if (has_labels) dataset.labels[row] = dataset.labels[from];
    }
    dataset.count = indices.size();
    dataset.features.resize(dataset.count * width);
    dataset.targets.resize(dataset.count * target_width);
    if (has_labels) dataset.labels.resize(dataset.count);
}

}  // namespace

Split split_train_validation(Dataset dataset, double validation_fraction, std::uint64_t seed) {
    // Written as a negated range check so NaN is rejected too.
    if (!(validation_fraction >= 0.0 && validation_fraction < 1.0)) {
        throw DataError(
            fmt::format("split_train_validation: validation_fraction {} is not in [0, 1)", validation_fraction));
    }
    std::vector<std::size_t> order(dataset.count);
    std::iota(order.begin(), order.end(), std::size_t{0});
    Rng rng(purpose_seed(seed, SeedPurpose::split));
    shuffle(order, rng);

    const auto validation_count =
        std::min(dataset.count,
                 static_cast<std::size_t>(std::llround(static_cast<double>(dataset.count) * validation_fraction)));
    std::span<std::size_t> validation_indices(order.data(), validation_count);
    std::span<std::size_t> train_indices(order.data() + validation_count, order.size() - validation_count);
    std::sort(validation_indices.begin(), validation_indices.end());
    std::sort(train_indices.begin(), train_indices.end());

    Dataset validation = subset(dataset, validation_indices);
    keep_rows(dataset, train_indices);
    return Split{std::move(dataset), std::move(validation)};
}

}  // namespace trainhost::data
