#include "lifecycle/session.hpp"
#include "lifecycle/fit_state.hpp"

#include "config/table_reader.hpp"
#include "device/device_registry.hpp"
#include "errors.hpp"
#include "kernels/cpu/threads.hpp"
#include "lifecycle/interrupt.hpp"
#include "lifecycle/verdict.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cmath>
#include <fmt/format.h>
#include <fmt/ostream.h>
#include <iostream>
#include <set>

namespace trainhost::lifecycle {

using resources::Phase;

namespace {
constexpr unsigned kLogicalCpuDevices = 4;

}  // namespace



Session::Session(SessionOptions options, std::ostream& out, std::ostream& err)
    : options_(std::move(options)), out_(out), err_(err) {
    const config::RunConfig& config = options_.config;
    // Epochs of no step would follow one another until the millionth.
    if (config.mode == "train" && config.max_steps > 0 && !config.epochs_given && config.data.limit_train_batches == 0)
        throw ConfigError(fmt::format("{}: max_steps = {} without epochs would never end: [data] limit_train_batches = 0 "
                                      "trains no batch (set epochs)",
                                      config.file.string(), config.max_steps));
    device::DeviceInventory inventory =
        options_.devices ? options_.devices() : device::make_devices(kLogicalCpuDevices);
    devices_ = std::move(inventory.devices);
    unopened_ = std::move(inventory.unopened);
    if (config.device.starts_with("cuda") && inventory.cuda_count == 0)
        throw ConfigError(fmt::format("{}: {}", config.device_origin, inventory.cuda_status));
    std::vector<device::Device*> raw;
    for (auto& dev : devices_) raw.push_back(dev.get());
    ledger_ = std::make_unique<resources::Ledger>(std::move(raw));
    // From here a failure must give the devices' handles back before the ledger goes.
    try {
        // A GPU that fails its first use (its handles, or a warm-up that runs every
        // operation once) stops the run only if the run asked for it; otherwise nothing
        // is computed or moved there.
        for (device::DeviceIndex i = 0; i < devices_.size(); ++i) {
            try {
                if (devices_[i]->wants_core_objects()) {
                    // The core's own stream and library handles are leases like any plugin's.
                    auto object = [&](th_resource_kind kind, const char* tag) {
                        const th_handle handle =
                            ledger_->acquire(resources::kCoreOwner, kind, 0, TH_SCOPE_SESSION, tag, i);
                        core_objects_.push_back(handle);
                        return ledger_->object(resources::kCoreOwner, handle, kind);
                    };
                    // The stream first: the library handles that run on it are given back before it.
                    void* stream = object(TH_RESOURCE_STREAM, "core.stream");
                    void* blas = object(TH_RESOURCE_BLAS_HANDLE, "core.cublas");
                    void* dnn = object(TH_RESOURCE_DNN_HANDLE, "core.cudnn");
                    devices_[i]->adopt_core_objects(stream, blas, dnn);
                }
                devices_[i]->warm_up();
            } catch (const std::exception& e) {
                unusable_[i] = e.what();
            }
        }
        const std::optional<device::DeviceIndex> gpu = usable_gpu();
        if (config.device == "auto")
            out_ << fmt::format("device: {} (auto{})\n", devices_[gpu.value_or(0)]->name(),
                                gpu ? "" : ", falling back to the CPU: " + why_no_gpu(inventory.cuda_status));
        const char* stacks = std::getenv("TRAINHOST_LEASE_STACKS");
        ledger_->set_capture_stacks(config.allocation_stacks || (stacks && std::string_view(stacks) == "1"));
        try {
            home_device_ = config.device == "auto" ? gpu.value_or(device_index("cpu:0")) : device_index(config.device);
        } catch (const resources::ResourceError& e) {
            throw ConfigError(fmt::format("{}: {}", config.device_origin, e.what()));
        }
        for (const auto& [index, why] : unusable_) {
            if (index == home_device_) throw ConfigError(fmt::format("{}: {}", config.device_origin, why));
            err_ << fmt::format("warning: {} (nothing will run on {})\n", why, devices_[index]->name());
        }
        for (const auto& [name, why] : unopened_) err_ << fmt::format("warning: {} (nothing will run on {})\n", why, name);
        model_device_ = home_device_;
        if (config.threads > 0) {
            kernels::cpu::set_threads(config.threads);
            // OpenBLAS caps its pool at the count it was built for (NUM_THREADS) without a word.
            if (const int blas = kernels::cpu::blas_threads(); blas < config.threads)
                err_ << fmt::format("warning: {}: threads = {}: OpenBLAS runs {}, the most it was built for "
                                    "(OpenMP runs {})\n",
                                    config.file.string(), config.threads, blas, kernels::cpu::openmp_threads());
        }
        if (options_.verbose) {
            const char* policy = std::getenv("OMP_WAIT_POLICY");
            out_ << fmt::format("cpu threads: {} for OpenBLAS, {} for OpenMP (oneDNN, batch gather), OMP_WAIT_POLICY={}\n",
                                kernels::cpu::blas_threads(), kernels::cpu::openmp_threads(),
                                policy ? policy : "(unset)");
        }
        state_.struct_size = sizeof state_;
        state_.seed = config.seed;
        state_.max_epochs = config.epochs;
        state_.batch_size = config.data.batch_size;
        state_.accumulate_grad_batches = config.mode == "predict" ? 1 : config.optimizer.accumulate_grad_batches;
        state_.max_steps = config.mode == "predict" ? 0 : config.max_steps;
        state_.check_val_every_n_epoch = config.mode == "predict" ? 1 : config.check_val_every_n_epoch;
        state_.fast_dev_run = static_cast<std::uint64_t>(config.fast_dev_run);
        state_.device = devices_[model_device_]->name().c_str();
        try {
            load_data();
        } catch (const std::bad_alloc&) {  // the samples themselves, their split or the test files
            throw data::DataError(fmt::format("out of host memory while loading and splitting the data of [data] "
                                              "dataset {} (a smaller samples or limit needs less)",
                                              config.data.dataset));
        }
        check_model_fits_data();
        load_plugins();
        load_start_checkpoint();
    } catch (...) {
        release_core_objects();
        throw;
    }
}

Session::~Session() {
    // Instances go before their libraries (destroy always runs first).
    instances_.clear();
    fit_.reset();
    release_core_objects();
}

// The devices stop using their handles before the core gives them back.
void Session::release_core_objects() noexcept {
    if (core_objects_.empty()) return;
    for (auto& dev : devices_) {
        if (!dev->wants_core_objects()) continue;
        try {
            dev->synchronize();
        } catch (...) {
        }
        dev->adopt_core_objects(nullptr, nullptr, nullptr);
    }
    for (auto handle = core_objects_.rbegin(); handle != core_objects_.rend(); ++handle) {
        try {
            ledger_->release(resources::kCoreOwner, *handle, 0);
        } catch (...) {
        }
    }
    core_objects_.clear();
}

void Session::enter(Phase phase) {
    state_.phase = phase <= Phase::exception ? static_cast<th_hook>(phase) : state_.phase;
    ledger_->set_position(phase, {state_.fit_index, state_.epoch, fit_step_, fit_window_});
}

th_control Session::dispatch(th_hook hook) {
    hook_first_lease_ = ledger_->next_lease_id();
    enter(static_cast<Phase>(hook));
    th_control control = TH_CONTINUE;
    for (auto& instance : instances_) {
        if (!instance->overrides(hook)) continue;
        plugin::HookOutcome outcome = instance->call(hook);
        if (outcome.failed())
            throw FitFailure(fmt::format("plugin '{}' failed in {}: {}", instance->name(), resources::hook_name(hook),
                                         outcome.message),
                             kExitTraining);
        if (outcome.control == TH_STOP_FIT) stop_by_control(instance->owner(), hook, outcome.message);
        if (outcome.control == TH_SKIP_BATCH) control = TH_SKIP_BATCH;
    }
    enter(Phase::core);
    return control;
}

// TH_STOP_FIT is request_stop, and holds to its phase window.
void Session::stop_by_control(resources::OwnerId owner, th_hook hook, std::string_view reason) {
    if (hook >= TH_HOOK_FIT_START && hook <= TH_HOOK_EPOCH_END) {
        request_stop(owner, reason);
        return;
    }
    ledger_->record_misuse(owner, resources::MisuseKind::out_of_phase, 0,
                           fmt::format("TH_STOP_FIT is not allowed in phase {} (allowed from fit_start to epoch_end, "
                                       "as request_stop)",
                                       resources::hook_name(hook)));
}

// For on_exception and teardown: every plugin runs, whatever the others did.
// Returns the first failure, if any, so the fit can still be marked failed.
std::string Session::dispatch_unchecked(th_hook hook) {
    enter(static_cast<Phase>(hook));
    std::string first_failure;
    for (auto& instance : instances_) {
        if (!instance->overrides(hook)) continue;
        plugin::HookOutcome outcome = instance->call(hook);
        if (outcome.control == TH_STOP_FIT) stop_by_control(instance->owner(), hook, outcome.message);
        if (!outcome.failed()) continue;
        std::string failure =
            fmt::format("plugin '{}' failed in {}: {}", instance->name(), resources::hook_name(hook), outcome.message);
        err_ << "error: " << failure << '\n';
        if (first_failure.empty()) first_failure = std::move(failure);
    }
    enter(Phase::core);
    return first_failure;
}

void Session::record_leaks(std::vector<resources::Leak> leaks) {
    for (auto& leak : leaks) {
        const std::size_t seen = ++leak_lines_[{leak.owner, leak.rule, leak.lease.tag}];
        if (options_.config.on_violation != resources::ViolationPolicy::ignore && seen <= kViolationLinesPerKind) {
            err_ << resources::format_leak(leak) << '\n';
            if (leak.lease.stack) err_ << "  acquired at:\n" << resources::format_stack(*leak.lease.stack);
        }
        leaks_.push_back(std::move(leak));
    }
}

// Memory held past a step (or past an epoch, taken outside the steps) may be set up
// once, lazily, when first needed; more of it in a later step (epoch) is a pool that
// only grows (Ledger::begin_fit_growth_window).
void Session::check_growth(std::vector<resources::Leak> grown, std::string_view boundary) {
    if (grown.empty() || options_.config.on_violation == resources::ViolationPolicy::ignore) return;
    std::string first = resources::format_leak(grown.front());
    record_leaks(std::move(grown));
    if (options_.config.on_violation == resources::ViolationPolicy::fail)
        throw FitFailure(fmt::format("resource contract violated at {}: {}", boundary, first), kExitResourceContract);
}

void Session::check_scope(th_scope scope, std::string_view boundary) {
    if (options_.config.on_violation == resources::ViolationPolicy::ignore) return;
    auto leaks = ledger_->end_scope(scope, boundary, options_.config.on_violation);
    if (leaks.empty()) return;
    std::string first = resources::format_leak(leaks.front());
    record_leaks(std::move(leaks));
    if (options_.config.on_violation == resources::ViolationPolicy::fail)
        throw FitFailure(fmt::format("resource contract violated at {}: {}", boundary, first), kExitResourceContract);
}

// Checked as a fit starts, after to_device (a resume's checkpoint restored) and after
// fit_start (in predict mode after to_device), after the sanity check, after
// epoch_start, after a training step, after an epoch's end and after a predict pass,
// never inside one: what
// on_exception sees, and a checkpoint saved there, is a state a resume continues
// from exactly (an epoch's validation and epoch_end are never cut short).
void Session::check_interrupt() {
    const int signal_number = pending_interrupt();
    if (signal_number == 0) return;
    interrupt_signal_ = signal_number;
    if (options_.config.mode == "predict")
        throw FitFailure(fmt::format("interrupted by {} in fit {}, after {} predict pass{}", interrupt_name(signal_number),
                                     state_.fit_index + 1, passes_completed_, passes_completed_ == 1 ? "" : "es"),
                         kExitInterrupted);
    throw FitFailure(fmt::format("interrupted by {} in fit {}, epoch {}, after {} training batch{} of this fit",
                                 interrupt_name(signal_number), state_.fit_index + 1, state_.epoch + 1, batches_completed_,
                                 batches_completed_ == 1 ? "" : "es"),
                     kExitInterrupted);
}

SessionResult Session::run() {
    SessionResult result;
    result.policy = options_.config.on_violation;
    for (std::uint32_t fit = 0; fit < options_.repeat; ++fit) {
        FitRecord record;
        record.index = fit;
        run_fit(fit, record);
        const bool failed = !record.failure.empty();
        result.fits.push_back(std::move(record));
        if (failed) break;
    }
    enter(Phase::core);
    release_core_objects();
    record_leaks(ledger_->end_scope(TH_SCOPE_SESSION, "session_end", options_.config.on_violation));
    for (th_host* host : ended_hosts_) plugin::record_foreign_thread_calls(*ledger_, *host, true);
    result.leaks = leaks_;
    result.misuses = ledger_->misuses();
    if (options_.config.on_violation != resources::ViolationPolicy::ignore) {
        print_hidden_leaks();
        print_misuses(result.misuses);
    }
    for (resources::OwnerId owner = 0; owner < ledger_->owner_count(); ++owner)
        result.owners.push_back(OwnerSummary{ledger_->owner_name(owner), ledger_->usage(owner)});
    finish_verdict(result);
    return result;
}

void Session::run_fit(std::uint32_t index, FitRecord& record) {
    state_.fit_index = index;
    state_.resumed = resume_ ? 1 : 0;  // the first fit alone takes the --resume checkpoint
    // Each fit of --repeat starts as the first did, from its plugins' create on: none
    // sees the fit before's batch, samples, device or phase.
    state_.phase = th_hook{};
    state_.epoch = 0;
    state_.global_step = 0;
    state_.batch_index = 0;
    state_.batches_in_epoch = 0;
    state_.batch_samples = 0;
    state_.samples_seen = 0;
    state_.sanity_checking = 0;
    model_device_ = home_device_;
    state_.device = devices_[home_device_]->name().c_str();
    fit_step_ = 0;
    fit_window_ = 0;
    window_whole_ = false;
    batches_started_ = 0;
    batches_completed_ = 0;
    passes_completed_ = 0;
    epoch_batches_done_ = 0;
    batch_in_flight_ = false;
    building_fit_ = false;
    forward_rows_ = 0;
    ledger_->end_growth_window();  // each fit opens its own, after setup
    epoch_trained_ = false;
    epoch_training_ended_ = false;
    pending_move_.reset();
    std::vector<std::optional<std::uint64_t>> free_at_start;
    for (device::DeviceIndex i = 0; i < devices_.size(); ++i)
        free_at_start.push_back(unusable_.contains(i) ? std::nullopt : devices_[i]->driver_free_bytes());
    metrics_.clear();
    failure_.clear();
    interrupt_signal_ = 0;
    fit_ = std::make_unique<FitState>();
    try {
        check_interrupt();
        for (std::size_t i = 0; i < libraries_.size(); ++i) {
            auto table = options_.config.plugin_tables.find(std::string(libraries_[i]->name()));
            auto values = plugin::validate_options(libraries_[i]->entry(),
                                                   table == options_.config.plugin_tables.end() ? nullptr : table->second.get(),
                                                   options_.config.file);
            instances_.push_back(std::make_unique<plugin::PluginInstance>(libraries_[i], *this, owners_[i], std::move(values)));
            enter(Phase::create);
            try {
                instances_.back()->create();
            } catch (const ConfigError& e) {  // an option value the plugin refused: name the table to fix
                throw ConfigError(fmt::format("{}: {}",
                                              table == options_.config.plugin_tables.end()
                                                  ? options_.config.file.string()
                                                  : config::source_position(options_.config.file, table->second->source()),
                                              e.what()));
            }
            enter(Phase::core);
        }
        if (options_.config.mode == "predict") predict_fit(record);
        else train_fit(record);
    } catch (const FitFailure& e) {
        record.failure = e.what();
        record.failure_exit = e.exit_code();
    } catch (const PluginLoadError& e) {
        record.failure = e.what();
        record.failure_exit = kExitPluginLoad;
    } catch (const ConfigError& e) {
        record.failure = e.what();
        record.failure_exit = kExitUsage;
    } catch (const std::bad_alloc&) {
        // Host memory (the ledger reports device memory itself, with owner and tag).
        record.failure = fmt::format("out of host memory (std::bad_alloc) {}: the model or batch_size is too large for "
                                     "this machine's memory",
                                     building_fit_ ? std::string("while the fit's model and buffers were built")
                                                   : fmt::format("in fit {}, epoch {}", state_.fit_index + 1,
                                                                 state_.epoch + 1));
        record.failure_exit = kExitTraining;
    } catch (const std::exception& e) {
        record.failure = e.what();
        record.failure_exit = kExitTraining;
    }
    if (!record.failure.empty()) {
        failure_ = record.failure;
        err_ << "error: " << record.failure << '\n';
        (void)dispatch_unchecked(TH_HOOK_EXCEPTION);
    }
    // Teardown always runs, for every created plugin, also those after a failing one.
    std::string teardown_failure = dispatch_unchecked(TH_HOOK_TEARDOWN);
    if (record.failure.empty() && !teardown_failure.empty()) {
        record.failure = teardown_failure;
        record.failure_exit = kExitTraining;
    }
    record.stop_reason = fit_->stop_reason;
    fit_.reset();  // the core gives back the model, its optimizer state and the batch buffers
    enter(Phase::teardown);
    const auto policy = options_.config.on_violation;
    const std::size_t leaks_before = leaks_.size();
    if (policy != resources::ViolationPolicy::ignore)
        record_leaks(ledger_->end_scope(TH_SCOPE_FIT, "teardown", policy));
    for (auto it = instances_.rbegin(); it != instances_.rend(); ++it) {
        enter(Phase::destroy);
        if (const std::string thrown = (*it)->destroy(); !thrown.empty()) {
            std::string failure = fmt::format("plugin '{}' failed in destroy: {}", (*it)->name(), thrown);
            err_ << "error: " << failure << '\n';
            if (record.failure.empty()) {
                record.failure = std::move(failure);
                record.failure_exit = kExitTraining;
            }
        }
        // The owner is gone: whatever it still holds is reclaimed whatever the policy.
        record_leaks(ledger_->end_owner((*it)->owner(), TH_SCOPE_PLUGIN, "destroy", resources::ViolationPolicy::warn));
    }
    // A leak found at this fit's end stops further repeats, as any failure does.
    if (record.failure.empty() && policy == resources::ViolationPolicy::fail && leaks_.size() > leaks_before) {
        record.failure = fmt::format("resource contract violated at the end of fit {}: {}", index + 1,
                                     resources::format_leak(leaks_[leaks_before]));
        record.failure_exit = kExitResourceContract;
    }
    for (const auto& instance : instances_) ended_hosts_.push_back(&instance->host());
    instances_.clear();
    enter(Phase::core);
    settle_devices(record, free_at_start);
    record.final_metrics.insert(metrics_.begin(), metrics_.end());
    // A signal after the fit's last check (the test evaluation, fit_end, teardown,
    // destroy): what the fit made stands, but the run ends with it, as after any
    // interrupt, not with the next fit.
    if (const int signal_number = pending_interrupt(); signal_number != 0 && record.failure.empty()) {
        record.failure = fmt::format("interrupted by {} in fit {} after its {} ended: its results stand",
                                     interrupt_name(signal_number), index + 1,
                                     options_.config.mode == "predict" ? "predict passes" : "training");
        record.failure_exit = kExitInterrupted;
        err_ << "error: " << record.failure << '\n';
    }
    // A resume point the fit never reached (it ended first) is not the next fit's.
    start_epoch_ = 0;
    start_batch_ = 0;
}

void Session::build_fit() {
    building_fit_ = true;
    const config::RunConfig& config = options_.config;
    FitState& fit = *fit_;
    // Buffers for the largest batch a split gives: a batch_size past every split's
    // size would size activations for samples that never come. A batch of
    // min(batch_size, largest split) rows cuts every split as batch_size does.
    std::size_t largest_split = std::max(train_.count, validation_.count);
    if (test_) largest_split = std::max(largest_split, test_->count);
    const std::size_t rows = std::min<std::size_t>(config.data.batch_size, std::max<std::size_t>(largest_split, 1));
    model_device_ = home_device_;
    state_.device = devices_[model_device_]->name().c_str();
    device::Backend& backend = model_device_ref().backend();
    nn::LayerContext context{backend, *ledger_, rows, model_device_};
    // Each split's last batch (a predict pass runs the training split).
    for (const data::Dataset* split : {&train_, &validation_, test_ ? &*test_ : nullptr})
        if (split != nullptr && split->count % rows != 0) context.smaller_rows.push_back(split->count % rows);
    fit.loss = nn::loss_kind(config.model.loss);
    fit.model = std::make_unique<nn::Model>(config.model, train_.sample_shape, output_width(), context, config.seed);
    fit.optimizer = std::make_unique<nn::Optimizer>(config.optimizer, backend, *ledger_);
    // A predict run takes no step: a window of 1 holds nothing.
    fit.accumulator = std::make_unique<nn::GradientAccumulator>(fit.model->parameters(), state_.accumulate_grad_batches,
                                                                backend, *ledger_);
    fit.loss_workspace = make_loss_workspace(backend, model_device_);
    if (train_.classes > 0)
        fit.labels = nn::Buffer(*ledger_, rows * sizeof(std::int32_t), TH_SCOPE_FIT, "batch.labels", model_device_);
    if (train_.target_width > 0)
        fit.targets = nn::Tensor(*ledger_, {rows, train_.target_width}, TH_SCOPE_FIT, "batch.targets", model_device_);
    fit.host = make_host_batch(model_device_);
    fit.batcher = std::make_unique<data::Batcher>(train_, rows, config.data.shuffle, config.seed);
    building_fit_ = false;
}

void Session::train_fit(FitRecord& record) {
    const config::RunConfig& config = options_.config;
    FitState& fit = *fit_;
    build_fit();
    if (state_.fit_index == 0) print_model_summary();
    restore_weights();  // before setup: a plugin that keeps the initial weights keeps these
    dispatch(TH_HOOK_SETUP);
    restore_checkpoint();
    dispatch(TH_HOOK_TO_DEVICE);
    apply_pending_move();
    // Ctrl-C in setup or to_device: here, once a resume's checkpoint is restored, so that
    // a save on interrupt holds the resumed state, not a fresh model.
    check_interrupt();
    dispatch(TH_HOOK_FIT_START);
    apply_pending_move();
    check_interrupt();  // in fit_start: before the first step, not after it
    const std::uint32_t first_epoch = std::exchange(start_epoch_, 0);
    // A resume within an epoch whose batches max_steps already ended (an interrupt
    // or a step-based save at its last step) still ends that epoch, as the run would have.
    const bool resumed_within_epoch = start_batch_ > 0;
    note_step_limit();
    const auto trains = [&](std::uint32_t epoch) {
        return epoch < config.epochs && !stopping() &&
               (!steps_exhausted() || (epoch == first_epoch && resumed_within_epoch));
    };
    // At the epoch and step the fit stands at (a resume's own): only a fit that trains.
    if (trains(first_epoch)) sanity_check();
    // Opened after the sanity check: what its few validation batches take (once a fit)
    // is no warm-up for the first validation's hooks, which may come epochs later.
    ledger_->begin_fit_growth_window(resources::Ledger::StepHooks::training_batch);
    for (std::uint32_t epoch = first_epoch; trains(epoch); ++epoch) {
        state_.epoch = epoch;
        const auto started = std::chrono::steady_clock::now();
        const std::uint64_t trained = train_epoch();
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        // Only what this process trained counts: a resumed epoch with nothing left to
        // train has no figure (rather than an earlier epoch's, or one over no time).
        if (trained > 0 || state_.samples_seen == 0)
            metrics_["samples_per_second"] = seconds > 0 ? static_cast<double>(trained) / seconds : 0.0;
        else
            metrics_.erase("samples_per_second");
        // Where the epoch's training ended (see train_epoch) and check_val_every_n_epoch
        // falls on it: the fit's last weights get their val_* metrics, and early_stopping
        // and checkpoint rank them, not the epoch before's. limit_val_batches = 0 turns
        // validation off, hooks and all, as Lightning's does.
        const bool validated = epoch_training_ended_ && validation_.count > 0 && config.data.limit_val_batches != 0 &&
                               (epoch + 1) % config.check_val_every_n_epoch == 0;
        if (validated) evaluate(validation_, "val", true, config.data.limit_val_batches);
        dispatch(TH_HOOK_EPOCH_END);
        check_scope(TH_SCOPE_EPOCH, "epoch_end");
        check_growth(ledger_->grown_in_epoch("epoch_end"), "epoch_end");
        record.epochs.push_back(EpochRecord{epoch, {metrics_.begin(), metrics_.end()}, memory_snapshot(), validated});
        // A diverged model fails the fit, after the epoch's end so that a monitor
        // (early stopping's check_finite) can stop it cleanly instead, as in Lightning.
        // The metric stays set for on_exception and the report.
        if (const auto val_loss = metrics_.find("val_loss");
            validated && val_loss != metrics_.end() && !std::isfinite(val_loss->second) && !stopping())
            throw FitFailure::non_finite("validation loss", val_loss->second,
                                         fmt::format("fit {} epoch {}", state_.fit_index + 1, state_.epoch + 1));
        check_interrupt();  // during validation: the epoch ends whole, epoch_end included
    }
    // A requested stop names the fit's end where it took effect, unless max_steps ended it
    // first; one min_epochs or min_steps still held when the epochs ran out does not.
    if (stopping() && fit.stop_reason.empty()) fit.stop_reason = fit.requested_stop;
    if (test_) {
        evaluate(*test_, "test", false, config.data.limit_test_batches);
        // The last steps can diverge where no validation looks (none, or before it):
        // the test set is then the first to see it, and fails the fit alike.
        if (const auto loss = metrics_.find("test_loss");
            loss != metrics_.end() && !std::isfinite(loss->second) && !stopping())
            throw FitFailure::non_finite("test loss", loss->second, fmt::format("fit {}", state_.fit_index + 1));
    }
    dispatch(TH_HOOK_FIT_END);
}

}  // namespace trainhost::lifecycle
