// Misuses the host API in one chosen way; each must be refused and counted, never crash.
#include <trainhost/sdk.hpp>

#include <stdexcept>
#include <string>
#include <vector>

namespace {

using trainhost::sdk::Context;

class Misuser final : public trainhost::sdk::Callback {
public:
    static constexpr const char* name = "test_misuser";
    static constexpr const char* version = "1";
    static constexpr const char* description = "misuses the host API";
    static constexpr th_option_spec options[] = {
        {"misuse", TH_OPTION_STRING, "\"out_of_phase\"",
         "out_of_phase, size_mismatch, use_after_reclaim, out_of_range, over_budget, null_buffer, promote_growth, "
         "undeclared_write, undeclared_sdk, bad_metric_key, use_after_free, foreign_handle, unknown_handle or "
         "save_mid_batch, reclaimed_wrong_size, state_write_outside, save_without_model, unknown_log_level or "
         "stop_in_exception"},
    };
    Misuser(Context&, const trainhost::sdk::Options& options) : misuse_(options.get_string("misuse")) {}

    void on_setup(Context& ctx) override {
        const auto& api = ctx.link().api();
        if (misuse_ == "out_of_phase") {
            // Stopping before training started is refused; the plugin carries on.
            if (api.request_stop(ctx.link().host(), "too early") != TH_OUT_OF_PHASE)
                throw std::runtime_error("an out-of-phase call was accepted");
        } else if (misuse_ == "size_mismatch") {
            th_handle handle{};
            ctx.link().check(api.acquire(ctx.link().host(), TH_RESOURCE_DEVICE_MEMORY, 256, TH_SCOPE_FIT, "sized", &handle),
                             "acquire");
            if (api.release(ctx.link().host(), handle, 128) != TH_INVALID_ARGUMENT)
                throw std::runtime_error("a release of the wrong size was accepted");
            ctx.link().check(api.release(ctx.link().host(), handle, 256), "release");
        } else if (misuse_ == "out_of_range") {
            auto buffer = ctx.allocate(64, TH_SCOPE_FIT, "small");
            float values[32] = {};
            if (api.copy_from_host(ctx.link().host(), buffer.handle(), 0, values, sizeof values) != TH_INVALID_ARGUMENT)
                throw std::runtime_error("an out-of-range copy was accepted");
        } else if (misuse_ == "null_buffer") {
            auto buffer = ctx.allocate(64, TH_SCOPE_FIT, "small");
            // A plugin bug, refused as an error: never a crash in the host.
            if (api.copy_to_host(ctx.link().host(), buffer.handle(), 0, nullptr, 64) != TH_INVALID_ARGUMENT ||
                api.copy_from_host(ctx.link().host(), buffer.handle(), 0, nullptr, 64) != TH_INVALID_ARGUMENT ||
                api.param_read(ctx.link().host(), 0, nullptr, 4) != TH_INVALID_ARGUMENT ||
                api.param_write(ctx.link().host(), 0, nullptr, 4) != TH_INVALID_ARGUMENT)
                throw std::runtime_error("a null buffer was accepted");
            // With nothing to copy, a null buffer is fine (as memcpy's is not).
            if (api.copy_to_host(ctx.link().host(), buffer.handle(), 0, nullptr, 0) != TH_OK ||
                api.copy_from_host(ctx.link().host(), buffer.handle(), 64, nullptr, 0) != TH_OK)
                throw std::runtime_error("a copy of nothing was refused");
        } else if (misuse_ == "unknown_log_level") {
            // log() returns nothing to refuse with: the message must still reach the user.
            // As a C plugin passes it, an int where the enum has no such value: C++ code
            // cannot hold one in a th_log_level, so the call goes through the same
            // function with the C view of its parameter (an enum is passed as an int).
            static_assert(sizeof(th_log_level) == sizeof(int));
            using CLog = void (*)(th_host*, int, const char*);
            reinterpret_cast<CLog>(api.log)(ctx.link().host(), 7, "logged at level seven");
        } else if (misuse_ == "use_after_free") {
            th_handle handle{};
            ctx.link().check(api.acquire(ctx.link().host(), TH_RESOURCE_DEVICE_MEMORY, 64, TH_SCOPE_FIT, "freed", &handle),
                             "acquire");
            ctx.link().check(api.release(ctx.link().host(), handle, 64), "release");
            float value = 0;
            if (api.copy_to_host(ctx.link().host(), handle, 0, &value, sizeof value) != TH_INVALID_HANDLE)
                throw std::runtime_error("a released handle was usable");
        } else if (misuse_ == "foreign_handle") {
            // A handle it never got: the lease of the core's first parameter, forged from
            // its storage id (the lease id) in the slot such an early lease takes.
            const auto param = ctx.param(0);
            const th_handle forged{param.storage_id, 1, static_cast<std::uint32_t>(param.storage_id)};
            float value = 0;
            if (api.copy_to_host(ctx.link().host(), forged, 0, &value, sizeof value) != TH_INVALID_HANDLE)
                throw std::runtime_error("another owner's handle was usable");
        } else if (misuse_ == "unknown_handle") {
            const th_handle made_up{1000000, 1, 1};
            float value = 0;
            if (api.copy_to_host(ctx.link().host(), made_up, 0, &value, sizeof value) != TH_INVALID_HANDLE)
                throw std::runtime_error("a made-up handle was usable");
        } else if (misuse_ == "over_budget") {
            auto buffer = ctx.allocate(1 << 20, TH_SCOPE_FIT, "big");  // throws: the host refuses it
        } else if (misuse_ == "undeclared_write") {
            // It declares no writes: each change is refused, and the plugin carries on.
            const float value = 1;
            if (api.param_write(ctx.link().host(), 0, &value, 1) != TH_UNDECLARED)
                throw std::runtime_error("an undeclared parameter write was accepted");
        }
    }
    void on_to_device(Context& ctx) override {
        if (misuse_ == "undeclared_write" &&
            ctx.link().api().move_model(ctx.link().host(), "cpu") != TH_UNDECLARED)
            throw std::runtime_error("an undeclared move was accepted");
    }
    void on_fit_start(Context& ctx) override {
        // Through the SDK the refusal throws, and this hook fails as a plugin would that does not catch it.
        if (misuse_ == "undeclared_sdk") ctx.set_metric("test_misuser.sdk", 1);
        if (misuse_ == "bad_metric_key") {
            for (const char* key : {"a*b", "a\x01b", "caf\xe9"}) {
                if (ctx.link().api().metric_set(ctx.link().host(), key, 1) != TH_INVALID_ARGUMENT)
                    throw std::runtime_error("a metric name no declaration can name was accepted");
                ctx.info(std::string("refused: ") + ctx.link().api().last_error(ctx.link().host()));
            }
        }
        if (misuse_ == "undeclared_write" &&
            ctx.link().api().metric_set(ctx.link().host(), "test_misuser.value", 1) != TH_UNDECLARED)
            throw std::runtime_error("an undeclared metric was accepted");
        if (misuse_ == "state_write_outside") {
            if (ctx.link().api().state_write(ctx.link().host(), "x", 1) != TH_OUT_OF_PHASE)
                throw std::runtime_error("state written outside save_state was accepted");
            ctx.info(std::string("refused: ") + ctx.link().api().last_error(ctx.link().host()));
        }
    }
    // Run where the fit failed before its model was built (a later plugin refused to start).
    void on_exception(Context& ctx) override {
        // A stop asked for as the fit fails: out of phase, the status not looked at.
        if (misuse_ == "stop_in_exception") (void)ctx.link().api().request_stop(ctx.link().host(), "too late");
        if (misuse_ != "save_without_model") return;
        if (ctx.link().api().save_checkpoint(ctx.link().host(), "nothing.safetensors", 0) != TH_UNSUPPORTED)
            throw std::runtime_error("a checkpoint without a model was accepted");
        ctx.info(std::string("refused: ") + ctx.link().api().last_error(ctx.link().host()));
    }
    void on_after_optimizer_step(Context& ctx) override {
        if (misuse_ != "save_mid_batch" || ctx.state().global_step != 1) return;
        if (ctx.link().api().save_checkpoint(ctx.link().host(), "mid_batch.safetensors", 0) != TH_OUT_OF_PHASE)
            throw std::runtime_error("a checkpoint inside a batch was written");
        ctx.info(std::string("refused: ") + ctx.link().api().last_error(ctx.link().host()));
    }
    void on_batch_start(Context& ctx) override {
        if (misuse_ == "promote_growth") {
            // A step-scoped lease widened to the fit each step: a pool that only grows.
            auto lease = ctx.allocate(4096, TH_SCOPE_STEP, "promoted");
            lease.promote(TH_SCOPE_FIT);
            kept_.push_back(std::move(lease));
            return;
        }
        if (misuse_ == "reclaimed_wrong_size") {
            // A step-scoped lease kept past its step is reclaimed; its late release must
            // still name its size.
            const auto& api = ctx.link().api();
            if (held_.id == 0) {
                ctx.link().check(
                    api.acquire(ctx.link().host(), TH_RESOURCE_DEVICE_MEMORY, 4096, TH_SCOPE_STEP, "kept", &held_),
                    "acquire");
            } else if (!released_late_) {
                if (api.release(ctx.link().host(), held_, 1) != TH_INVALID_ARGUMENT)
                    throw std::runtime_error("a release of the wrong size was accepted");
                ctx.link().check(api.release(ctx.link().host(), held_, 4096), "release");
                released_late_ = true;
            }
            return;
        }
        if (misuse_ != "use_after_reclaim") return;
        const auto& api = ctx.link().api();
        if (held_.id != 0) {
            // The core reclaimed this step-scoped lease at the last batch_end.
            float value = 0;
            if (api.copy_to_host(ctx.link().host(), held_, 0, &value, sizeof value) != TH_INVALID_HANDLE)
                throw std::runtime_error("a reclaimed handle was usable");
        }
        ctx.link().check(api.acquire(ctx.link().host(), TH_RESOURCE_DEVICE_MEMORY, 64, TH_SCOPE_STEP, "kept", &held_),
                         "acquire");
    }

private:
    std::string misuse_;
    th_handle held_{};
    bool released_late_ = false;
    std::vector<trainhost::sdk::DeviceBuffer> kept_;
};

}  // namespace

TRAINHOST_PLUGIN(Misuser)
