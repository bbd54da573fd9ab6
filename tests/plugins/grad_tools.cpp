// The gradients and the learning rate of ABI 1.4, used as Lightning's callbacks use
// them: a linear learning-rate warmup, clipping by global norm, the norm logged, and
// a check that the optimizer stepped with exactly the gradients a plugin read, and
// the learning rate read at teardown, also where the fit failed before it had one.
#include <trainhost/sdk.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace {

using trainhost::sdk::Context;

class GradTools final : public trainhost::sdk::Callback {
public:
    static constexpr const char* name = "test_grad_tools";
    static constexpr const char* version = "1";
    static constexpr const char* description = "warms the learning rate up, clips gradients by norm, checks the step";
    static constexpr const char* reads = "params,grads";
    static constexpr const char* writes = "grads,lr,metric:grad_tools.*";
    static constexpr th_option_spec options[] = {
        {"warmup_steps", TH_OPTION_INT, "0", "raise the learning rate linearly over this many steps (0: off)"},
        {"clip_norm", TH_OPTION_FLOAT, "nan", "scale the gradients down to this global norm (nan: off)"},
        {"set_lr", TH_OPTION_FLOAT, "nan", "set this learning rate in on_setup (nan: off)"},
        {"check_step", TH_OPTION_BOOL, "false",
         "compare each plain SGD step with param - lr * grad, as metric grad_tools.step_error, and set the norm and "
         "largest element of the gradient it applied (grad_tools.applied_norm, grad_tools.applied_max)"},
    };

    GradTools(Context&, const trainhost::sdk::Options& options)
        : warmup_steps_(options.get_int("warmup_steps")), clip_norm_(options.get_float("clip_norm")),
          set_lr_(options.get_float("set_lr")), check_step_(options.get_bool("check_step")) {}

    void on_setup(Context& ctx) override {
        if (!std::isnan(set_lr_)) ctx.set_learning_rate(set_lr_);
        base_lr_ = ctx.learning_rate();
    }

    void on_batch_start(Context& ctx) override {
        if (warmup_steps_ <= 0) return;
        const double done = static_cast<double>(ctx.state().global_step + 1);
        ctx.set_learning_rate(base_lr_ * std::min(1.0, done / static_cast<double>(warmup_steps_)));
    }

    void on_after_backward(Context& ctx) override {
        const double norm = global_norm(ctx);
        ctx.set_metric("grad_tools.norm", norm);
        if (std::isnan(clip_norm_) || norm <= clip_norm_) return;
        for (std::uint32_t i = 0; i < ctx.param_count(); ++i)
            ctx.scale_grad(i, static_cast<float>(clip_norm_ / norm));
        ctx.set_metric("grad_tools.clipped_norm", global_norm(ctx));
    }

    void on_before_optimizer_step(Context& ctx) override {
        if (!check_step_) return;
        before_.clear();
        grads_.clear();
        for (std::uint32_t i = 0; i < ctx.param_count(); ++i) {
            before_.push_back(ctx.read_param(i));
            grads_.push_back(ctx.read_grad(i));
        }
    }

    void on_after_optimizer_step(Context& ctx) override {
        if (!check_step_) return;
        const double lr = ctx.learning_rate();
        double worst = 0;
        double squares = 0;  // of the gradient the step applied, (before - after) / lr, as clipping left it
        double largest = 0;
        for (std::uint32_t i = 0; i < ctx.param_count(); ++i) {
            const std::vector<float> after = ctx.read_param(i);
            for (std::size_t j = 0; j < after.size(); ++j) {
                const double expected = before_[i][j] - lr * grads_[i][j];
                worst = std::max(worst, std::fabs(after[j] - expected) / std::max(1e-3, std::fabs(expected)));
                const double applied = (static_cast<double>(before_[i][j]) - after[j]) / lr;
                squares += applied * applied;
                largest = std::max(largest, std::fabs(applied));
            }
        }
        step_error_ = std::max(step_error_, worst);
        ctx.set_metric("grad_tools.step_error", step_error_);
        ctx.set_metric("grad_tools.applied_norm", std::sqrt(squares));
        ctx.set_metric("grad_tools.applied_max", largest);
    }

    void on_epoch_end(Context& ctx) override { ctx.set_metric("grad_tools.lr", ctx.learning_rate()); }

    // Also after a fit that failed before its optimizer was built: refused, not a crash.
    void on_teardown(Context& ctx) override {
        try {
            ctx.info("grad_tools: learning rate at teardown " + std::to_string(ctx.learning_rate()));
        } catch (const trainhost::sdk::Error& e) {
            ctx.info(std::string("grad_tools: ") + e.what());
        }
    }

private:
    static double global_norm(const Context& ctx) {
        double squares = 0;
        for (std::uint32_t i = 0; i < ctx.param_count(); ++i)
            for (const float g : ctx.read_grad(i)) squares += static_cast<double>(g) * g;
        return std::sqrt(squares);
    }

    std::int64_t warmup_steps_;
    double clip_norm_;
    double set_lr_;
    bool check_step_;
    double base_lr_ = 0;
    double step_error_ = 0;
    std::vector<std::vector<float>> before_, grads_;
};

}  // namespace

TRAINHOST_PLUGIN(GradTools)
