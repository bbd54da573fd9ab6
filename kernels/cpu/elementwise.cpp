#include "kernels/cpu/elementwise.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace trainhost::kernels::cpu {

float dropout_keep_scale(double drop_probability) {
    if (!(drop_probability >= 0.0 && drop_probability <= 1.0)) {
        throw std::invalid_argument("dropout: drop probability must be in [0, 1], got " +
                                    std::to_string(drop_probability));
    }
    if (drop_probability == 1.0) {
        return 0.0f;
    }
    return static_cast<float>(1.0 / (1.0 - drop_probability));
}

namespace {

void apply_dropout_mask(const float* in, const std::uint8_t* keep, float* out, std::size_t n, double drop_probability) {
    const float keep_scale = dropout_keep_scale(drop_probability);  // 0 where everything is dropped
    // A product at dropped entries too, as PyTorch's: a NaN or infinity there stays
    // NaN, so a diverging layer is not hidden behind the mask.
    for (std::size_t i = 0; i < n; ++i) {
        out[i] = in[i] * (keep[i] != 0 ? keep_scale : 0.0f);
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

double squared_norm(const float* x, std::size_t n) {
    // Four independent sums: one chain of dependent adds would bound the loop by
    // the add's latency.
    double sums[4] = {0, 0, 0, 0};
    std::size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        for (std::size_t lane = 0; lane < 4; ++lane) {
            const double v = x[i + lane];
            sums[lane] += v * v;
        }
    }
    for (; i < n; ++i) {
        const double v = x[i];
        sums[0] += v * v;
    }
    return (sums[0] + sums[1]) + (sums[2] + sums[3]);
}

void clamp(float* x, std::size_t n, float bound) {
    for (std::size_t i = 0; i < n; ++i) {
        if (!std::isnan(x[i])) {
            x[i] = std::min(std::max(x[i], -bound), bound);
        }
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

namespace {

// One value of each activation and of its derivative from the output: the array
// functions and the fused bias passes share these, so they agree bit for bit.
float relu_value(float x) {
    // NaN passes through (as in PyTorch) so divergence stays visible downstream.
    return (x > 0.0f || std::isnan(x)) ? x : 0.0f;
}

// Where the output is NaN the gradient passes, as PyTorch's threshold_backward (y <= 0 ? 0 : dy).
float relu_gradient(float y, float dy) { return !(y <= 0.0f) ? dy : 0.0f; }

float sigmoid_value(float x) {
    // Evaluate in double and round once. exp is only ever taken of a
    // non-positive argument, so it cannot overflow for large |x|.
    const double v = static_cast<double>(x);
    if (v >= 0.0) return static_cast<float>(1.0 / (1.0 + std::exp(-v)));
    const double e = std::exp(v);
    return static_cast<float>(e / (1.0 + e));
}

float sigmoid_gradient(float y, float dy) {
    const double s = static_cast<double>(y);
    return static_cast<float>(static_cast<double>(dy) * s * (1.0 - s));
}

float tanh_value(float x) { return static_cast<float>(std::tanh(static_cast<double>(x))); }

float tanh_gradient(float y, float dy) {
    const double t = static_cast<double>(y);
    return static_cast<float>(static_cast<double>(dy) * (1.0 - t * t));
}

template <float (*Value)(float)>
void map_values(const float* x, float* y, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) y[i] = Value(x[i]);
}

template <float (*Gradient)(float, float)>
void map_gradients(const float* y, const float* dy, float* dx, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) dx[i] = Gradient(y[i], dy[i]);
}

template <float (*Value)(float)>
void add_bias_then(float* y, const float* bias, std::size_t rows, std::size_t cols) {
    for (std::size_t r = 0; r < rows; ++r) {
        float* row = y + r * cols;
        for (std::size_t c = 0; c < cols; ++c) row[c] = Value(row[c] + bias[c]);
    }
}

float identity_gradient(float, float dy) { return dy; }

// dz = the gradient through the activation, and its column sums into dbias. Large
// batches sum many terms per column: a double accumulator keeps the result
// essentially exact, which matters for a reference implementation; rows are walked
// in order so memory access stays contiguous. dz null: the sums alone.
template <float (*Gradient)(float, float)>
void gradient_then_column_sums(const float* y, const float* dy, float* dz, float* dbias, std::size_t rows,
                               std::size_t cols) {
    std::vector<double> column_sums(cols, 0.0);
    for (std::size_t r = 0; r < rows; ++r) {
        const std::size_t row = r * cols;
        for (std::size_t c = 0; c < cols; ++c) {
            const float g = Gradient(y[row + c], dy[row + c]);
            if (dz != nullptr) dz[row + c] = g;
            column_sums[c] += static_cast<double>(g);
        }
    }
    for (std::size_t c = 0; c < cols; ++c) dbias[c] = static_cast<float>(column_sums[c]);
}

}  // namespace

void bias_gradient(const float* dy, float* dbias, std::size_t rows, std::size_t cols) {
    gradient_then_column_sums<identity_gradient>(dy, dy, nullptr, dbias, rows, cols);
}

void relu_forward(const float* x, float* y, std::size_t n) { map_values<relu_value>(x, y, n); }
void relu_backward(const float* y, const float* dy, float* dx, std::size_t n) {
    map_gradients<relu_gradient>(y, dy, dx, n);
}
void sigmoid_forward(const float* x, float* y, std::size_t n) { map_values<sigmoid_value>(x, y, n); }
void sigmoid_backward(const float* y, const float* dy, float* dx, std::size_t n) {
    map_gradients<sigmoid_gradient>(y, dy, dx, n);
}
void tanh_forward(const float* x, float* y, std::size_t n) { map_values<tanh_value>(x, y, n); }
void tanh_backward(const float* y, const float* dy, float* dx, std::size_t n) {
    map_gradients<tanh_gradient>(y, dy, dx, n);
}

void bias_activation_forward(Activation kind, float* y, const float* bias, std::size_t rows, std::size_t cols) {
    switch (kind) {
    case Activation::relu: add_bias_then<relu_value>(y, bias, rows, cols); return;
    case Activation::sigmoid: add_bias_then<sigmoid_value>(y, bias, rows, cols); return;
    case Activation::tanh: add_bias_then<tanh_value>(y, bias, rows, cols); return;
    }
}

void bias_activation_backward(Activation kind, const float* y, const float* dy, float* dz, float* dbias,
                              std::size_t rows, std::size_t cols) {
    switch (kind) {
    case Activation::relu: gradient_then_column_sums<relu_gradient>(y, dy, dz, dbias, rows, cols); return;
    case Activation::sigmoid: gradient_then_column_sums<sigmoid_gradient>(y, dy, dz, dbias, rows, cols); return;
    case Activation::tanh: gradient_then_column_sums<tanh_gradient>(y, dy, dz, dbias, rows, cols); return;
    }
}

void dropout_forward(const float* x, const std::uint8_t* keep, float* y, std::size_t n, double drop_probability) {
    apply_dropout_mask(x, keep, y, n, drop_probability);
}

void dropout_backward(const float* dy, const std::uint8_t* keep, float* dx, std::size_t n, double drop_probability) {
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
