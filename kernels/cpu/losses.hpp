#pragma once

// Loss functions. Each returns the MEAN loss over the batch, accumulated in
// double, and, when grad != nullptr, writes the gradient of that mean loss
// with respect to its input into grad (same shape as the input, overwritten).
// Internals run in double and round once to float, so these serve as the
// numerical reference for other backends.

#include <cstddef>
#include <cstdint>

namespace trainhost::kernels::cpu {

// Softmax cross-entropy for a rows x classes matrix of logits and one class
// index per row. Uses the max-shifted log-sum-exp, so huge logits stay finite.
// grad = (softmax(logits) - onehot(labels)) / rows.
// correct_out (nullable) receives the number of rows whose argmax equals the
// label; ties resolve to the lowest class index and a NaN is the greatest value
// (the first NaN is the argmax), as torch.argmax does.
// Throws std::invalid_argument when rows < 1, classes < 1 or a label lies
// outside [0, classes); nothing is written in that case.
double cross_entropy(const float* logits, const std::int32_t* labels, int rows, int classes, float* grad,
                     int* correct_out);

// The index of a row's largest value by torch.argmax's rules: the first maximum wins
// a tie, and a NaN is the greatest value (the first NaN is the answer). What the
// correct count above and a prediction both take as the predicted class.
[[nodiscard]] std::size_t argmax(const float* row, std::size_t n);

// Binary cross-entropy on logits, averaged over all n elements, in the stable
// form max(x, 0) - x * t + log1p(exp(-|x|)). grad = (sigmoid(x) - t) / n.
// Throws std::invalid_argument when n == 0.
double bce_with_logits(const float* logits, const float* targets, std::size_t n, float* grad);

// Mean squared error over n elements. grad = 2 * (prediction - target) / n.
// Throws std::invalid_argument when n == 0.
double mse(const float* prediction, const float* target, std::size_t n, float* grad);

}  // namespace trainhost::kernels::cpu
