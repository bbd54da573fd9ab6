#pragma once

// Elementwise and row-broadcast kernels over contiguous float buffers.
//
// Unless stated otherwise an output may be the same buffer as an input
// (exact aliasing, for in-place use) but must not partially overlap it.
// Matrices are row-major and densely packed (row stride == cols).

#include <cstddef>
#include <cstdint>

namespace trainhost::kernels::cpu {

void fill(float* y, std::size_t n, float value);
void copy(const float* x, float* y, std::size_t n);

// x *= factor
void scale(float* x, std::size_t n, float factor);

// Σ x², accumulated in double.
[[nodiscard]] double squared_norm(const float* x, std::size_t n);
// x = min(max(x, -bound), bound); a NaN stays NaN (torch.clamp's rule).
void clamp(float* x, std::size_t n, float bound);

// y += a * x
void axpy(float a, const float* x, float* y, std::size_t n);

// y[r][c] += bias[c] for a rows x cols matrix y.
void add_row_bias(float* y, const float* bias, std::size_t rows, std::size_t cols);

// dbias[c] = sum over r of dy[r][c]; overwrites dbias (does not accumulate).
void bias_gradient(const float* dy, float* dbias, std::size_t rows, std::size_t cols);

enum class Activation { relu, sigmoid, tanh };

// Activations. Backward passes take the forward OUTPUT y, not the input, so
// callers only need to keep one buffer alive between forward and backward.
void relu_forward(const float* x, float* y, std::size_t n);
// dx = dy where y > 0, else 0 (the kink at 0 gets subgradient 0, as in PyTorch).
void relu_backward(const float* y, const float* dy, float* dx, std::size_t n);
void sigmoid_forward(const float* x, float* y, std::size_t n);
// dx = dy * y * (1 - y)
void sigmoid_backward(const float* y, const float* dy, float* dx, std::size_t n);
void tanh_forward(const float* x, float* y, std::size_t n);
// dx = dy * (1 - y^2)
void tanh_backward(const float* y, const float* dy, float* dx, std::size_t n);

// A dense layer's bias and activation in one pass over y, in place:
// y[r][c] = act(y[r][c] + bias[c]). The same values, bit for bit, as
// add_row_bias followed by the activation's forward pass.
void bias_activation_forward(Activation kind, float* y, const float* bias, std::size_t rows, std::size_t cols);
// Its backward pass in one pass over dy: dz = the activation's backward pass from
// the output y, and dbias[c] = sum over r of dz[r][c]. The same values, bit for
// bit, as the activation's backward pass followed by bias_gradient. dz may be dy.
void bias_activation_backward(Activation kind, const float* y, const float* dy, float* dz, float* dbias,
                              std::size_t rows, std::size_t cols);

// Inverted dropout with a mask drawn by the caller (keeps RNG policy out of
// the kernels and lets CPU and CUDA runs share one mask).
// keep[i] != 0 keeps element i. Kept elements are scaled by 1 / (1 - p) so the
// expected activation is unchanged; dropped elements become 0. With p == 1
// everything is dropped regardless of the mask (as torch.nn.functional.dropout).
// Throws std::invalid_argument unless 0 <= p <= 1.
// Inverted-dropout scale for kept elements: computed in double from the rate as
// configured (not its float) and rounded once, as PyTorch's 1 / (1 - p), so that
// p = 0.9 scales by 10 exactly; forward, backward and every backend's twin agree bit
// for bit. Throws
// std::invalid_argument unless 0 <= p <= 1.
[[nodiscard]] float dropout_keep_scale(double drop_probability);
void dropout_forward(const float* x, const std::uint8_t* keep, float* y, std::size_t n, double drop_probability);
// dx = dy * (keep ? 1 / (1 - p) : 0), the same linear map as the forward pass.
void dropout_backward(const float* dy, const std::uint8_t* keep, float* dx, std::size_t n, double drop_probability);

// x *= mask elementwise (e.g. re-applying a 0/1 pruning mask after an update).
void multiply_by_mask(float* x, const float* mask, std::size_t n);

// Number of elements that are not +-0. NaN counts as nonzero.
std::size_t count_nonzero(const float* x, std::size_t n);

// Pruning: mask[i] = 0 where |x[i]| <= threshold; entries above keep their mask value.
void mask_below(const float* x, float threshold, float* mask, std::size_t n);

// The k-th smallest |x[i]| counting from 1, so that pruning every element with
// |x| <= threshold removes exactly k elements when magnitudes are distinct.
// k == 0 returns 0. Throws std::invalid_argument when k > n or x contains NaN
// (NaN has no place in a magnitude ordering).
float magnitude_threshold(const float* x, std::size_t n, std::size_t k);

// True when no element is NaN or +-infinity.
bool all_finite(const float* x, std::size_t n);

}  // namespace trainhost::kernels::cpu
