// The batch's outputs and labels of ABI 1.5, used as a confusion-matrix or
// prediction-writer callback uses them: accuracy counted from the outputs' argmax
// must be the core's own train_accuracy and val_accuracy, and a batch without labels
// or a call out of phase is refused.
#include <trainhost/sdk.hpp>

#include <algorithm>
#include <cstdint>
#include <string>

namespace {

using trainhost::sdk::Context;

class BatchOutputs final : public trainhost::sdk::Callback {
public:
    static constexpr const char* name = "test_batch_outputs";
    static constexpr const char* version = "1";
    static constexpr const char* description = "counts accuracy from the batch's outputs and labels";
    static constexpr const char* reads = "metrics";
    static constexpr const char* writes = "metric:outputs.*";
    static constexpr th_option_spec options[] = {
        {"read_in", TH_OPTION_STRING, "\"\"", "also read the outputs in this hook, where they are refused"},
        {"skip_every", TH_OPTION_INT, "0", "skip every n-th training batch in batch_start (0: none)"},
        {"skip_first", TH_OPTION_INT, "0", "skip the fit's first n training batches in batch_start"},
    };
    BatchOutputs(Context&, const trainhost::sdk::Options& options)
        : read_in_(options.get_string("read_in")), skip_every_(options.get_int("skip_every")),
          skip_first_(options.get_int("skip_first")) {}

    void on_epoch_start(Context&) override { train_ = val_ = Count{}; }
    void on_batch_start(Context& ctx) override {
        if (read_in_ == "batch_start") (void)ctx.read_outputs();
        ++batches_;
        if ((skip_every_ > 0 && batches_ % static_cast<std::uint64_t>(skip_every_) == 0) ||
            batches_ <= static_cast<std::uint64_t>(skip_first_))
            ctx.skip_batch();
    }
    void on_batch_end(Context& ctx) override { count(ctx, train_); }
    void on_val_batch_end(Context& ctx) override { count(ctx, val_); }
    void on_epoch_end(Context& ctx) override {
        if (train_.seen > 0) ctx.set_metric("outputs.train_accuracy", train_.accuracy());
        if (val_.seen > 0) ctx.set_metric("outputs.val_accuracy", val_.accuracy());
        ctx.set_metric("outputs.width", static_cast<double>(width_));
        ctx.set_metric("outputs.unlabelled_batches", static_cast<double>(unlabelled_));
        ctx.set_metric("outputs.batches_without_outputs", static_cast<double>(without_outputs_));
    }

private:
    struct Count {
        std::uint64_t correct = 0;
        std::uint64_t seen = 0;
        [[nodiscard]] double accuracy() const { return static_cast<double>(correct) / static_cast<double>(seen); }
    };

    void count(Context& ctx, Count& into) {
        Context::BatchOutputs batch;
        try {
            batch = ctx.read_outputs();
        } catch (const trainhost::sdk::Error& e) {  // a skipped batch has none
            if (e.status() != TH_UNSUPPORTED) throw;
            ++without_outputs_;
            return;
        }
        width_ = batch.width;
        std::vector<std::int32_t> labels;
        try {
            labels = ctx.read_labels();
        } catch (const trainhost::sdk::Error& e) {
            if (e.status() != TH_UNSUPPORTED) throw;
            ++unlabelled_;
            return;
        }
        for (std::uint64_t r = 0; r < batch.rows; ++r) {
            const auto row = batch.values.begin() + static_cast<std::ptrdiff_t>(r * batch.width);
            const auto predicted = std::max_element(row, row + static_cast<std::ptrdiff_t>(batch.width)) - row;
            into.correct += predicted == labels[r];
        }
        into.seen += batch.rows;
    }

    std::string read_in_;
    std::int64_t skip_every_;
    std::int64_t skip_first_;
    std::uint64_t batches_ = 0;
    std::uint64_t without_outputs_ = 0;
    Count train_;
    Count val_;
    std::uint64_t width_ = 0;
    std::uint64_t unlabelled_ = 0;
};

}  // namespace

TRAINHOST_PLUGIN(BatchOutputs)
