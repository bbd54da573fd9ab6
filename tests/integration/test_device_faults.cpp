// What a session does when a device misbehaves as only a GPU can: a fault left for
// the fit-end synchronize, memory missing from the driver's own count, a GPU that
// cannot be opened or fails its warm-up. CPU devices stand in, scripted and named as
// GPUs where needed, so every path runs without a GPU.
#include "config/run_config.hpp"
#include "errors.hpp"
#include "device/cpu/cpu_device.hpp"
#include "integration/process.hpp"
#include "integration/stand_in_device.hpp"
#include "lifecycle/session.hpp"

#include <catch2/catch.hpp>

#include <functional>
#include <sstream>
#include <stdexcept>

using Catch::Matchers::Contains;
using namespace trainhost;

namespace {

constexpr std::uint64_t kMiB = 1u << 20;

// cpu:0 as it is, except for what the test scripts: a synchronize that throws from
// the given call on, and what the driver reports free at each call.
class ScriptedDevice final : public test_support::StandInDevice {
public:
    struct Script {
        int fault_from_synchronize = 0;        // 1-based; 0: never
        std::vector<std::uint64_t> free_bytes;  // one per driver_free_bytes call; empty: none, as on a CPU
    };
    explicit ScriptedDevice(Script script) : StandInDevice("cpu:0"), script_(std::move(script)) {}

    void synchronize() override {
        if (script_.fault_from_synchronize != 0 && ++synchronizations_ >= script_.fault_from_synchronize)
            throw std::runtime_error("an illegal memory access was encountered (scripted)");
        StandInDevice::synchronize();
    }
    [[nodiscard]] std::optional<std::uint64_t> driver_free_bytes() const override {
        if (script_.free_bytes.empty()) return std::nullopt;
        REQUIRE(reads_ < script_.free_bytes.size());
        return script_.free_bytes[reads_++];
    }

private:
    Script script_;
    int synchronizations_ = 0;
    mutable std::size_t reads_ = 0;
};

struct Run {
    lifecycle::SessionResult result;
    std::string out;
    std::string err;
};

Run run_on(std::function<device::DeviceInventory()> devices, std::uint32_t repeat = 1,
           const std::string& extra_config = "", std::vector<std::string> plugins = {},
           const std::string& device = "auto") {
    lifecycle::SessionOptions options;
    options.config = config::parse_run_config(test_support::tiny_config(2, extra_config), "run.toml");
    options.config.device = device;
    options.config.device_origin = "--device " + device;
    options.repeat = repeat;
    options.plugins = std::move(plugins);
    options.devices = std::move(devices);
    std::ostringstream out, err;
    Run run;
    lifecycle::Session session(options, out, err);
    run.result = session.run();  // must not throw, whatever the devices do
    run.out = out.str();
    run.err = err.str();
    return run;
}

Run run_with(ScriptedDevice::Script script, std::uint32_t repeat, const std::string& extra_config = "",
             std::vector<std::string> plugins = {}) {
    return run_on(
        [script] {
            device::DeviceInventory inventory;
            inventory.devices.push_back(std::make_unique<ScriptedDevice>(script));
            inventory.devices.push_back(std::make_unique<device::CpuDevice>(1));
            inventory.cuda_status = "no CUDA device: a test's devices";
            return inventory;
        },
        repeat, extra_config, std::move(plugins));
}

// A GPU stand-in: cuda:N that computes as cpu:0 does, or fails its warm-up.
class StandInGpu final : public test_support::StandInDevice {
public:
    StandInGpu(int ordinal, std::string warm_up_failure = "")
        : StandInDevice("cuda:" + std::to_string(ordinal)), warm_up_failure_(std::move(warm_up_failure)) {}
    void warm_up() override {
        if (!warm_up_failure_.empty()) throw std::runtime_error(warm_up_failure_);
    }

private:
    std::string warm_up_failure_;
};

// cuda:0 computing as cpu:0 does, whose memory is out at its `refused`th allocation
// alone, as where a cache let go of memory just after.
class GpuRefusingOneAllocation final : public test_support::StandInDevice {
public:
    explicit GpuRefusingOneAllocation(std::size_t refused) : StandInDevice("cuda:0"), memory_(cpu_memory(), refused) {}
    [[nodiscard]] device::MemoryResource& memory() noexcept override { return memory_; }

private:
    device::MemoryResource& cpu_memory() noexcept { return StandInDevice::memory(); }
    class RefusingOnce final : public device::MemoryResource {
    public:
        RefusingOnce(device::MemoryResource& upstream, std::size_t refused) : upstream_(upstream), refused_(refused) {}
        [[nodiscard]] const std::string& device_name() const noexcept override { return name_; }
        [[nodiscard]] void* allocate(std::size_t bytes, std::size_t& reserved) override {
            return ++allocations_ == refused_ ? nullptr : upstream_.allocate(bytes, reserved);
        }
        [[nodiscard]] std::size_t rounded(std::size_t bytes) const noexcept override { return upstream_.rounded(bytes); }
        void deallocate(void* address, std::size_t bytes, std::size_t reserved) noexcept override {
            upstream_.deallocate(address, bytes, reserved);
        }
        void copy_to_host(void* dst, const void* src, std::size_t bytes) override { upstream_.copy_to_host(dst, src, bytes); }
        void copy_from_host(void* dst, const void* src, std::size_t bytes) override {
            upstream_.copy_from_host(dst, src, bytes);
        }
        [[nodiscard]] device::MemoryStats stats() const noexcept override { return upstream_.stats(); }

