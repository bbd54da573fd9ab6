// Predict mode: forward passes over a split, with the validation batch hooks around
// each, and the first cycle's outputs written to [predict] output.
#include "lifecycle/session.hpp"
#include "lifecycle/fit_state.hpp"

#include "errors.hpp"
#include "report/output_file.hpp"
#include "report/predictions.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <fmt/ostream.h>
#include <optional>
#include <vector>

namespace trainhost::lifecycle {

// Forward passes only, cycling over the split's batches; each pass is a step, with
// the validation batch hooks around it. Memory must be flat after the first pass.
// The first cycle's outputs go to [predict] output.
void Session::predict_fit(FitRecord& record) {
    const config::RunConfig& config = options_.config;
    const data::Dataset& split = predict_data();
    build_fit();
    FitState& fit = *fit_;
    restore_weights();
    dispatch(TH_HOOK_SETUP);
    ledger_->begin_fit_growth_window(resources::Ledger::StepHooks::predict_pass);
    dispatch(TH_HOOK_TO_DEVICE);
    apply_pending_move();
    check_interrupt();  // Ctrl-C in setup or to_device: before the first pass
    data::Batcher batcher(split, fit.model->max_rows(), false, config.seed);
    const std::uint64_t passes = config.predict_passes != 0     ? config.predict_passes
                                 : config.predict_output.empty() ? 1
                                                                 : batcher.batches();
    std::optional<report::PredictionTable> predictions;
    if (!config.predict_output.empty()) predictions.emplace(fit.loss, fit.model->output_width(), split.classes > 0);
    if (predictions && passes < batcher.batches())
        err_ << fmt::format("warning: {}: [predict] passes = {} covers {} of the {} batches of split \"{}\"; output "
                            "gets the predictions of those (leave passes out for one pass over the split)\n",
                            config.file.string(), passes, passes, batcher.batches(), config.predict_split);
    std::vector<float> outputs;
    state_.batches_in_epoch = passes;
    dispatch(TH_HOOK_VALIDATION_START);
    for (std::uint64_t pass = 0; pass < passes; ++pass) {
        state_.batch_index = pass;
        fit_step_ = fit_window_ = pass;
        const std::size_t batch = pass % batcher.batches();
        const std::size_t rows = gather_batch(batcher, batch);
        state_.batch_samples = rows;
        forward_rows_ = 0;
        dispatch(TH_HOOK_VAL_BATCH_START);
        upload_batch(rows);
        fit.model->forward(rows, false);
        forward_rows_ = rows;
        if (predictions && pass < batcher.batches()) {
            outputs.resize(rows * fit.model->output_width());
            model_device_ref().memory().copy_to_host(outputs.data(), fit.model->output(), outputs.size() * sizeof(float));
            const auto labels = fit.host.labels.span<std::int32_t>();
            predictions->add(batcher.batch_indices(batch), labels.first(std::min(labels.size(), rows)), outputs);
        }
        dispatch(TH_HOOK_VAL_BATCH_END);
        check_scope(TH_SCOPE_STEP, "val_batch_end");
        check_growth(ledger_->grown_in_step("val_batch_end"), "val_batch_end");
        record.predict_passes = pass + 1;
        // After each pass, so that a fit that fails or is interrupted later reports the last one it completed.
        record.predict_last = memory_snapshot();
        if (pass == 0) record.predict_first = record.predict_last;
        ++passes_completed_;
        try {
            check_interrupt();
        } catch (const FitFailure&) {
            if (predictions) keep_interrupted_predictions(*predictions, split.count, record);
            throw;
        }
    }
    dispatch(TH_HOOK_VALIDATION_END);
    if (predictions) write_predictions(*predictions, record);
}

// As Lightning's prediction writer does per batch: an interrupted run keeps what it
// predicted. The interrupt stays what ended the fit, even where the output cannot be written.
void Session::keep_interrupted_predictions(const report::PredictionTable& predictions, std::size_t split_rows,
                                           FitRecord& record) {
    if (predictions.rows() == 0) return;
    try {
        write_predictions(predictions, record);
    } catch (const FitFailure& lost) {
        err_ << "warning: " << lost.what() << '\n';
        return;
    }
    if (predictions.rows() < split_rows)
        err_ << fmt::format("warning: [predict] output {} holds the {} of the split's {} predictions made before the "
                            "interrupt\n",
                            options_.config.predict_output.string(), predictions.rows(), split_rows);
}

void Session::write_predictions(const report::PredictionTable& predictions, FitRecord& record) {
    try {
        out_ << std::flush;  // the run's lines before the table, where both go to one pipe (/dev/stdout)
        predictions_written_ =
            report::write_output_file(options_.config.predict_output, predictions.csv(), predictions_written_);
    } catch (const std::exception& e) {
        throw FitFailure(fmt::format("[predict] output: {}", e.what()), kExitTraining);
    }
    record.predictions = predictions.rows();
}

}  // namespace trainhost::lifecycle
