// Backpropagation through whole models checked against central finite differences,
// for each layer kind and each loss, on fresh random data.
#include "config/run_config.hpp"
#include "data/random.hpp"
#include "device/cpu/cpu_device.hpp"
#include "nn/model.hpp"

#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <random>

using namespace trainhost;

namespace {

struct Case {
    std::string name;
    std::vector<config::LayerSpec> layers;
    std::string loss;
    std::vector<std::size_t> input_shape = {6};
    // Max pooling has kinks where the maximum changes hands: a smaller step keeps
    // the central difference on one side of them.
    float step = 1e-2f;
    // Forward passes in training mode, each drawing dropout's mask from the same
    // generator state, so every loss the differences take sees one mask.
    bool training = false;
};

void check_gradients(const Case& c) {
    device::CpuDevice cpu(0);
    device::Backend& backend = cpu.backend();
    resources::Ledger ledger({&cpu});
    constexpr std::size_t rows = 5;
    std::size_t in = 1;
    for (std::size_t d : c.input_shape) in *= d;
    config::ModelSpec spec{c.layers, c.loss};
    const std::size_t out = c.layers.back().type == "dense" ? c.layers.back().units : 4;
    nn::Model model(spec, c.input_shape, out, nn::LayerContext{backend, ledger, rows, 0}, 1234);
    const auto kind = nn::loss_kind(c.loss);

    std::mt19937 rng(99);
    std::uniform_real_distribution<float> value(-1.5f, 1.5f);
    for (std::size_t i = 0; i < rows * in; ++i) model.input()[i] = value(rng);
    std::vector<std::int32_t> labels(rows);
    for (auto& l : labels) l = static_cast<std::int32_t>(rng() % out);
    std::vector<float> targets(rows * out);
    std::uniform_real_distribution<float> unit(0.05f, 0.95f);
    for (auto& t : targets) t = unit(rng);

    std::vector<data::Rng> generators_at_start;
    for (const auto& [name, generator] : model.generators()) generators_at_start.push_back(*generator);
    auto loss = [&](float* grad) {
        const auto generators = model.generators();
        for (std::size_t i = 0; i < generators.size(); ++i) *generators[i].second = generators_at_start[i];
        model.forward(rows, c.training);
        return backend.loss(kind, model.output(), labels.data(), targets.data(), rows, out, grad, nullptr,
                            device::Workspace{});  // the CPU needs no scratch
    };
    const double trained_loss = loss(model.output_grad());
    model.backward(rows);
    if (c.training) {
        // Dropout that dropped nothing would make this the identity's check again.
        model.forward(rows, false);
        const double evaluated_loss = backend.loss(kind, model.output(), labels.data(), targets.data(), rows, out,
                                                   nullptr, nullptr, device::Workspace{});
        CHECK(std::fabs(trained_loss - evaluated_loss) > 1e-4);
    }

    for (nn::Parameter* p : model.parameters()) {
        std::vector<float> analytic(p->grad.data(), p->grad.data() + p->grad.numel());
        double norm = 0;
        for (float g : analytic) norm += std::fabs(g);
        INFO(c.name << " " << p->name);
        CHECK(norm > 1e-6);  // a gradient of zeros would prove nothing
        for (std::size_t i = 0; i < p->value.numel(); ++i) {
            float& w = p->value.data()[i];
            const float saved = w;
            const float h = c.step;
            w = saved + h;
            const double plus = loss(nullptr);
            w = saved - h;
            const double minus = loss(nullptr);
            w = saved;
            const double numeric = (plus - minus) / (2.0 * h);
            INFO("element " << i << " analytic " << analytic[i] << " numeric " << numeric);
            REQUIRE(std::isfinite(analytic[i]));
            CHECK(std::fabs(analytic[i] - numeric) <= 2e-3 + 2e-2 * std::fabs(numeric));
        }
    }
}

config::LayerSpec dense(std::size_t units) { return {"dense", units, 0}; }
config::LayerSpec layer(const char* type) { return {type, 0, 0}; }

}  // namespace