    private:
        device::MemoryResource& upstream_;
        std::size_t refused_;
        std::size_t allocations_ = 0;
        std::string name_ = "cuda:0";
    };
    RefusingOnce memory_;
};

const std::string kBusy = "cuda:0 cannot be opened: CUDA-capable device(s) is/are busy or unavailable (scripted)";

// cpu:0, then the GPUs the driver lists: cuda:0 cannot be opened; cuda:1 opens when `second_gpu`.
device::DeviceInventory busy_first_gpu(bool second_gpu) {
    device::DeviceInventory inventory;
    inventory.devices.push_back(std::make_unique<device::CpuDevice>(0));
    inventory.unopened.emplace("cuda:0", kBusy);
    if (second_gpu) {
        inventory.devices.push_back(std::make_unique<StandInGpu>(1));
        inventory.cuda_count = 1;
    } else {
        inventory.cuda_status = "no usable CUDA device: " + kBusy;
    }
    return inventory;
}

}  // namespace

TEST_CASE("a device fault met at a fit's end fails that fit and keeps the verdict", "[lifecycle][devices]") {
    const Run run = run_with({.fault_from_synchronize = 1}, 3);
    // The first fit ended in the fault; no further fit ran on the faulted device.
    REQUIRE(run.result.fits.size() == 1);
    const auto& fit = run.result.fits[0];
    CHECK(fit.failure == "cpu:0: an illegal memory access was encountered (scripted)");
    CHECK(fit.failure_exit == kExitTraining);
    CHECK_THAT(run.err, Contains("error: cpu:0: an illegal memory access was encountered (scripted)\n"));
    CHECK(fit.after_teardown.in_use == 0);
    CHECK(run.result.leaks.empty());
    CHECK(run.result.misuses.empty());
}

TEST_CASE("a device fault after a fit that failed first is still told", "[lifecycle][devices]") {
    const Run run = run_with({.fault_from_synchronize = 1}, 2, "\n[plugins.test_thrower]\nhook = \"epoch_end\"\n",
                             {test_support::test_plugin("test_thrower")});
    REQUIRE(run.result.fits.size() == 1);
    CHECK_THAT(run.result.fits[0].failure, Contains("test_thrower"));
    CHECK_THAT(run.err, Contains("warning: cpu:0: an illegal memory access was encountered (scripted) (nothing will "
                                 "run there again)\n"));
}

TEST_CASE("memory missing from the driver's count after a fit is reported per fit", "[lifecycle][devices]") {
    // Free at each fit's start and end: fit 1 ends 4 MiB short, fit 2 3 MiB, fit 3 within
    // the driver's 2 MiB granularity, fit 4 gives back more than it found.
    const std::uint64_t start = 1024 * kMiB;
    const Run run = run_with({.free_bytes = {start, start - 4 * kMiB, start, start - 3 * kMiB, start,
                                             start - 2 * kMiB, start, start + kMiB}},
                             4);
    REQUIRE(run.result.fits.size() == 4);
    CHECK(run.result.fits[0].unaccounted_bytes.at("cpu:0") == 4 * kMiB);
    CHECK(run.result.fits[1].unaccounted_bytes.at("cpu:0") == 3 * kMiB);
    CHECK(run.result.fits[2].unaccounted_bytes.at("cpu:0") == 0);
    CHECK(run.result.fits[3].unaccounted_bytes.at("cpu:0") == 0);
    // The first fit's may be kernel code loaded on first use, and says so; later fits' is memory.
    CHECK_THAT(run.err, Contains("warning: cpu:0: 4.0 MiB of device memory are in use after fit 1 that nobody in the "
                                 "ledger accounts for (in a run's first fit this may also be kernel code the driver "
                                 "loaded on first use; later fits count memory alone)\n"));
    CHECK_THAT(run.err, Contains("warning: cpu:0: 3.0 MiB of device memory are in use after fit 2 that nobody in the "
                                 "ledger accounts for\n"));
    CHECK(run.err.find("after fit 3") == std::string::npos);
    CHECK(run.err.find("after fit 4") == std::string::npos);
    // The count never changes the verdict.
    for (const auto& fit : run.result.fits) CHECK(fit.failure.empty());
}

