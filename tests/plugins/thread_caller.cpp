// Calls the host API from a thread of its own, as a plugin with a background worker
// (a prefetcher, a watchdog) might. The host serves only the thread that runs the
// hooks: every such call must be refused without touching the ledger, and reported
// as a wrong_thread misuse at the plugin's next boundary, never corrupt the host.
// joined: three calls from a thread started and joined inside setup. concurrent: a
// thread that acquires and releases for the whole fit while the hooks do the same.
// detached (with --repeat 2): the first fit's instance leaves a thread behind, never
// joined, that makes three calls once the second fit's instance exists; that instance
// waits for them in its teardown.
#include <trainhost/sdk.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <dlfcn.h>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using trainhost::sdk::Context;

class ThreadCaller final : public trainhost::sdk::Callback {
public:
    static constexpr const char* name = "test_thread_caller";
    static constexpr const char* version = "1";
    static constexpr const char* description = "calls the host API from a thread other than the hooks'";
    static constexpr th_option_spec options[] = {
        {"mode", TH_OPTION_STRING, "\"joined\"", "joined, concurrent or detached (see the file's comment)"},
    };
    ThreadCaller(Context&, const trainhost::sdk::Options& options)
        : mode_(options.get_string("mode")), number_(instances_made.fetch_add(1) + 1) {
        if (mode_ != "joined" && mode_ != "concurrent" && mode_ != "detached")
            throw trainhost::sdk::OptionError("mode must be joined, concurrent or detached, not '" + mode_ + "'");
    }
    ~ThreadCaller() override {
        stop_worker();
        if (mode_ == "detached" && number_ == 1 && link_) leave_a_thread_behind(*link_);
    }

    void on_setup(Context& ctx) override {
        const trainhost::sdk::HostLink link = ctx.link();
        if (mode_ == "detached") {
            link_ = link;
            return;
        }
        if (mode_ == "concurrent") {
            worker_ = std::thread([this, link] {
                while (!stopping_.load()) {
                    th_handle handle{};
                    if (link.api().acquire(link.host(), TH_RESOURCE_DEVICE_MEMORY, 64, TH_SCOPE_FIT, "worker", &handle) ==
                        TH_OK)
                        served_.store(true);
                    link.api().release(link.host(), handle, 64);
                    calls_.fetch_add(1);
                }
            });
            return;
        }
        th_status acquired = TH_OK;
        std::string refusal;
        std::thread worker([&] {
            th_handle handle{};
            acquired = link.api().acquire(link.host(), TH_RESOURCE_DEVICE_MEMORY, 64, TH_SCOPE_FIT, "worker", &handle);
            Context(link, nullptr).info("from the worker");
            try {
                double value = 0;
                link.check(link.api().metric_get(link.host(), "train_loss", &value), "metric_get");
            } catch (const trainhost::sdk::Error& e) {
                refusal = e.what();
            }
        });
        worker.join();
        if (acquired != TH_OUT_OF_PHASE) throw std::runtime_error("a call from another thread was not refused");
        if (refusal.find("serves only the thread that runs the plugin's hooks") == std::string::npos)
            throw std::runtime_error("the refusal did not say why: " + refusal);
    }

    void on_batch_start(Context& ctx) override {
        const auto calls_before = calls_.load();
        std::vector<trainhost::sdk::DeviceBuffer> buffers;
        for (int i = 0; i < 100; ++i) buffers.push_back(ctx.allocate(128, TH_SCOPE_STEP, "main"));
        // On a loaded machine the worker may not be scheduled before the fit ends: wait
        // for one of its calls inside every hook, so that the overlap is certain.
        if (mode_ == "concurrent") wait_for_worker_call_after(calls_before);
    }

    void on_teardown(Context&) override {
        if (mode_ == "detached" && number_ == 2)
            wait_up_to_30_s([] { return late_calls_made.load(); }, "the thread the first instance left made no call");
        stop_worker();
        if (served_.load()) throw std::runtime_error("the worker's acquire was served");
    }

private:
    void wait_for_worker_call_after(std::uint64_t calls_before) const {
        wait_up_to_30_s([&] { return calls_.load() != calls_before; }, "the worker made no host call");
    }

    // Throws "<failure> for 30 s" when `done` has not turned true by then.
    template <class Done>
    static void wait_up_to_30_s(Done done, const char* failure) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (!done()) {
            if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error(std::string(failure) + " for 30 s");
            std::this_thread::yield();
        }
    }

    // As a worker its plugin forgot to join: it calls the ended instance's host. The
    // library stays mapped for the thread's code after the host unloads it.
    static void leave_a_thread_behind(trainhost::sdk::HostLink link) {
        Dl_info self{};
        if (::dladdr(reinterpret_cast<void*>(&leave_a_thread_behind), &self) == 0 || self.dli_fname == nullptr ||
            ::dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE) == nullptr)
            return;  // the next instance's teardown says no call came
        std::thread([link] {
            const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
            while (instances_made.load() < 2 && std::chrono::steady_clock::now() < deadline)
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
            for (int i = 0; i < 3; ++i) {
                th_handle handle{};
                (void)link.api().acquire(link.host(), TH_RESOURCE_DEVICE_MEMORY, 64, TH_SCOPE_FIT, "left behind", &handle);
            }
            late_calls_made.store(true);
        }).detach();
    }

    void stop_worker() noexcept {
        stopping_.store(true);
        if (worker_.joinable()) worker_.join();
    }

    static inline std::atomic<int> instances_made{0};
    static inline std::atomic<bool> late_calls_made{false};

    std::string mode_;
    int number_;
    std::optional<trainhost::sdk::HostLink> link_;
    std::thread worker_;
    std::atomic<bool> stopping_{false};
    std::atomic<bool> served_{false};
    std::atomic<std::uint64_t> calls_{0};
};

}  // namespace

TRAINHOST_PLUGIN(ThreadCaller)
