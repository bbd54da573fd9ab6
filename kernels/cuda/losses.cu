// CUDA twins of kernels/cpu/losses.cpp.
//
// Per-element (or per-row) terms and gradients are computed in double exactly
// as on the CPU and rounded once to float. The mean is a deterministic
// two-stage reduction: fixed-shape partial sums (per row for cross_entropy,
// per block for the others) are written to scratch, then one block adds them
// up in a fixed order. Only the association of the final sum differs from the
// CPU's left-to-right loop, so the loss agrees to double rounding.
//
// Scratch is the caller's (a ledger lease of the core), sized by the
// *_scratch_bytes functions: no loss allocates device memory of its own.

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/kernels.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace trainhost::kernels::cuda {
namespace {

using detail::check;
using detail::check_launch;
using detail::first_index;
using detail::grid_stride;
using detail::kThreads;

constexpr unsigned int kWarp = 32;
constexpr unsigned int kFullMask = 0xffffffffu;
constexpr unsigned int kNoBadRow = UINT_MAX;  // cudaMemset(0xff) pattern
constexpr std::size_t kMaxLossBlocks = 1024;

std::size_t align_up(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

// Offsets within the scratch are multiples of 256, so an 8-byte aligned base keeps
// every double and long long in it aligned.
void require_scratch(const char* loss_name, const void* scratch, std::size_t scratch_bytes, std::size_t needed) {
    if (scratch == nullptr || reinterpret_cast<std::uintptr_t>(scratch) % alignof(double) != 0 ||
        scratch_bytes < needed) {
        throw std::invalid_argument(std::string(loss_name) + ": needs " + std::to_string(needed) +
                                    " bytes of 8-byte aligned device scratch, got " + std::to_string(scratch_bytes) +
                                    (scratch == nullptr ? " (null)" : "") +
                                    (reinterpret_cast<std::uintptr_t>(scratch) % alignof(double) != 0 ? " (misaligned)"
                                                                                                      : ""));
    }
}

// Sum of one double per thread over a kThreads block, in a fixed tree order.
// The total is valid in thread 0 only. `shared` holds kThreads doubles.
__device__ double block_sum(double value, double* shared) {
    shared[threadIdx.x] = value;
    __syncthreads();
    for (unsigned int stride = kThreads / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) {
            shared[threadIdx.x] += shared[threadIdx.x + stride];
        }
        __syncthreads();
    }
    return shared[0];
}

// Adds count doubles in a fixed order with one block of kThreads threads.
__global__ void sum_doubles_kernel(const double* values, std::size_t count, double* total) {
    __shared__ double shared[kThreads];
    double sum = 0.0;
    for (std::size_t i = threadIdx.x; i < count; i += kThreads) {
        sum += values[i];
    }
    const double block_total = block_sum(sum, shared);
    if (threadIdx.x == 0) {
        *total = block_total;
    }
}

// --- cross_entropy ------------------------------------------------------------

struct CrossEntropyResult {
    double loss_sum;
    long long correct;
    unsigned int first_bad_row;  // kNoBadRow when every label is valid
};

__global__ void validate_labels_kernel(const std::int32_t* labels, int rows, int classes, unsigned int* first_bad_row) {
    for (std::size_t r = first_index(); r < static_cast<std::size_t>(rows); r += grid_stride()) {
        const std::int32_t label = labels[r];
        if (label < 0 || label >= classes) {
            atomicMin(first_bad_row, static_cast<unsigned int>(r));
        }
    }
}

// torch.argmax's order: NaN above every number; among equals (NaNs too) the lower index first.
__device__ bool argmax_precedes(float value, int index, float than_value, int than_index) {
    const bool nan = isnan(value), than_nan = isnan(than_value);
    if (nan != than_nan) return nan;
    if (nan || value == than_value) return index < than_index;
    return value > than_value;
}

// One warp per row. Writes the row's loss term and whether its argmax hit the
// label, and the gradient row when grad is not null. Does nothing at all when
// validation found a bad label, so a rejected batch leaves grad untouched.
__global__ void cross_entropy_rows_kernel(const float* logits, const std::int32_t* labels, int rows, int classes,
                                          float* grad, double inverse_rows, const unsigned int* first_bad_row,
                                          double* row_loss, int* row_correct) {
    if (*first_bad_row != kNoBadRow) {
        return;
    }
    const unsigned int lane = threadIdx.x % kWarp;
    const std::size_t warps = grid_stride() / kWarp;
    const auto cols = static_cast<std::size_t>(classes);
    for (std::size_t r = first_index() / kWarp; r < static_cast<std::size_t>(rows); r += warps) {
        const float* row = logits + r * cols;
        const auto label = static_cast<std::size_t>(labels[r]);

        // argmax by torch.argmax's rules, as the CPU's: a NaN is the greatest value, and
        // the lower index wins a tie (between NaNs too). Each lane scans its columns in
        // order, then the lanes combine by that total order, which is order-independent.
        float best = -INFINITY;
        int best_index = INT_MAX;
        for (std::size_t c = lane; c < cols; c += kWarp) {
            const float v = row[c];
            if (best_index == INT_MAX || (!isnan(best) && (isnan(v) || v > best))) {
                best = v;
                best_index = static_cast<int>(c);
            }
        }
        for (unsigned int offset = kWarp / 2; offset > 0; offset /= 2) {
            const float other = __shfl_xor_sync(kFullMask, best, offset);
            const int other_index = __shfl_xor_sync(kFullMask, best_index, offset);
            if (other_index != INT_MAX && (best_index == INT_MAX || argmax_precedes(other, other_index, best, best_index))) {
                best = other;
                best_index = other_index;
            }
        }
        best_index = __shfl_sync(kFullMask, best_index, 0);  // every lane's answer, lane 0's named
        const auto argmax = static_cast<std::size_t>(best_index);
        const double row_max = static_cast<double>(row[argmax]);

        double exp_sum = 0.0;
        for (std::size_t c = lane; c < cols; c += kWarp) {
            exp_sum += exp(static_cast<double>(row[c]) - row_max);
        }
        for (unsigned int offset = kWarp / 2; offset > 0; offset /= 2) {
            exp_sum += __shfl_xor_sync(kFullMask, exp_sum, offset);
        }
        exp_sum = __shfl_sync(kFullMask, exp_sum, 0);

        if (grad != nullptr) {
            float* grad_row = grad + r * cols;
            for (std::size_t c = lane; c < cols; c += kWarp) {
                const double probability = exp(static_cast<double>(row[c]) - row_max) / exp_sum;
                const double target = c == label ? 1.0 : 0.0;
                grad_row[c] = static_cast<float>((probability - target) * inverse_rows);
            }
        }
        if (lane == 0) {
            row_loss[r] = log(exp_sum) - (static_cast<double>(row[label]) - row_max);
            row_correct[r] = argmax == label ? 1 : 0;
        }
    }
}

__global__ void cross_entropy_finish_kernel(const double* row_loss, const int* row_correct, int rows,
                                            CrossEntropyResult* result) {
    __shared__ double shared[kThreads];
    if (result->first_bad_row != kNoBadRow) {
        return;
    }
    double loss = 0.0;
    double correct = 0.0;  // exact: integers below 2^53
    for (std::size_t r = threadIdx.x; r < static_cast<std::size_t>(rows); r += kThreads) {
        loss += row_loss[r];
        correct += row_correct[r];
    }
    const double loss_total = block_sum(loss, shared);
    __syncthreads();  // everyone has read shared[0] before it is reused
    const double correct_total = block_sum(correct, shared);
    if (threadIdx.x == 0) {
        result->loss_sum = loss_total;
        result->correct = static_cast<long long>(correct_total);
    }
}

// --- bce_with_logits and mse ------------------------------------------------------

__device__ double stable_sigmoid(double x) {
    if (x >= 0.0) {
        return 1.0 / (1.0 + exp(-x));
    }
    const double e = exp(x);
    return e / (1.0 + e);
}

__global__ void bce_with_logits_kernel(const float* logits, const float* targets, std::size_t n, float* grad,
                                       double inverse_n, double* block_sums) {
    __shared__ double shared[kThreads];
    double sum = 0.0;
    for (std::size_t i = first_index(); i < n; i += grid_stride()) {
        const double x = static_cast<double>(logits[i]);
        const double t = static_cast<double>(targets[i]);
        // max(x, 0) - x * t + log1p(exp(-|x|)), left to right, without fusing x * t.
        sum += __dadd_rn(__dsub_rn(fmax(x, 0.0), __dmul_rn(x, t)), log1p(exp(-fabs(x))));
        if (grad != nullptr) {
            grad[i] = static_cast<float>((stable_sigmoid(x) - t) * inverse_n);
        }
    }
    const double total = block_sum(sum, shared);
    if (threadIdx.x == 0) {
        block_sums[blockIdx.x] = total;
    }
}

__global__ void mse_kernel(const float* prediction, const float* target, std::size_t n, float* grad,
                           double inverse_n, double* block_sums) {
    __shared__ double shared[kThreads];
    double sum = 0.0;
    for (std::size_t i = first_index(); i < n; i += grid_stride()) {
        const double difference = static_cast<double>(prediction[i]) - static_cast<double>(target[i]);
        sum += __dmul_rn(difference, difference);
        if (grad != nullptr) {
            grad[i] = static_cast<float>(2.0 * difference * inverse_n);
        }
    }
    const double total = block_sum(sum, shared);
    if (threadIdx.x == 0) {
        block_sums[blockIdx.x] = total;
    }
}

unsigned int loss_blocks(std::size_t n) {
    return static_cast<unsigned int>(std::min<std::size_t>((n + kThreads - 1) / kThreads, kMaxLossBlocks));
}

void require_nonempty(const char* loss_name, std::size_t n) {
    if (n == 0) {
        throw std::invalid_argument(std::string(loss_name) + ": the mean over zero elements is undefined");
    }
}

// The mean of an elementwise loss over n elements: checks the arguments, runs
// `launch(blocks, 1 / n, block_sums)` (which must fill `blocks` partial sums),
// reduces them, and returns the mean to the host.
template <typename Launch>
double mean_elementwise_loss(const char* name, std::size_t n, void* scratch, std::size_t scratch_bytes,
                             cudaStream_t stream, Launch launch) {
    require_nonempty(name, n);
    require_scratch(name, scratch, scratch_bytes, elementwise_loss_scratch_bytes(n));
    const double inverse_n = 1.0 / static_cast<double>(n);
    const unsigned int blocks = loss_blocks(n);
    auto* bytes = static_cast<char*>(scratch);
    auto* block_sums = reinterpret_cast<double*>(bytes);
    auto* device_total = reinterpret_cast<double*>(bytes + align_up(blocks * sizeof(double)));
    launch(blocks, inverse_n, block_sums);
    check_launch(name);
    sum_doubles_kernel<<<1, kThreads, 0, stream>>>(block_sums, blocks, device_total);
    check_launch(name);
    double total = 0.0;
    check(cudaMemcpyAsync(&total, device_total, sizeof(double), cudaMemcpyDeviceToHost, stream), name);
    check(cudaStreamSynchronize(stream), name);
    return total * inverse_n;
}

}  // namespace

std::size_t cross_entropy_scratch_bytes(int rows) {
    const auto row_count = static_cast<std::size_t>(std::max(rows, 0));
    return align_up(sizeof(CrossEntropyResult)) + align_up(row_count * sizeof(double)) + row_count * sizeof(int);
}

std::size_t elementwise_loss_scratch_bytes(std::size_t n) {
    return align_up(loss_blocks(n) * sizeof(double)) + sizeof(double);
}

double cross_entropy(const float* logits, const std::int32_t* labels, int rows, int classes, float* grad,
                     int* correct_out, void* scratch, std::size_t scratch_bytes, cudaStream_t stream) {
    if (rows < 1 || classes < 1) {
        throw std::invalid_argument("cross_entropy: need rows >= 1 and classes >= 1, got rows=" +
                                    std::to_string(rows) + ", classes=" + std::to_string(classes));
    }
    require_scratch("cross_entropy", scratch, scratch_bytes, cross_entropy_scratch_bytes(rows));
    const auto row_count = static_cast<std::size_t>(rows);
    const std::size_t result_bytes = align_up(sizeof(CrossEntropyResult));
    const std::size_t loss_bytes = align_up(row_count * sizeof(double));
    const double inverse_rows = 1.0 / static_cast<double>(rows);
    CrossEntropyResult result{};
    auto* bytes = static_cast<char*>(scratch);
    auto* device_result = reinterpret_cast<CrossEntropyResult*>(bytes);
    auto* row_loss = reinterpret_cast<double*>(bytes + result_bytes);
    auto* row_correct = reinterpret_cast<int*>(bytes + result_bytes + loss_bytes);
    check(cudaMemsetAsync(&device_result->first_bad_row, 0xff, sizeof(unsigned int), stream), "cross_entropy");

    validate_labels_kernel<<<detail::blocks_for(row_count), kThreads, 0, stream>>>(labels, rows, classes,
                                                                                   &device_result->first_bad_row);
    check_launch("cross_entropy (validate_labels_kernel)");
    const std::size_t warps_per_block = kThreads / kWarp;
    const auto row_blocks = static_cast<unsigned int>(
        std::min<std::size_t>((row_count + warps_per_block - 1) / warps_per_block, detail::kMaxBlocks));
    cross_entropy_rows_kernel<<<row_blocks, kThreads, 0, stream>>>(logits, labels, rows, classes, grad,
                                                                   inverse_rows, &device_result->first_bad_row,
                                                                   row_loss, row_correct);
    check_launch("cross_entropy (cross_entropy_rows_kernel)");
    cross_entropy_finish_kernel<<<1, kThreads, 0, stream>>>(row_loss, row_correct, rows, device_result);
    check_launch("cross_entropy (cross_entropy_finish_kernel)");
    check(cudaMemcpyAsync(&result, device_result, sizeof(result), cudaMemcpyDeviceToHost, stream),
          "cross_entropy");
    check(cudaStreamSynchronize(stream), "cross_entropy");

    if (result.first_bad_row != kNoBadRow) {
        const unsigned int row = result.first_bad_row;
        std::int32_t label = 0;
        check(cudaMemcpyAsync(&label, labels + row, sizeof(label), cudaMemcpyDeviceToHost, stream), "cross_entropy");
        check(cudaStreamSynchronize(stream), "cross_entropy");
        throw std::invalid_argument("cross_entropy: label " + std::to_string(label) + " at row " +
                                    std::to_string(row) + " is outside [0, " + std::to_string(classes) + ")");
    }
    if (correct_out != nullptr) {
        *correct_out = static_cast<int>(result.correct);
    }
    return result.loss_sum * inverse_rows;
}

double bce_with_logits(const float* logits, const float* targets, std::size_t n, float* grad, void* scratch,
                       std::size_t scratch_bytes, cudaStream_t stream) {
    return mean_elementwise_loss("bce_with_logits", n, scratch, scratch_bytes, stream,
                                 [&](unsigned int blocks, double inverse_n, double* block_sums) {
                                     bce_with_logits_kernel<<<blocks, kThreads, 0, stream>>>(logits, targets, n, grad,
                                                                                             inverse_n, block_sums);
                                 });
}

double mse(const float* prediction, const float* target, std::size_t n, float* grad, void* scratch,
           std::size_t scratch_bytes, cudaStream_t stream) {
    return mean_elementwise_loss("mse", n, scratch, scratch_bytes, stream,
                                 [&](unsigned int blocks, double inverse_n, double* block_sums) {
                                     mse_kernel<<<blocks, kThreads, 0, stream>>>(prediction, target, n, grad, inverse_n,
                                                                                 block_sums);
                                 });
}

}  // namespace trainhost::kernels::cuda