TEST_CASE("a GPU that cannot be opened is left out, and naming it says why", "[lifecycle][devices]") {
    SECTION("the only GPU: auto falls back to the CPU") {
        const Run run = run_on([] { return busy_first_gpu(false); });
        CHECK_THAT(run.out, Contains("device: cpu:0 (auto, falling back to the CPU: no usable CUDA device: " + kBusy + ")\n"));
        CHECK_THAT(run.err, Contains("warning: " + kBusy + " (nothing will run on cuda:0)\n"));
        REQUIRE(run.result.fits.size() == 1);
        CHECK(run.result.fits[0].failure.empty());
        CHECK_THROWS_WITH(run_on([] { return busy_first_gpu(false); }, 1, "", {}, "cuda"),
                          "--device cuda: no usable CUDA device: " + kBusy);
    }
    SECTION("another GPU opens: auto takes it, and the one that did not is refused by name") {
        const Run run = run_on([] { return busy_first_gpu(true); });
        CHECK_THAT(run.out, Contains("device: cuda:1 (auto)\n"));
        REQUIRE(run.result.fits.size() == 1);
        CHECK(run.result.fits[0].failure.empty());
        CHECK_THROWS_WITH(run_on([] { return busy_first_gpu(true); }, 1, "", {}, "cuda:0"), "--device cuda:0: " + kBusy);
        CHECK_THROWS_WITH(run_on([] { return busy_first_gpu(true); }, 1, "", {}, "cuda"), "--device cuda: " + kBusy);
    }
}

TEST_CASE("a GPU that fails its warm-up is not used, and auto says why it fell back", "[lifecycle][devices]") {
    const std::string failure = "cuda:0: the CUDA backend failed its first use: scripted";
    const auto devices = [failure] {
        device::DeviceInventory inventory;
        inventory.devices.push_back(std::make_unique<device::CpuDevice>(0));
        inventory.devices.push_back(std::make_unique<StandInGpu>(0, failure));
        inventory.cuda_count = 1;
        return inventory;
    };
    const Run run = run_on(devices);
    CHECK_THAT(run.out, Contains("device: cpu:0 (auto, falling back to the CPU: " + failure + ")\n"));
    CHECK_THAT(run.err, Contains("warning: " + failure + " (nothing will run on cuda:0)\n"));
    CHECK_THROWS_WITH(run_on(devices, 1, "", {}, "cuda"), "--device cuda: " + failure);
    // A plugin's move onto it is refused with the same reason, and fails that plugin's hook.
    const Run moved = run_on(devices, 1, "\n[plugins.togpu]\ntarget = \"cuda:0\"\n", {"togpu"});
    CHECK_THAT(moved.err, Contains("error: plugin 'togpu' failed in to_device: move_model: cuda:0 cannot be used: " +
                                   failure + "\n"));
    REQUIRE(moved.result.fits.size() == 1);
    CHECK(moved.result.fits[0].failure_exit == 4);
}

// The model is on the GPU once its own move is done, even where the plugins' state
// attached to it cannot follow: on_exception then takes buffers and copies parameters
// where the model is (the move used to leave the core pointed at the old device, so
// such a copy was refused, and on a real GPU a backend ran on another device's memory).
TEST_CASE("a move whose plugin state does not fit leaves the core where the model went", "[lifecycle][devices]") {
    const std::string config = "\n[plugins.togpu]\ntarget = \"cuda:0\"\n[plugins.test_stale_state]\nkey = \"param_id\"\n"
                               "attach = true\ncopy_in_exception = true\n";
    bool met = false;
    // The allocation the GPU refuses, moved on until it is an attached lease's.
    for (std::size_t refused = 1; refused < 400 && !met; ++refused) {
        const Run run = run_on(
            [refused] {
                device::DeviceInventory inventory;
                inventory.devices.push_back(std::make_unique<device::CpuDevice>(0));
                inventory.devices.push_back(std::make_unique<GpuRefusingOneAllocation>(refused));
                inventory.cuda_count = 1;
                return inventory;
            },
            1, config, {"togpu", test_support::test_plugin("test_stale_state")}, "cpu");
        if (run.err.find("cannot move lease") == std::string::npos) continue;
        met = true;
        INFO("refused allocation " << refused << "\n" << run.out << run.err);
        CHECK_THAT(run.err, Contains("cuda:0: cannot move lease") && Contains("of test_stale_state"));
        CHECK_THAT(run.err, !Contains("failed in exception"));
        REQUIRE(run.result.fits.size() == 1);
        CHECK(run.result.fits[0].failure_exit == 4);
    }
    CHECK(met);
}
