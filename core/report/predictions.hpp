// The predictions of predict mode as CSV, one row per sample of the split, in the
// split's order: what Lightning's BasePredictionWriter would write, through the
// loss's link (softmax for cross_entropy, sigmoid for bce_with_logits, none for mse).
#pragma once

#include "device/backend.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace trainhost::report {

class PredictionTable {
public:
    // `labelled`: the split has class labels, written beside the prediction.
    PredictionTable(device::LossKind loss, std::size_t output_width, bool labelled);
    PredictionTable(const PredictionTable&) = delete;
    PredictionTable& operator=(const PredictionTable&) = delete;

    // One batch: for each row, its index in the split, its label (if labelled) and
    // the model's raw outputs, row-major.
    void add(std::span<const std::size_t> indices, std::span<const std::int32_t> labels, std::span<const float> outputs);

    [[nodiscard]] std::size_t rows() const noexcept { return rows_; }
    [[nodiscard]] const std::string& csv() const noexcept { return text_; }

private:
    device::LossKind loss_;
    std::size_t width_;
    bool labelled_;
    std::size_t rows_ = 0;
    std::string text_;
};

}  // namespace trainhost::report
