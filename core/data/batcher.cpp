#include "data/batcher.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include <fmt/format.h>

#include "data/random.hpp"

namespace trainhost::data {
namespace {

// Below this a batch is gathered on the calling thread alone.
constexpr std::size_t kParallelGatherBytes = std::size_t{1} << 20;

void require_capacity(std::size_t available, std::size_t needed, const char* buffer_name) {
    if (available < needed) {
        throw std::out_of_range(
            fmt::format("Batcher::gather: {} holds {} values, batch needs {}", buffer_name, available, needed));
    }
}

}  // namespace

Batcher::Batcher(const Dataset& dataset, std::size_t batch_size, bool shuffle, std::uint64_t seed)
    : dataset_(dataset), batch_size_(batch_size), shuffle_(shuffle), seed_(seed), order_(dataset.count) {
    if (batch_size_ == 0) throw DataError("Batcher: batch_size must be > 0");
    check_consistent(dataset_, "Batcher dataset");
    start_epoch(0);
}

void Batcher::start_epoch(std::uint64_t epoch) {
    std::iota(order_.begin(), order_.end(), std::size_t{0});
    if (shuffle_) {
        // A fresh Rng per epoch (instead of one long-lived stream) is what
        // makes epoch k reproducible without replaying epochs 0..k-1.
        Rng rng(derive_seed(purpose_seed(seed_, SeedPurpose::shuffle), epoch));
        shuffle(order_, rng);
    }
}

std::size_t Batcher::batches() const { return (order_.size() + batch_size_ - 1) / batch_size_; }

std::size_t Batcher::rows_in_batch(std::size_t batch_index) const {
    if (batch_index >= batches()) {
        throw std::out_of_range(
            fmt::format("Batcher: batch index {} out of range ({} batches)", batch_index, batches()));
    }
    const std::size_t first = batch_index * batch_size_;
    return std::min(batch_size_, order_.size() - first);
}

std::span<const std::size_t> Batcher::batch_indices(std::size_t batch_index) const {
    const std::size_t rows = rows_in_batch(batch_index);
    return std::span<const std::size_t>(order_).subspan(batch_index * batch_size_, rows);
}

std::size_t Batcher::gather(std::size_t batch_index, std::span<float> features_out, std::span<std::int32_t> labels_out,
                            std::span<float> targets_out) const {
    const std::span<const std::size_t> indices = batch_indices(batch_index);
    const std::size_t rows = indices.size();
    const std::size_t width = dataset_.feature_width();
    const std::size_t target_width = dataset_.target_width;
    const bool want_labels = dataset_.classes > 0 && !labels_out.empty();
    const bool want_targets = target_width > 0 && !targets_out.empty();

    // Check every buffer before writing any, so a throw leaves outputs unchanged.
    require_capacity(features_out.size(), rows * width, "features_out");
    if (want_labels) require_capacity(labels_out.size(), rows, "labels_out");
    if (want_targets) require_capacity(targets_out.size(), rows * target_width, "targets_out");

    // On a GPU the batch is gathered while the device runs the backward pass and the
    // optimizer step of the batch before (the loss read waits for its forward pass), and
    // a large one (batch 1024 of 3072 floats and its targets: 25 MB) takes one thread
    // longer than those. A small batch stays on this thread, where waking the others
    // would cost more than they save.
    const std::size_t bytes = rows * (width + (want_targets ? target_width : 0)) * sizeof(float);
#pragma omp parallel for schedule(static) if (bytes >= kParallelGatherBytes)
    for (std::size_t row = 0; row < rows; ++row) {
        const std::size_t sample = indices[row];
        std::copy_n(dataset_.features.begin() + static_cast<std::ptrdiff_t>(sample * width), width,
                    features_out.begin() + static_cast<std::ptrdiff_t>(row * width));
        if (want_labels) labels_out[row] = dataset_.labels[sample];
        if (want_targets) {
            std::copy_n(dataset_.targets.begin() + static_cast<std::ptrdiff_t>(sample * target_width), target_width,
                        targets_out.begin() + static_cast<std::ptrdiff_t>(row * target_width));
        }
    }
    return rows;
}

}  // namespace trainhost::data
