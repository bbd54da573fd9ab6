// A convolution layer's workspace: sized for the largest batch, grown where a smaller
// batch needs more (oneDNN's weight-gradient scratch does not shrink with the batch).
#include "data/random.hpp"
#include "device/cpu/cpu_device.hpp"
#include "nn/layers.hpp"
#include "resources/ledger.hpp"

#include <catch2/catch.hpp>
#include <random>
#include <vector>

using namespace trainhost;

namespace {

// The CPU backend, except that a batch of fewer rows than `full_rows` asks for more
// convolution workspace than a full one, and every convolution records what it got.
class SmallBatchesNeedMore final : public device::Backend {
public:
    SmallBatchesNeedMore(device::Backend& cpu, int full_rows) : cpu_(cpu), full_rows_(full_rows) {}
    std::vector<std::size_t> given;  // workspace floats each convolution call got

    [[nodiscard]] std::size_t conv_workspace(const device::ConvShape& s) const override {
        const std::size_t real = cpu_.conv_workspace(s);
        return s.batch < full_rows_ ? 2 * real + 1000 : real;
    }
    void conv2d_forward(const device::ConvShape& s, const float* x, const float* weight, const float* bias, float* y,
                        device::Workspace workspace) override {
        device::require_workspace(workspace, conv_workspace(s), "conv2d_forward");
        given.push_back(workspace.size);
        cpu_.conv2d_forward(s, x, weight, bias, y, workspace);
    }
    void conv2d_backward(const device::ConvShape& s, const float* x, const float* weight, const float* dy,
                         float* dweight, float* dbias, float* dx, device::Workspace workspace) override {
        device::require_workspace(workspace, conv_workspace(s), "conv2d_backward");
        given.push_back(workspace.size);
        cpu_.conv2d_backward(s, x, weight, dy, dweight, dbias, dx, workspace);
    }

    void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb,
              float beta, float* c, int ldc) override {
        cpu_.gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    }
    void add_row_bias(float* y, const float* bias, std::size_t rows, std::size_t cols) override {
        cpu_.add_row_bias(y, bias, rows, cols);
    }
    void bias_gradient(const float* dy, float* dbias, std::size_t rows, std::size_t cols) override {
        cpu_.bias_gradient(dy, dbias, rows, cols);
    }
    void activation_forward(device::Activation kind, const float* x, float* y, std::size_t n) override {
        cpu_.activation_forward(kind, x, y, n);
    }
    void activation_backward(device::Activation kind, const float* x, const float* y, const float* dy, float* dx,
                             std::size_t n) override {
        cpu_.activation_backward(kind, x, y, dy, dx, n);
    }
    void bias_activation_forward(device::Activation kind, float* y, const float* bias, std::size_t rows,
                                 std::size_t cols) override {
        cpu_.bias_activation_forward(kind, y, bias, rows, cols);
    }
    void bias_activation_backward(device::Activation kind, const float* y, const float* dy, float* dz, float* dbias,
                                  std::size_t rows, std::size_t cols) override {
        cpu_.bias_activation_backward(kind, y, dy, dz, dbias, rows, cols);
    }
    void dropout_forward(const float* x, const std::uint8_t* keep, float* y, std::size_t n, double p) override {
        cpu_.dropout_forward(x, keep, y, n, p);
    }
    void dropout_backward(const float* dy, const std::uint8_t* keep, float* dx, std::size_t n, double p) override {
        cpu_.dropout_backward(dy, keep, dx, n, p);
    }
    [[nodiscard]] std::size_t loss_workspace(device::LossKind kind, std::size_t rows, std::size_t cols) const override {
        return cpu_.loss_workspace(kind, rows, cols);
    }
    double loss(device::LossKind kind, const float* output, const std::int32_t* labels, const float* targets,
                std::size_t rows, std::size_t cols, float* grad, std::size_t* correct,
                device::Workspace workspace) override {
        return cpu_.loss(kind, output, labels, targets, rows, cols, grad, correct, workspace);
    }
    void sgd_step(float* param, const float* grad, float* momentum, std::size_t n, const device::SgdHyper& hyper,
                  bool first_step) override {
        cpu_.sgd_step(param, grad, momentum, n, hyper, first_step);
    }
    void adam_step(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, std::size_t n,
                   const device::AdamHyper& hyper, std::int64_t step) override {
        cpu_.adam_step(param, grad, exp_avg, exp_avg_sq, n, hyper, step);
    }
    void fill(float* y, std::size_t n, float value) override { cpu_.fill(y, n, value); }
    void scale(float* x, std::size_t n, float factor) override { cpu_.scale(x, n, factor); }
    double squared_norm(const float* x, std::size_t n) override { return cpu_.squared_norm(x, n); }
    void clamp(float* x, std::size_t n, float bound) override { cpu_.clamp(x, n, bound); }
    void axpy(float a, const float* x, float* y, std::size_t n) override { cpu_.axpy(a, x, y, n); }
    void copy(const float* x, float* y, std::size_t n) override { cpu_.copy(x, y, n); }
    [[nodiscard]] std::size_t pool_indices(const device::PoolShape& s) const override { return cpu_.pool_indices(s); }
    void max_pool2d_forward(const device::PoolShape& s, const float* x, float* y, std::int32_t* indices) override {
        cpu_.max_pool2d_forward(s, x, y, indices);
    }
    void max_pool2d_backward(const device::PoolShape& s, const float* x, const float* y, const float* dy,
                             const std::int32_t* indices, float* dx) override {
        cpu_.max_pool2d_backward(s, x, y, dy, indices, dx);
    }
    void multiply_by_mask(float* x, const float* mask, std::size_t n) override { cpu_.multiply_by_mask(x, mask, n); }
    void mask_below(const float* x, float threshold, float* mask, std::size_t n) override {
        cpu_.mask_below(x, threshold, mask, n);
    }
    [[nodiscard]] float kth_smallest_magnitude(const std::vector<MaskedSpan>& spans, std::uint64_t k) override {
        return cpu_.kth_smallest_magnitude(spans, k);
    }

private:
    device::Backend& cpu_;
    int full_rows_;
};

