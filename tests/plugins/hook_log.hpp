// A callback that appends "<plugin>:<hook>" to a file for every hook, so tests can
// assert the exact order in which the core calls hooks across plugins.
#pragma once

#include <trainhost/sdk.hpp>

#include <fstream>
#include <string>

namespace test_plugins {

using trainhost::sdk::Context;

class HookLog : public trainhost::sdk::Callback {
public:
    HookLog(std::string plugin, std::string file) : plugin_(std::move(plugin)), file_(std::move(file)) {
        record("create");
    }
    ~HookLog() override { record("destroy"); }

    void on_setup(Context&) override { hook("setup"); }
    void on_to_device(Context&) override { hook("to_device"); }
    void on_fit_start(Context&) override { hook("fit_start"); }
    void on_epoch_start(Context&) override { hook("epoch_start"); }
    void on_batch_start(Context&) override { hook("batch_start"); }
    void on_before_backward(Context&) override { hook("before_backward"); }
    void on_after_backward(Context&) override { hook("after_backward"); }
    void on_before_optimizer_step(Context&) override { hook("before_optimizer_step"); }
    void on_after_optimizer_step(Context&) override { hook("after_optimizer_step"); }
    void on_batch_end(Context&) override { hook("batch_end"); }
    void on_validation_start(Context& ctx) override { validation_hook("validation_start", ctx); }
    void on_val_batch_start(Context& ctx) override { validation_hook("val_batch_start", ctx); }
    void on_val_batch_end(Context& ctx) override { validation_hook("val_batch_end", ctx); }
    void on_validation_end(Context& ctx) override { validation_hook("validation_end", ctx); }
    void on_epoch_end(Context&) override { hook("epoch_end"); }
    void on_fit_end(Context&) override { hook("fit_end"); }
    void on_teardown(Context&) override { hook("teardown"); }
    void on_exception(Context&) override { hook("exception"); }

protected:
    // Subclasses add their behaviour after the hook is recorded.
    virtual void after_hook(const std::string&) {}
    // Appends "<plugin>:<line>" where the hooks go.
    void record(const std::string& line) const {
        if (file_.empty()) return;
        std::ofstream(file_, std::ios::app) << plugin_ << ':' << line << '\n';
    }

private:
    void hook(const std::string& name) {
        record(name);
        after_hook(name);
    }
    // The sanity check's are marked: "validation_start (sanity check)".
    void validation_hook(const std::string& name, Context& ctx) {
        record(ctx.state().sanity_checking != 0 ? name + " (sanity check)" : name);
        after_hook(name);
    }
    std::string plugin_;
    std::string file_;
};

}  // namespace test_plugins