TEST_CASE("gradients match finite differences for every layer and loss", "[gradients]") {
    const std::vector<Case> cases = {
        {"dense+relu, cross_entropy", {layer("flatten"), dense(7), layer("relu"), dense(4)}, "cross_entropy"},
        {"dense+tanh, bce_with_logits", {dense(7), layer("tanh"), dense(4)}, "bce_with_logits"},
        {"dense+sigmoid, mse", {dense(7), layer("sigmoid"), dense(4)}, "mse"},
        {"dropout at rate 0 is the identity", {dense(7), {"dropout", 0, 0.0}, layer("tanh"), dense(4)}, "mse"},
        {"dropout at rate 0.4 in training, cross_entropy",
         {dense(7), layer("relu"), {"dropout", 0, 0.4}, dense(4)},
         "cross_entropy",
         {6},
         1e-2f,
         true},
        {"conv2d+max_pool2d, cross_entropy",
         {{"conv2d", 3, 0, 3, 1, 1}, layer("tanh"), {"max_pool2d", 0, 0, 2, 2, 0}, layer("flatten"), dense(4)},
         "cross_entropy",
         {2, 5, 5},
         1e-3f},
        // A second conv2d's data gradient, overlapping pooling windows (each input can
        // collect from several) and a ReLU layer of its own, not fused into a dense one.
        {"conv2d after overlapping max_pool2d, relu alone, cross_entropy",
         {{"conv2d", 3, 0, 3, 1, 1}, layer("tanh"), {"max_pool2d", 0, 0, 3, 2, 0}, {"conv2d", 2, 0, 3, 1, 1},
          layer("relu"), layer("flatten"), dense(4)},
         "cross_entropy",
         {2, 7, 7},
         1e-3f},
        {"strided conv2d without padding, mse", {{"conv2d", 2, 0, 2, 2, 0}, layer("sigmoid"), dense(4)}, "mse", {1, 6, 6}},
    };
    for (const Case& c : cases) {
        DYNAMIC_SECTION(c.name) { check_gradients(c); }
    }
}

// PyTorch's defaults for nn.Linear and nn.Conv2d: kaiming_uniform_(a=sqrt(5)) for the
// weight and U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for the bias, both that same bound.
TEST_CASE("weights and biases start uniform within 1/sqrt(fan_in), as PyTorch's layers do", "[init]") {
    device::CpuDevice cpu(0);
    resources::Ledger ledger({&cpu});
    config::ModelSpec spec{{{"conv2d", 16, 0, 3, 1, 1}, layer("flatten"), dense(300), layer("relu"), dense(10)},
                           "cross_entropy"};
    nn::Model model(spec, {2, 8, 8}, 10, nn::LayerContext{cpu.backend(), ledger, 4, 0}, 77);
    // conv0: 2 channels x 3 x 3 in; dense1: 16 x 8 x 8 in; dense2: 300 in.
    const std::vector<double> fan_in = {18, 18, 1024, 1024, 300, 300};
    const auto parameters = model.parameters();
    REQUIRE(parameters.size() == fan_in.size());
    for (std::size_t i = 0; i < parameters.size(); ++i) {
        const nn::Parameter& p = *parameters[i];
        INFO(p.name);
        const double bound = 1.0 / std::sqrt(fan_in[i]);
        const float* values = p.value.data();
        const std::size_t n = p.value.numel();
        double largest = 0, sum = 0;
        for (std::size_t j = 0; j < n; ++j) {
            largest = std::max(largest, std::fabs(static_cast<double>(values[j])));
            sum += values[j];
        }
        CHECK(largest <= bound);
        if (n >= 1000) {  // enough draws to see the whole range used, centred on 0
            CHECK(largest > 0.99 * bound);
            CHECK(std::fabs(sum / static_cast<double>(n)) < 0.05 * bound);
        }
    }
}