// A conv2d layer for batches of 8 on that backend, with fresh random data, and the
// core's memory before its first step.
struct LayerWithSmallBatches {
    static constexpr std::size_t full = 8, last = 3;
    device::CpuDevice cpu{0};
    resources::Ledger ledger{{&cpu}};
    SmallBatchesNeedMore backend{cpu.backend(), int(full)};
    data::Rng rng{5};
    device::ConvShape shape{int(full), 2, 6, 6, 3, 3, 1, 1};
    nn::Conv2d conv;
    std::uint64_t core_bytes;
    std::vector<float> x, y, dy, dx;

    explicit LayerWithSmallBatches(std::vector<std::size_t> announced)
        : conv(nn::LayerContext{backend, ledger, full, 0, std::move(announced)}, shape, 0, "conv", rng),
          core_bytes(ledger.usage(resources::kCoreOwner).bytes_in_use),
          x(random(full * 2 * 36, 9)), y(full * 3 * 36), dy(random(full * 3 * 36, 10)), dx(x.size()) {}

    void step(std::size_t rows) {
        conv.forward(x.data(), y.data(), rows, true);
        conv.backward(x.data(), y.data(), dy.data(), dx.data(), rows);
    }
    [[nodiscard]] std::size_t needs(std::size_t rows) const {
        device::ConvShape s = shape;
        s.batch = int(rows);
        return backend.conv_workspace(s);
    }
    [[nodiscard]] std::uint64_t core_now() const { return ledger.usage(resources::kCoreOwner).bytes_in_use; }

    static std::vector<float> random(std::size_t n, unsigned seed) {
        std::mt19937 values(seed);
        std::uniform_real_distribution<float> value(-1.0f, 1.0f);
        std::vector<float> v(n);
        for (float& f : v) f = value(values);
        return v;
    }
};

}  // namespace

TEST_CASE("a conv2d layer sizes its workspace for every batch it is told of, from the start", "[conv][ledger]") {
    using Layer = LayerWithSmallBatches;
    Layer layer({Layer::last});
    REQUIRE(layer.needs(Layer::last) > layer.needs(Layer::full));
    const std::size_t leases = layer.ledger.live_leases();
    for (const std::size_t rows : {Layer::full, Layer::last, Layer::full}) layer.step(rows);
    // Nothing taken or given back during the steps: the memory of the first is the last's.
    CHECK(layer.core_now() == layer.core_bytes);
    CHECK(layer.ledger.live_leases() == leases);
    CHECK(layer.backend.given == std::vector<std::size_t>(6, layer.needs(Layer::last)));
}

TEST_CASE("a conv2d layer grows its workspace lease for a batch nobody announced that needs more", "[conv][ledger]") {
    using Layer = LayerWithSmallBatches;
    Layer layer({});
    const std::size_t sized_for_full = layer.needs(Layer::full), needed = layer.needs(Layer::last);
    REQUIRE(needed > sized_for_full);
    layer.step(Layer::full);
    CHECK(layer.core_now() == layer.core_bytes);  // the full batch fits

    // The last batch asks for more: the lease is replaced by a larger one, once.
    layer.step(Layer::last);
    CHECK(layer.core_now() == layer.core_bytes + (needed - sized_for_full) * sizeof(float));
    CHECK(layer.backend.given == std::vector<std::size_t>{sized_for_full, sized_for_full, needed, needed});
    // A full batch after it keeps the larger lease: nothing is taken or given back.
    const std::size_t leases = layer.ledger.live_leases();
    layer.step(Layer::full);
    CHECK(layer.ledger.live_leases() == leases);
    CHECK(layer.backend.given.back() == needed);
}
