#pragma once

// CUDA twins of the kernels in kernels/cpu/, callable from plain C++ (this
// header contains no CUDA syntax). Convolution, pooling and standalone
// activations are not here: the CUDA backend uses cuDNN for them.
//
// Conventions, shared by every function below:
//   * Every float / int / byte pointer is a DEVICE pointer unless the comment
//     says "host". Shapes and semantics (aliasing, row-major dense matrices,
//     what is overwritten) are those of the CPU twin with the same name.
//   * Work is enqueued on `stream`; nothing synchronises, so outputs are ready
//     once the stream is. The exceptions are the losses, which return a value
//     to the host and therefore wait for `stream` before returning.
//   * Results follow the CPU twin's arithmetic: the same operation order
//     without fused multiply-adds, and double precision where the CPU uses it,
//     so most outputs match the CPU bit for bit and all match to fp32 rounding.
//     Reductions (bias_gradient, the loss means) use a fixed order, so repeated
//     runs give identical results.
//   * Invalid arguments that the CPU twin rejects throw std::invalid_argument
//     with the same condition, before anything is enqueued. A failed launch or
//     CUDA call throws std::runtime_error naming the kernel and carrying
//     cudaGetErrorString. n == 0 (or rows == 0 / cols == 0) launches nothing.

#include "kernels/cpu/elementwise.hpp"
#include "kernels/cpu/optimizers.hpp"

#include <cuda_runtime_api.h>  // cudaStream_t only

#include <cstddef>
#include <cstdint>

namespace trainhost::kernels::cuda {

// --- elementwise (twins of kernels/cpu/elementwise.hpp) ---------------------

void fill(float* y, std::size_t n, float value, cudaStream_t stream);
// A device-to-device copy; x == y does nothing.
void copy(const float* x, float* y, std::size_t n, cudaStream_t stream);
// x *= factor
void scale(float* x, std::size_t n, float factor, cudaStream_t stream);
// x = min(max(x, -bound), bound); a NaN stays NaN.
void clamp(float* x, std::size_t n, float bound, cudaStream_t stream);
// y += a * x
void axpy(float a, const float* x, float* y, std::size_t n, cudaStream_t stream);
// y[r][c] += bias[c]
void add_row_bias(float* y, const float* bias, std::size_t rows, std::size_t cols, cudaStream_t stream);
// dbias[c] = sum over r of dy[r][c] (overwrites). Accumulated in double in a
// fixed order and rounded once, like the CPU twin; deterministic.
void bias_gradient(const float* dy, float* dbias, std::size_t rows, std::size_t cols, cudaStream_t stream);

// A dense layer's bias and activation: y = act(y + bias) in place, and its
// backward pass dz = act'(from y) * dy with dbias = column sums of dz (dz may be
// dy). Standalone activations go through cuDNN in the backend instead.
void bias_activation_forward(trainhost::kernels::cpu::Activation kind, float* y, const float* bias, std::size_t rows,
                             std::size_t cols, cudaStream_t stream);
void bias_activation_backward(trainhost::kernels::cpu::Activation kind, const float* y, const float* dy, float* dz,
                              float* dbias, std::size_t rows, std::size_t cols, cudaStream_t stream);

// keep: n bytes on the device, nonzero = kept. The keep scale is computed on
// the host exactly as on the CPU (float(1 / (1 - p)) evaluated in double);
// p == 1 writes zeros. Throws std::invalid_argument unless 0 <= p <= 1.
void dropout_forward(const float* x, const std::uint8_t* keep, float* y, std::size_t n, double drop_probability,
                     cudaStream_t stream);
void dropout_backward(const float* dy, const std::uint8_t* keep, float* dx, std::size_t n, double drop_probability,
                      cudaStream_t stream);

// x *= mask
void multiply_by_mask(float* x, const float* mask, std::size_t n, cudaStream_t stream);
// mask[i] = 0 where |x[i]| <= threshold; other entries keep their value.
void mask_below(const float* x, float threshold, float* mask, std::size_t n, cudaStream_t stream);

// --- losses (twins of kernels/cpu/losses.hpp) -------------------------------
//
// Each returns the mean loss (computed in double) to the host and, when grad
// is not null, writes the gradient of that mean into grad (device). These
// synchronise `stream` to read the result back. Scratch is the caller's: at
// least *_scratch_bytes(...) bytes of device memory, 8-byte aligned (the core
// holds it as a ledger lease), so no loss allocates. Too little, a null or a
// misaligned scratch throws std::invalid_argument before anything is enqueued.

[[nodiscard]] std::size_t cross_entropy_scratch_bytes(int rows);
// For bce_with_logits and mse over n elements.
[[nodiscard]] std::size_t elementwise_loss_scratch_bytes(std::size_t n);

// labels: `rows` class indices on the device. correct_out is a HOST pointer
// (nullable) that receives the number of rows whose argmax (lowest index on
// ties, a NaN the greatest value: torch.argmax's) equals the label. Labels are validated on the device: when one lies
// outside [0, classes) nothing is written to grad or correct_out and
// std::invalid_argument is thrown. Also throws it when rows < 1 or classes < 1.
double cross_entropy(const float* logits, const std::int32_t* labels, int rows, int classes, float* grad,
                     int* correct_out, void* scratch, std::size_t scratch_bytes, cudaStream_t stream);
// Throws std::invalid_argument when n == 0.
double bce_with_logits(const float* logits, const float* targets, std::size_t n, float* grad, void* scratch,
                       std::size_t scratch_bytes, cudaStream_t stream);
// Throws std::invalid_argument when n == 0.
double mse(const float* prediction, const float* target, std::size_t n, float* grad, void* scratch,
           std::size_t scratch_bytes, cudaStream_t stream);

// --- optimizers (twins of kernels/cpu/optimizers.hpp) -----------------------
//
// Fused one-kernel updates with the CPU's formulas, operation order and
// host-side (double) scalar coefficients; hyperparameters are validated on
// the host exactly as the CPU does.

void sgd_step(float* param, const float* grad, float* momentum_buffer, std::size_t n,
              const trainhost::kernels::cpu::SgdHyper& hyper, bool first_step, cudaStream_t stream);
void adam_step(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, std::size_t n,
               const trainhost::kernels::cpu::AdamHyper& hyper, std::int64_t step, cudaStream_t stream);

}  // namespace trainhost::kernels::cuda
