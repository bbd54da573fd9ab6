// Optimizer steps through the model's own classes, against values worked by hand.
#include "device/cpu/cpu_device.hpp"
#include "nn/optimizer.hpp"

#include <catch2/catch.hpp>

using namespace trainhost;

namespace {

struct Fixture {
    device::CpuDevice cpu{0};
    device::Backend& backend = cpu.backend();
    resources::Ledger ledger{{&cpu}};

    nn::Parameter parameter(nn::ParamId id, std::vector<float> value, std::vector<float> grad) {
        nn::Parameter p{id, "p" + std::to_string(id), nn::Tensor(ledger, {value.size()}, TH_SCOPE_FIT, "value", 0),
                        nn::Tensor(ledger, {grad.size()}, TH_SCOPE_FIT, "grad", 0)};
        std::copy(value.begin(), value.end(), p.value.data());
        std::copy(grad.begin(), grad.end(), p.grad.data());
        return p;
    }
};

}  // namespace

TEST_CASE("SGD with momentum: two steps by hand", "[optimizer]") {
    Fixture f;
    auto p = f.parameter(0, {1.0f, 2.0f}, {0.5f, -1.0f});
    config::OptimizerSpec spec;
    spec.type = "sgd";
    spec.lr = 0.1;
    spec.momentum = 0.9;
    nn::Optimizer optimizer(spec, f.backend, f.ledger);
    optimizer.step({&p});
    // buf = g; p -= 0.1 g
    CHECK(p.value.data()[0] == Approx(0.95f));
    CHECK(p.value.data()[1] == Approx(2.1f));
    optimizer.step({&p});
    // buf = 0.9 g + g = 1.9 g; p -= 0.19 g
    CHECK(p.value.data()[0] == Approx(0.855f));
    CHECK(p.value.data()[1] == Approx(2.29f));
}

TEST_CASE("Adam's first step moves each weight by lr against its gradient's sign", "[optimizer]") {
    Fixture f;
    auto a = f.parameter(0, {1.0f, 2.0f}, {0.5f, -3.0f});
    auto b = f.parameter(1, {-1.0f}, {0.25f});
    config::OptimizerSpec spec;
    spec.type = "adam";
    spec.lr = 1e-3;
    nn::Optimizer optimizer(spec, f.backend, f.ledger);
    optimizer.step({&a, &b});
    CHECK(a.value.data()[0] == Approx(0.999f).epsilon(1e-6));
    CHECK(a.value.data()[1] == Approx(2.001f).epsilon(1e-6));
    CHECK(b.value.data()[0] == Approx(-1.001f).epsilon(1e-6));
    CHECK(optimizer.state_count() == 2);  // one state per ParamId
    // Second step with the same gradient: m_hat/sqrt(v_hat) is still 1, so again lr.
    optimizer.step({&a, &b});
    CHECK(a.value.data()[0] == Approx(0.998f).epsilon(1e-6));
}

TEST_CASE("AdamW decays weights before the Adam update", "[optimizer]") {
    Fixture f;
    auto p = f.parameter(0, {2.0f}, {1.0f});
    config::OptimizerSpec spec;
    spec.type = "adamw";
    spec.lr = 0.1;
    spec.weight_decay = 0.5;
    nn::Optimizer optimizer(spec, f.backend, f.ledger);
    optimizer.step({&p});
    // p *= 1 - 0.1*0.5 -> 1.9; then p -= 0.1 -> 1.8
    CHECK(p.value.data()[0] == Approx(1.8f).epsilon(1e-5));
}
