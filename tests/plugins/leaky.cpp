// Takes device memory and never gives it back: the ledger must name it.
#include <trainhost/sdk.hpp>

#include <stdexcept>

namespace {

class Leaky final : public trainhost::sdk::Callback {
public:
    static constexpr const char* name = "test_leaky";
    static constexpr const char* version = "1";
    static constexpr const char* description = "acquires memory in a hook and forgets it";
    static constexpr th_option_spec options[] = {
        {"bytes", TH_OPTION_INT, "4096", "size of the forgotten allocation"},
        {"scope", TH_OPTION_STRING, "\"fit\"", "step, epoch or fit"},
        {"hook", TH_OPTION_STRING, "\"setup\"", "setup or batch_start: where to acquire"},
        {"double_free", TH_OPTION_BOOL, "false", "instead of leaking, release the same handle twice"},
        {"raii", TH_OPTION_BOOL, "false",
         "hold the allocation in an SDK DeviceBuffer until destroy, past its scope's end, instead of forgetting it"},
        {"teardown_only_on_success", TH_OPTION_BOOL, "false",
         "hold a fit-scoped buffer from fit_start, given back in on_teardown unless on_exception ran (then by the "
         "destructor, after the fit's scope check)"},
        // This doc ends with that byte too, for `inspect --json`.
        {"invalid_utf8_tag", TH_OPTION_BOOL, "false", "end the lease's tag with byte 0xFF, which is not UTF-8: \xFF"},
    };
    Leaky(trainhost::sdk::Context&, const trainhost::sdk::Options& options)
        : bytes_(static_cast<std::uint64_t>(options.get_int("bytes"))), hook_(options.get_string("hook")),
          double_free_(options.get_bool("double_free")), raii_(options.get_bool("raii")),
          teardown_only_on_success_(options.get_bool("teardown_only_on_success")),
          tag_(options.get_bool("invalid_utf8_tag") ? "forgotten\xFF" : "forgotten") {
        const std::string scope = options.get_string("scope");
        scope_ = scope == "step" ? TH_SCOPE_STEP : scope == "epoch" ? TH_SCOPE_EPOCH : TH_SCOPE_FIT;
    }

    void on_setup(trainhost::sdk::Context& ctx) override {
        failed_ = false;
        if (hook_ == "setup" && !teardown_only_on_success_) take(ctx);
    }
    // After the model's move, so that it does not stay behind on the old device.
    void on_fit_start(trainhost::sdk::Context& ctx) override {
        if (teardown_only_on_success_) kept_ = ctx.allocate(bytes_, TH_SCOPE_FIT, "kept_past_a_failure");
    }
    void on_exception(trainhost::sdk::Context&) override { failed_ = true; }
    void on_teardown(trainhost::sdk::Context&) override {
        if (!failed_) kept_.reset();
    }
    void on_batch_start(trainhost::sdk::Context& ctx) override {
        if (hook_ == "batch_start" && !taken_) take(ctx);
    }

private:
    void take(trainhost::sdk::Context& ctx) {
        taken_ = true;
        if (raii_) {
            held_ = ctx.allocate(bytes_, scope_, tag_);
            return;
        }
        const auto& api = ctx.link().api();
        // The raw C API, as a plugin that forgets RAII would use it.
        th_handle handle{};
        ctx.link().check(
            api.acquire(ctx.link().host(), TH_RESOURCE_DEVICE_MEMORY, bytes_, scope_, tag_.c_str(), &handle), "acquire");
        if (double_free_) {
            ctx.link().check(api.release(ctx.link().host(), handle, bytes_), "release");
            // The second release must be refused and counted, not crash.
            if (api.release(ctx.link().host(), handle, bytes_) != TH_INVALID_HANDLE)
                throw std::runtime_error("a double free was accepted");
        }
    }

    std::uint64_t bytes_;
    std::string hook_;
    bool double_free_;
    bool raii_;
    bool teardown_only_on_success_;
    bool failed_ = false;
    trainhost::sdk::DeviceBuffer kept_;  // teardown_only_on_success's
    std::string tag_;
    trainhost::sdk::DeviceBuffer held_;  // released when the plugin is destroyed
    th_scope scope_ = TH_SCOPE_FIT;
    bool taken_ = false;
};

}  // namespace

TRAINHOST_PLUGIN(Leaky)
