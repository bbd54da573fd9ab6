#pragma once
// Mini-batch iteration over an in-memory Dataset. The Batcher only owns an
// index permutation; gather() copies rows into caller-provided buffers so the
// caller can reuse pinned/staging memory across batches.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "data/dataset.hpp"

namespace trainhost::data {

class Batcher {
public:
    /// Keeps a reference to `dataset`, which must outlive the Batcher.
    /// The order for epoch 0 is prepared immediately, so gather() works
    /// without calling start_epoch(0) first.
    /// Throws DataError if batch_size is 0 or the dataset is inconsistent.
    Batcher(const Dataset& dataset, std::size_t batch_size, bool shuffle, std::uint64_t seed);
    // A temporary Dataset would dangle immediately.
    Batcher(Dataset&&, std::size_t, bool, std::uint64_t) = delete;

    /// With shuffle: a permutation that depends only on (seed, epoch), so
    /// resuming a run at epoch k reproduces epoch k exactly. Without shuffle:
    /// dataset order, every epoch.
    void start_epoch(std::uint64_t epoch);

    /// ceil(count / batch_size); the last batch may be partial.
    [[nodiscard]] std::size_t batches() const;
    [[nodiscard]] std::size_t batch_size() const { return batch_size_; }
    /// Rows in batch `batch_index` (batch_size, or fewer for the last one).
    [[nodiscard]] std::size_t rows_in_batch(std::size_t batch_index) const;
    /// Dataset indices of that batch, in the current epoch's order.
    [[nodiscard]] std::span<const std::size_t> batch_indices(std::size_t batch_index) const;
    [[nodiscard]] const Dataset& dataset() const { return dataset_; }

    /// Copies batch `batch_index` into the front of the output spans and
    /// returns its row count. Outputs may be larger than needed (fixed-size
    /// buffers); their tails are left untouched. An empty labels_out or
    /// targets_out means "not wanted" and is skipped; they are also ignored
    /// when the dataset has no labels/targets. features_out must always fit.
    /// Throws std::out_of_range for a batch index past the end or an output
    /// span that is non-empty but too small.
    std::size_t gather(std::size_t batch_index, std::span<float> features_out, std::span<std::int32_t> labels_out,
                       std::span<float> targets_out) const;

private:
    const Dataset& dataset_;
    std::size_t batch_size_;
    bool shuffle_;
    std::uint64_t seed_;
    std::vector<std::size_t> order_;
};

}  // namespace trainhost::data
