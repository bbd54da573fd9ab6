// Optimizer steps through the model's own classes, against values worked by hand.
#include "device/cpu/cpu_device.hpp"
#include "nn/optimizer.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

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

TEST_CASE("gradient clipping by norm scales every gradient by PyTorch's coefficient", "[optimizer][clip]") {
    Fixture f;
    // Global norm sqrt(3^2 + 4^2 + 12^2) = 13, over two parameters.
    auto a = f.parameter(0, {1.0f, 1.0f}, {3.0f, -4.0f});
    auto b = f.parameter(1, {1.0f}, {12.0f});
    config::OptimizerSpec spec;
    spec.type = "sgd";
    spec.gradient_clip_val = 6.5;
    nn::Optimizer optimizer(spec, f.backend, f.ledger);
    const auto norm = optimizer.clip_gradients({&a, &b});
    REQUIRE(norm.has_value());
    CHECK(*norm == 13.0);
    const double coefficient = 6.5 / (13.0 + 1e-6);  // torch.nn.utils.clip_grad_norm_
    CHECK(a.grad.data()[0] == Approx(3.0 * coefficient).epsilon(1e-7));
    CHECK(a.grad.data()[1] == Approx(-4.0 * coefficient).epsilon(1e-7));
    CHECK(b.grad.data()[0] == Approx(12.0 * coefficient).epsilon(1e-7));

    SECTION("a norm within the bound leaves the gradients as they are") {
        const auto within = optimizer.clip_gradients({&a, &b});
        REQUIRE(within.has_value());
        CHECK(*within == Approx(6.5).epsilon(1e-6));
        CHECK(a.grad.data()[0] == Approx(3.0 * coefficient).epsilon(1e-6));
    }
    SECTION("a non-finite norm is returned, the gradients untouched, for the caller to refuse") {
        b.grad.data()[0] = std::numeric_limits<float>::infinity();
        const float before = a.grad.data()[0];
        const auto infinite = optimizer.clip_gradients({&a, &b});
        REQUIRE(infinite.has_value());
        CHECK(std::isinf(*infinite));
        CHECK(a.grad.data()[0] == before);
    }
}

TEST_CASE("gradient clipping by value clamps each gradient, and 0 clips nothing", "[optimizer][clip]") {
    Fixture f;
    auto p = f.parameter(0, {1.0f, 1.0f, 1.0f}, {0.75f, -0.25f, -2.0f});
    config::OptimizerSpec spec;
    spec.type = "sgd";
    spec.gradient_clip_val = 0.5;
    spec.gradient_clip_algorithm = "value";
    nn::Optimizer optimizer(spec, f.backend, f.ledger);
    CHECK_FALSE(optimizer.clip_gradients({&p}).has_value());
    CHECK(std::vector<float>(p.grad.data(), p.grad.data() + 3) == std::vector<float>{0.5f, -0.25f, -0.5f});

    config::OptimizerSpec off;
    off.type = "sgd";
    nn::Optimizer unclipped(off, f.backend, f.ledger);
    auto q = f.parameter(1, {1.0f}, {100.0f});
    CHECK_FALSE(unclipped.clip_gradients({&q}).has_value());
    CHECK(q.grad.data()[0] == 100.0f);
}