TEST_CASE("a model move re-homes every buffer and changes no number", "[moves]") {
    device::CpuDevice cpu0(0), cpu1(1);
    resources::Ledger ledger({&cpu0, &cpu1});
    constexpr std::size_t rows = 4, in = 5;
    config::ModelSpec spec{{dense(6), {"dropout", 0, 0.2}, layer("relu"), dense(3)}, "mse"};
    nn::Model model(spec, {in}, 3, nn::LayerContext{cpu0.backend(), ledger, rows, 0}, 7);
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    std::vector<float> input(rows * in);
    for (float& v : input) v = value(rng);
    std::copy(input.begin(), input.end(), model.input());
    model.forward(rows, false);
    const std::vector<float> before(model.output(), model.output() + rows * 3);
    const std::size_t leases = ledger.live_leases();

    model.move_to(1, cpu1.backend());
    CHECK(ledger.leases_on(0).empty());  // nothing left behind on the source
    CHECK(ledger.leases_on(1).size() == leases);
    CHECK(ledger.live_leases() == leases);  // old buffers freed in the same call
    CHECK(cpu0.memory().stats().in_use == 0);
    std::copy(input.begin(), input.end(), model.input());
    model.forward(rows, false);
    CHECK(std::vector<float>(model.output(), model.output() + rows * 3) == before);
    model.move_to(1, cpu1.backend());  // already there: nothing happens
    CHECK(ledger.live_leases() == leases);
}

TEST_CASE("a CNN's move re-makes its pooling indices on the target and changes no number", "[moves]") {
    device::CpuDevice cpu0(0), cpu1(1);
    resources::Ledger ledger({&cpu0, &cpu1});
    constexpr std::size_t rows = 3;
    config::ModelSpec spec{{{"conv2d", 2, 0, 3, 1, 1}, layer("relu"), {"max_pool2d", 0, 0, 2, 2, 0}, layer("flatten"),
                            dense(6), layer("relu"), dense(3)},
                           "cross_entropy"};
    nn::Model model(spec, {1, 6, 6}, 3, nn::LayerContext{cpu0.backend(), ledger, rows, 0}, 11);
    std::mt19937 rng(6);
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    std::vector<float> input(rows * 36);
    for (float& v : input) v = value(rng);
    const auto forward_backward = [&] {
        std::copy(input.begin(), input.end(), model.input());
        model.forward(rows, true);
        std::fill(model.output_grad(), model.output_grad() + rows * 3, 0.25f);
        model.backward(rows);
        return std::vector<float>(model.parameters()[0]->grad.data(),
                                  model.parameters()[0]->grad.data() + model.parameters()[0]->grad.numel());
    };
    const std::vector<float> before = forward_backward();
    REQUIRE(std::any_of(before.begin(), before.end(), [](float g) { return g != 0.0f; }));
    const std::size_t leases = ledger.live_leases();

    model.move_to(1, cpu1.backend());
    CHECK(ledger.leases_on(0).empty());
    CHECK(ledger.live_leases() == leases);
    CHECK(forward_backward() == before);  // the conv weight's gradient went through the pooling's indices
}

// The gradient of a layer's output lives from that layer's backward pass until the one
// before it has read it: the model keeps two buffers, one per parity of the layer,
// each as wide as the widest of its parity, rather than one per layer.
TEST_CASE("the backward pass keeps two activation gradients, not one per layer", "[gradients][memory]") {
    device::CpuDevice cpu(0);
    resources::Ledger ledger({&cpu});
    constexpr std::size_t rows = 5;
    // Layer outputs 6 (flatten), 50, 3, 40, 4: the odd ones' widest is 6, the even ones' 50.
    config::ModelSpec spec{{layer("flatten"), dense(50), dense(3), dense(40), dense(4)}, "mse"};
    nn::Model model(spec, {6}, 4, nn::LayerContext{cpu.backend(), ledger, rows, 0}, 5);
    std::size_t parameters = 0;
    for (const nn::Parameter* p : model.parameters()) parameters += p->value.numel() + p->grad.numel();
    const std::size_t activations = rows * (6 + 6 + 50 + 3 + 40 + 4);
    CHECK(ledger.usage(resources::kCoreOwner).bytes_in_use ==
          sizeof(float) * (parameters + activations + rows * (6 + 50)));
}
