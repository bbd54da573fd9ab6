#include "kernels/cpu/losses.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace trainhost::kernels::cpu {
namespace {

// exp is only ever taken of a non-positive argument, so neither branch can
// overflow however large |x| is.
double stable_sigmoid(double x) {
    if (x >= 0.0) {
        return 1.0 / (1.0 + std::exp(-x));
    }
    const double e = std::exp(x);
    return e / (1.0 + e);
}

void require_nonempty(const char* loss_name, std::size_t n) {
    if (n == 0) {
        throw std::invalid_argument(std::string(loss_name) + ": the mean over zero elements is undefined");
    }
}

}  // namespace

std::size_t argmax(const float* row, std::size_t n) {
    // A diverged row predicts where its NaN is, not what a NaN in column 0 would hide.
    std::size_t top = 0;
    for (std::size_t c = 1; c < n && !std::isnan(row[top]); ++c) {
        if (std::isnan(row[c]) || row[c] > row[top]) {
            top = c;
        }
    }
    return top;
}

double cross_entropy(const float* logits, const std::int32_t* labels, int rows, int classes, float* grad,
                     int* correct_out) {
    if (rows < 1 || classes < 1) {
        throw std::invalid_argument("cross_entropy: need rows >= 1 and classes >= 1, got rows=" +
                                    std::to_string(rows) + ", classes=" + std::to_string(classes));
    }
    // Validate every label before touching any output, so a bad batch leaves
    // grad and correct_out untouched.
    for (int r = 0; r < rows; ++r) {
        if (labels[r] < 0 || labels[r] >= classes) {
            throw std::invalid_argument("cross_entropy: label " + std::to_string(labels[r]) + " at row " +
                                        std::to_string(r) + " is outside [0, " + std::to_string(classes) + ")");
        }
    }

    const auto cols = static_cast<std::size_t>(classes);
    const double inverse_rows = 1.0 / static_cast<double>(rows);
    std::vector<double> shifted_exp(cols);
    double loss_sum = 0.0;
    int correct = 0;

    for (int r = 0; r < rows; ++r) {
        const float* row = logits + static_cast<std::size_t>(r) * cols;
        const auto label = static_cast<std::size_t>(labels[r]);

        const std::size_t top = argmax(row, cols);
        if (top == label) {
            ++correct;
        }

        // Shifting by the row max makes every exponent <= 0: no overflow, and
        // the largest term is exactly 1, so the sum cannot underflow to 0.
        const double row_max = static_cast<double>(row[top]);
        double exp_sum = 0.0;
        for (std::size_t c = 0; c < cols; ++c) {
            shifted_exp[c] = std::exp(static_cast<double>(row[c]) - row_max);
            exp_sum += shifted_exp[c];
        }
        // -log softmax[label] = log(sum exp(x - max)) - (x[label] - max)
        loss_sum += std::log(exp_sum) - (static_cast<double>(row[label]) - row_max);

        if (grad != nullptr) {
            float* grad_row = grad + static_cast<std::size_t>(r) * cols;
            for (std::size_t c = 0; c < cols; ++c) {
                const double probability = shifted_exp[c] / exp_sum;
                const double target = c == label ? 1.0 : 0.0;
                grad_row[c] = static_cast<float>((probability - target) * inverse_rows);
            }
        }
    }

    if (correct_out != nullptr) {
        *correct_out = correct;
    }
    return loss_sum * inverse_rows;
}

double bce_with_logits(const float* logits, const float* targets, std::size_t n, float* grad) {
    require_nonempty("bce_with_logits", n);
    const double inverse_n = 1.0 / static_cast<double>(n);
    double loss_sum = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
        const double x = static_cast<double>(logits[i]);
        const double t = static_cast<double>(targets[i]);
        // Algebraically -(t*log(sigmoid(x)) + (1-t)*log(1-sigmoid(x))), but
        // never takes the log of a value that rounded to 0.
        loss_sum += std::max(x, 0.0) - x * t + std::log1p(std::exp(-std::fabs(x)));
        if (grad != nullptr) {
            grad[i] = static_cast<float>((stable_sigmoid(x) - t) * inverse_n);
        }
    }
    return loss_sum * inverse_n;
}

double mse(const float* prediction, const float* target, std::size_t n, float* grad) {
    require_nonempty("mse", n);
    const double inverse_n = 1.0 / static_cast<double>(n);
    double loss_sum = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
        const double difference = static_cast<double>(prediction[i]) - static_cast<double>(target[i]);
        loss_sum += difference * difference;
        if (grad != nullptr) {
            grad[i] = static_cast<float>(2.0 * difference * inverse_n);
        }
    }
    return loss_sum * inverse_n;
}

}  // namespace trainhost::kernels::cpu
