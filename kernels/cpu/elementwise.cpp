#include "kernels/cpu/elementwise.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace trainhost::kernels::cpu {

float dropout_keep_scale(float drop_probability) {
    if (!(drop_probability >= 0.0f && drop_probability <= 1.0f)) {
        throw std::invalid_argument("dropout: drop probability must be in [0, 1], got " +
                                    std::to_string(drop_probability));
    }
    if (drop_probability == 1.0f) {
        return 0.0f;
    }
    return static_cast<float>(1.0 / (1.0 - static_cast<double>(drop_probability)));
}

namespace {

void apply_dropout_mask(const float* in, const std::uint8_t* keep, float* out, std::size_t n, float drop_probability) {
    const float keep_scale = dropout_keep_scale(drop_probability);
    if (keep_scale == 0.0f) {
        // Everything is dropped; writing zeros directly also avoids inf * 0 = NaN.
        fill(out, n, 0.0f);
        return;
    }
    for (std::size_t i = 0; i < n; ++i) {
        out[i] = keep[i] != 0 ? in[i] * keep_scale : 0.0f;
    }
}

}  // namespace

void fill(float* y, std::size_t n, float value) { std::fill(y, y + n, value); }

void copy(const float* x, float* y, std::size_t n) {
    if (x != y) {
        std::copy(x, x + n, y);
    }
}

void scale(float* x, std::size_t n, float factor) {
    for (std::size_t i = 0; i < n; ++i) {
        x[i] *= factor;
    }
}

void axpy(float a, const float* x, float* y, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
        y[i] += a * x[i];
    }
}

void add_row_bias(float* y, const float* bias, std::size_t rows, std::size_t cols) {
    for (std::size_t r = 0; r < rows; ++r) {
        float* row = y + r * cols;
        for (std::size_t c = 0; c < cols; ++c) {
            row[c] += bias[c];
        }
    }
}

void bias_gradient(const float* dy, float* dbias, std::size_t rows, std::size_t cols) {
    // Large batches sum many terms per column; a double accumulator keeps the
    // result essentially exact, which matters for a reference implementation.
    // Rows are walked in order so memory access stays contiguous.
    std::vector<double> column_sums(cols, 0.0);
    for (std::size_t r = 0; r < rows; ++r) {
        const float* row = dy + r * cols;
        for (std::size_t c = 0; c < cols; ++c) {
            column_sums[c] += static_cast<double>(row[c]);
        }
    }
    for (std::size_t c = 0; c < cols; ++c) {
        dbias[c] = static_cast<float>(column_sums[c]);
    }
}

void relu_forward(const float* x, float* y, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
        // NaN passes through (as in PyTorch) so divergence stays visible downstream.
        y[i] = (x[i] > 0.0f || std::isnan(x[i])) ? x[i] : 0.0f;
    }
}

void relu_backward(const float* y, const float* dy, float* dx, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
        dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
    }
}

void sigmoid_forward(const float* x, float* y, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
        // Evaluate in double and round once. exp is only ever taken of a
        // non-positive argument, so it cannot overflow for large |x|.
        const double v = static_cast<double>(x[i]);
        if (v >= 0.0) {
            y[i] = static_cast<float>(1.0 / (1.0 + std::exp(-v)));
        } else {
            const double e = std::exp(v);
            y[i] = static_cast<float>(e / (1.0 + e));
        }
    }
}

void sigmoid_backward(const float* y, const float* dy, float* dx, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
        const double s = static_cast<double>(y[i]);
        dx[i] = static_cast<float>(static_cast<double>(dy[i]) * s * (1.0 - s));
    }
}

void tanh_forward(const float* x, float* y, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
        y[i] = static_cast<float>(std::tanh(static_cast<double>(x[i])));
    }
}

void tanh_backward(const float* y, const float* dy, float* dx, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
        const double t = static_cast<double>(y[i]);
        dx[i] = static_cast<float>(static_cast<double>(dy[i]) * (1.0 - t * t));
    }
}

void dropout_forward(const float* x, const std::uint8_t* keep, float* y, std::size_t n, float drop_probability) {
    apply_dropout_mask(x, keep, y, n, drop_probability);
}

void dropout_backward(const float* dy, const std::uint8_t* keep, float* dx, std::size_t n, float drop_probability) {
    apply_dropout_mask(dy, keep, dx, n, drop_probability);
}

void multiply_by_mask(float* x, const float* mask, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
        x[i] *= mask[i];
    }
}

std::size_t count_nonzero(const float* x, std::size_t n) {
    std::size_t count = 0;
    for (std::size_t i = 0; i < n; ++i) {
        if (x[i] != 0.0f) {
            ++count;
        }
    }
    return count;
}

float magnitude_threshold(const float* x, std::size_t n, std::size_t k) {
    if (k > n) {
        throw std::invalid_argument("magnitude_threshold: k = " + std::to_string(k) + " exceeds n = " +
                                    std::to_string(n));
    }
    if (k == 0) {
        return 0.0f;
    }
    std::vector<float> magnitudes(n);
    for (std::size_t i = 0; i < n; ++i) {
        if (std::isnan(x[i])) {
            // NaN breaks the strict weak ordering nth_element relies on.
            throw std::invalid_argument("magnitude_threshold: input contains NaN");
        }
        magnitudes[i] = std::fabs(x[i]);
    }
    const auto kth = magnitudes.begin() + static_cast<std::ptrdiff_t>(k - 1);
    std::nth_element(magnitudes.begin(), kth, magnitudes.end());
    return *kth;
}

bool all_finite(const float* x, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
        if (!std::isfinite(x[i])) {
            return false;
        }
    }
    return true;
}

void mask_below(const float* x, float threshold, float* mask, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i)
        if (std::fabs(x[i]) <= threshold) mask[i] = 0.0f;
}

}  // namespace trainhost::kernels::cpu
