// The ownership contract's costs, each beside the thing it is paid on:
//  - an allocate+free pair through the ledger, against the same allocator untracked;
//  - one hook dispatched to 8 plugins, against one training step of the
//    3072-2048-6-3072 autoencoder (batch 32, Adam, bce_with_logits).
#include "config/run_config.hpp"
#include "device/cpu/cpu_device.hpp"
#include "nn/model.hpp"
#include "nn/optimizer.hpp"
#include "plugin/plugin_instance.hpp"

#include <benchmark/benchmark.h>
#include <memory>
#include <random>

using namespace trainhost;

namespace {

constexpr std::size_t kPairBytes = 4096;

void untracked_pair(benchmark::State& state) {
    device::CpuDevice cpu(0);
    for (auto _ : state) {
        std::size_t reserved = 0;
        void* p = cpu.memory().allocate(kPairBytes, reserved);
        benchmark::DoNotOptimize(p);
        cpu.memory().deallocate(p, kPairBytes, reserved);
    }
}
BENCHMARK(untracked_pair);

void ledger_pair(benchmark::State& state) {
    device::CpuDevice cpu(0);
    resources::Ledger ledger({&cpu});
    const auto owner = ledger.register_owner("bench");
    ledger.set_position(resources::Phase::setup, {});
    for (auto _ : state) {
        th_handle handle = ledger.acquire(owner, TH_RESOURCE_DEVICE_MEMORY, kPairBytes, TH_SCOPE_STEP, "scratch");
        benchmark::DoNotOptimize(handle);
        ledger.release(owner, handle, kPairBytes);
    }
}
BENCHMARK(ledger_pair);

// Just enough host for hooks that ask nothing of it.
class QuietHost final : public plugin::HostServices {
public:
    explicit QuietHost(resources::Ledger& ledger) : ledger_(ledger) {}
    resources::Ledger& ledger() override { return ledger_; }
    th_train_state train_state() const override { return {}; }
    std::optional<double> metric(std::string_view) const override { return std::nullopt; }
    void set_metric(std::string_view, double) override {}
    void erase_metric(std::string_view) override {}
    void request_stop(resources::OwnerId, std::string_view) override {}
    void log(resources::OwnerId, int, std::string_view) override {}
    std::size_t param_count() const override { return 0; }
    plugin::ParamAccess param(std::size_t) override { return {}; }
    device::DeviceIndex model_device() const override { return 0; }
    void request_move(resources::OwnerId, std::string_view) override {}
    device::Backend& model_backend() override { return ledger_.device(0).backend(); }
    double learning_rate() const override { return 0.001; }
    void set_learning_rate(double) override {}
    [[nodiscard]] std::optional<plugin::BatchOutputs> batch_outputs() const override { return std::nullopt; }
    std::size_t metric_count() const override { return 0; }
    std::pair<const std::string*, double> metric_at(std::size_t) const override { return {nullptr, 0}; }
    void state_write(resources::OwnerId, const void*, std::uint64_t) override {}
    void save_checkpoint(resources::OwnerId, std::string_view, bool) override {}

private:
    resources::Ledger& ledger_;
};

void hook_to_8_plugins(benchmark::State& state) {
    device::CpuDevice cpu(0);
    resources::Ledger ledger({&cpu});
    QuietHost host(ledger);
    auto library = plugin::PluginLibrary::load(TRAINHOST_BENCH_NOOP_PLUGIN);
    std::vector<std::unique_ptr<plugin::PluginInstance>> instances;
    for (int i = 0; i < 8; ++i) {
        instances.push_back(std::make_unique<plugin::PluginInstance>(
            library, host, ledger.register_owner("noop" + std::to_string(i)),
            plugin::validate_options(library->entry(), nullptr, "bench")));
        instances.back()->create();
    }
    ledger.set_position(resources::Phase(TH_HOOK_BATCH_END), {});
    for (auto _ : state)
        for (auto& instance : instances)
            if (instance->overrides(TH_HOOK_BATCH_END)) benchmark::DoNotOptimize(instance->call(TH_HOOK_BATCH_END));
}
BENCHMARK(hook_to_8_plugins);

void autoencoder_step(benchmark::State& state) {
    device::CpuDevice cpu(0);
    resources::Ledger ledger({&cpu});
    constexpr std::size_t rows = 32, width = 3072;
    config::ModelSpec spec{{{"dense", 2048, 0}, {"relu", 0, 0}, {"dense", 6, 0}, {"relu", 0, 0}, {"dense", width, 0}},
                           "bce_with_logits"};
    nn::Model model(spec, {width}, width, nn::LayerContext{cpu.backend(), ledger, rows, 0}, 1);
    config::OptimizerSpec adam;
    adam.lr = 3e-4;
    nn::Optimizer optimizer(adam, cpu.backend(), ledger);
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> unit(0.05f, 0.95f);
    std::vector<float> targets(rows * width);
    for (std::size_t i = 0; i < rows * width; ++i) model.input()[i] = targets[i] = unit(rng);
    for (auto _ : state) {
        model.forward(rows, true);
        benchmark::DoNotOptimize(cpu.backend().loss(device::LossKind::bce_with_logits, model.output(), nullptr,
                                                    targets.data(), rows, width, model.output_grad(), nullptr,
                                                    device::Workspace{}));
        model.backward(rows);
        optimizer.step(model.parameters());
    }
}
BENCHMARK(autoencoder_step)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
