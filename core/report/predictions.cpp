#include "report/predictions.hpp"

#include "kernels/cpu/losses.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <iterator>
#include <stdexcept>
#include <vector>

namespace trainhost::report {

PredictionTable::PredictionTable(device::LossKind loss, std::size_t output_width, bool labelled)
    : loss_(loss), width_(output_width), labelled_(labelled) {
    const bool classes = loss_ == device::LossKind::cross_entropy;
    text_ = labelled_ ? "index,label" : "index";
    if (classes) text_ += ",predicted";
    for (std::size_t j = 0; j < width_; ++j) fmt::format_to(std::back_inserter(text_), ",{}{}", classes ? "p" : "y", j);
    text_ += '\n';
}

void PredictionTable::add(std::span<const std::size_t> indices, std::span<const std::int32_t> labels,
                          std::span<const float> outputs) {
    if (outputs.size() != indices.size() * width_ || (labelled_ && labels.size() < indices.size()))
        throw std::logic_error("PredictionTable::add: outputs or labels do not match the batch");
    std::vector<double> values(width_);
    for (std::size_t r = 0; r < indices.size(); ++r) {
        const float* row = outputs.data() + r * width_;
        std::transform(row, row + width_, values.begin(), [](float v) { return static_cast<double>(v); });
        fmt::format_to(std::back_inserter(text_), "{}", indices[r]);
        if (labelled_) fmt::format_to(std::back_inserter(text_), ",{}", labels[r]);
        if (loss_ == device::LossKind::cross_entropy) {
            // The class from the logits, by the rule accuracy counts with (a row with a NaN
            // or an infinity has NaN probabilities, whose max_element is class 0).
            const std::size_t predicted = kernels::cpu::argmax(row, width_);
            // Softmax, shifted by the largest logit so that exp cannot overflow.
            const double top = values[predicted];
            double sum = 0;
            for (double& v : values) sum += (v = std::exp(v - top));
            for (double& v : values) v /= sum;
            fmt::format_to(std::back_inserter(text_), ",{}", predicted);
        } else if (loss_ == device::LossKind::bce_with_logits) {
            for (double& v : values) v = 1.0 / (1.0 + std::exp(-v));
        }
        // Each value as the float it is, in the fewest digits that read back as that float
        // (six would lose the last of fp32's seven); a NaN as nan, whatever its sign.
        for (double v : values) {
            if (std::isnan(v)) text_ += ",nan";
            else fmt::format_to(std::back_inserter(text_), ",{}", static_cast<float>(v));
        }
        text_ += '\n';
        ++rows_;
    }
}

}  // namespace trainhost::report
