#include "device/cuda/cuda_backend.hpp"
#include "device/cuda/cuda_check.hpp"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace trainhost::device {

namespace {

// Device scratch for the warm-up only, straight from the pool: it is given back
// before the ledger ever measures anything.
class WarmUpBuffer {
public:
    WarmUpBuffer(MemoryResource& memory, std::size_t bytes) : memory_(memory), bytes_(bytes) {
        address_ = memory_.allocate(bytes_, reserved_);
        if (address_ == nullptr) throw std::runtime_error("no device memory for " + std::to_string(bytes_) + " bytes");
    }
    ~WarmUpBuffer() { memory_.deallocate(address_, bytes_, reserved_); }
    WarmUpBuffer(const WarmUpBuffer&) = delete;
    WarmUpBuffer& operator=(const WarmUpBuffer&) = delete;
    template <typename T>
    [[nodiscard]] T* as() const noexcept {
        return static_cast<T*>(address_);
    }

private:
    MemoryResource& memory_;
    std::size_t bytes_;
    std::size_t reserved_ = 0;
    void* address_ = nullptr;
};

void run_every_operation(CudaBackend& backend, MemoryResource& memory) {
    constexpr std::size_t kRows = 4, kCols = 8, kCount = kRows * kCols;
    const auto floats = [&](std::size_t n) { return WarmUpBuffer(memory, n * sizeof(float)); };
    WarmUpBuffer a = floats(kCount), b = floats(kCount), c = floats(kCount), d = floats(kCount);
    WarmUpBuffer keep(memory, kCount);
    WarmUpBuffer labels(memory, kRows * sizeof(std::int32_t));
    backend.fill(a.as<float>(), kCount, 0.5f);
    backend.fill(b.as<float>(), kCount, 0.25f);
    backend.copy(a.as<float>(), c.as<float>(), kCount);
    backend.scale(c.as<float>(), kCount, 0.5f);
    backend.clamp(c.as<float>(), kCount, 0.5f);
    backend.axpy(1.0f, a.as<float>(), c.as<float>(), kCount);
    static_cast<void>(backend.squared_norm(c.as<float>(), kCount));
    {  // cuBLAS may pick another nrm2 kernel for a parameter's size than for 32 values
        constexpr std::size_t kLarge = std::size_t{1} << 20;
        WarmUpBuffer large(memory, kLarge * sizeof(float));
        backend.fill(large.as<float>(), kLarge, 0.5f);
        static_cast<void>(backend.squared_norm(large.as<float>(), kLarge));
    }
    std::vector<std::uint8_t> host_keep(kCount, 1);
    std::vector<std::int32_t> host_labels(kRows, 1);
    memory.copy_from_host(keep.as<void>(), host_keep.data(), host_keep.size());
    memory.copy_from_host(labels.as<void>(), host_labels.data(), host_labels.size() * sizeof(std::int32_t));

    // C [4 x 8] = op(A) [4 x 4] op(B) [4 x 8], every transpose cuBLAS may be asked for.
    for (const bool transpose_a : {false, true})
        for (const bool transpose_b : {false, true})
            backend.gemm(transpose_a, transpose_b, 4, 8, 4, 1.0f, a.as<float>(), 4, b.as<float>(), transpose_b ? 4 : 8,
                         0.0f, c.as<float>(), 8);
    backend.add_row_bias(c.as<float>(), a.as<float>(), kRows, kCols);
    backend.bias_gradient(c.as<float>(), d.as<float>(), kRows, kCols);
    for (const Activation kind : {Activation::relu, Activation::sigmoid, Activation::tanh}) {
        backend.activation_forward(kind, a.as<float>(), c.as<float>(), kCount);
        backend.activation_backward(kind, a.as<float>(), c.as<float>(), b.as<float>(), d.as<float>(), kCount);
        backend.bias_activation_forward(kind, c.as<float>(), a.as<float>(), kRows, kCols);
        backend.bias_activation_backward(kind, c.as<float>(), b.as<float>(), d.as<float>(), a.as<float>(), kRows, kCols);
    }
    backend.dropout_forward(a.as<float>(), keep.as<std::uint8_t>(), c.as<float>(), kCount, 0.5f);
    backend.dropout_backward(b.as<float>(), keep.as<std::uint8_t>(), d.as<float>(), kCount, 0.5f);
    for (const LossKind kind : {LossKind::cross_entropy, LossKind::bce_with_logits, LossKind::mse}) {
        const std::size_t scratch_floats = backend.loss_workspace(kind, kRows, kCols);
        WarmUpBuffer scratch = floats(scratch_floats);
        std::size_t correct = 0;
        static_cast<void>(backend.loss(kind, a.as<float>(), labels.as<std::int32_t>(), b.as<float>(), kRows, kCols,
                                       d.as<float>(), &correct, Workspace{scratch.as<float>(), scratch_floats}));
    }
    backend.sgd_step(c.as<float>(), b.as<float>(), d.as<float>(), kCount, SgdHyper{0.1f, 0.9f}, true);
    backend.adam_step(c.as<float>(), b.as<float>(), d.as<float>(), a.as<float>(), kCount, AdamHyper{}, 1);
    backend.multiply_by_mask(c.as<float>(), b.as<float>(), kCount);
    backend.mask_below(c.as<float>(), 0.1f, d.as<float>(), kCount);

    // One 2-sample, 1-channel 4x4 image through a 3x3 convolution and a 2x2 pool.
    const ConvShape conv{2, 1, 4, 4, 1, 3, 1, 1};
    const std::size_t workspace_floats = std::max<std::size_t>(1, backend.conv_workspace(conv));
    WarmUpBuffer workspace = floats(workspace_floats);
    WarmUpBuffer weight = floats(9), bias = floats(1), dweight = floats(9), dbias = floats(1);
    backend.fill(weight.as<float>(), 9, 0.1f);
    backend.fill(bias.as<float>(), 1, 0.1f);
    backend.conv2d_forward(conv, a.as<float>(), weight.as<float>(), bias.as<float>(), c.as<float>(),
                           Workspace{workspace.as<float>(), workspace_floats});
    backend.conv2d_backward(conv, a.as<float>(), weight.as<float>(), b.as<float>(), dweight.as<float>(),
                            dbias.as<float>(), d.as<float>(), Workspace{workspace.as<float>(), workspace_floats});
    const PoolShape pool{2, 1, 4, 4, 2, 2};
    backend.max_pool2d_forward(pool, a.as<float>(), c.as<float>(), nullptr);
    backend.max_pool2d_backward(pool, a.as<float>(), c.as<float>(), b.as<float>(), nullptr, d.as<float>());
    static_cast<void>(backend.kth_smallest_magnitude({Backend::MaskedSpan{c.as<float>(), nullptr, kCount}}, 1));
}

}  // namespace

void warm_up(CudaBackend& backend, MemoryResource& memory) {
    try {
        run_every_operation(backend, memory);
        TRAINHOST_CUDA_CHECK(cudaDeviceSynchronize());
    } catch (const std::exception& e) {
        throw std::runtime_error(memory.device_name() + ": the CUDA backend failed its first use: " + e.what());
    }
    memory.trim();
}

}  // namespace trainhost::device
