#pragma once
// In-memory datasets on the host side. Everything the trainer needs per sample
// is a flat float row, plus optionally a class label and/or a float target row,
// so loaders (IDX, synthetic, ...) all produce this one shape.

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string_view>
#include <vector>

namespace trainhost::data {

/// Thrown for malformed input files, inconsistent datasets and invalid
/// data-module arguments. Messages name the offending file when there is one.
class DataError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// Host-side samples, row-major: sample i occupies
/// features[i * feature_width(), (i + 1) * feature_width()).
struct Dataset {
    std::size_t count = 0;                  ///< number of samples
    std::vector<std::size_t> sample_shape;  ///< e.g. {1,28,28} or {3072}
    std::vector<float> features;            ///< count * feature_width(); images scaled to [0,1]
    std::size_t classes = 0;                ///< > 0 for classification
    std::vector<std::int32_t> labels;       ///< count entries when classes > 0
    std::size_t target_width = 0;           ///< > 0 for regression/reconstruction
    std::vector<float> targets;             ///< count * target_width when target_width > 0

    /// Product of sample_shape (1 for an empty shape, as for a scalar).
    [[nodiscard]] std::size_t feature_width() const;
};

/// Throws DataError unless the vector sizes agree with count, feature_width(),
/// classes and target_width, and every label is in [0, classes).
/// `what` prefixes the message so callers can say which dataset was bad.
void check_consistent(const Dataset& dataset, std::string_view what = "dataset");

/// New dataset holding the given rows in the given order (duplicates allowed).
/// Throws DataError if an index is >= dataset.count.
[[nodiscard]] Dataset subset(const Dataset& dataset, std::span<const std::size_t> indices);

struct Split {
    Dataset train;
    Dataset validation;
};

/// Deterministic split: the indices 0..n-1 are shuffled by the seed's split stream and the
/// first round(n * validation_fraction) go to validation, the rest to train.
/// Within each part samples keep their original relative order (the shuffle
/// only decides membership), which keeps the parts easy to inspect.
/// Throws DataError unless 0 <= validation_fraction < 1. The training part keeps
/// `dataset`'s buffers, its rows moved up in place: only the validation part is a
/// copy, so a split of 60,000 images needs 1.1 times their memory, not twice.
[[nodiscard]] Split split_train_validation(Dataset dataset, double validation_fraction, std::uint64_t seed);

}  // namespace trainhost::data
