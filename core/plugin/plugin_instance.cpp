#include "plugin/plugin_instance.hpp"

#include "errors.hpp"
#include "plugin/declarations.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <deque>
#include <mutex>
#include <fmt/format.h>

namespace trainhost::plugin {

namespace {

// A plugin may keep a handle or its HostLink past its instance, in a global say, and
// release it when its library is unloaded: for most C++ plugins at exit, after the
// session is gone. So a th_host is never freed, only retired (services cleared,
// every call refused), and never reused, so a stale pointer cannot reach a later
// instance's. The cost is one small struct per instance created.
th_host& new_host() {
    static std::mutex mutex;
    static auto* const hosts = new std::deque<th_host>();  // never destroyed, as above
    const std::lock_guard lock(mutex);
    return hosts->emplace_back();
}

// A destructor that throws ends the process (destructors are noexcept), and no
// trampoline can catch it; the user is at least told whose it was.
std::string_view g_destroying;

[[noreturn]] void plugin_destructor_threw() noexcept {
    std::fflush(stdout);  // what the run printed so far
    const std::exception_ptr thrown = std::current_exception();
    const auto name_length = static_cast<int>(g_destroying.size());
    if (!thrown) {
        // No exception: std::terminate called directly, or by a std::thread still joinable.
        std::fprintf(stderr,
                     "fatal: plugin '%.*s' ended the process from its destructor: std::terminate without an exception "
                     "(a std::thread member still joinable, say); no verdict or report follows\n",
                     name_length, g_destroying.data());
    } else {
        std::string what = "an exception that is no std::exception";
        try {
            std::rethrow_exception(thrown);
        } catch (const std::exception& e) {
            what = e.what();
        } catch (...) {
        }
        std::fprintf(stderr,
                     "fatal: plugin '%.*s' threw from its destructor: %s\n(C++ ends the process there, as destructors "
                     "are noexcept: no verdict or report follows; catch inside the destructor)\n",
                     name_length, g_destroying.data(), what.c_str());
    }
    std::fflush(stderr);
    std::abort();
}

}  // namespace

PluginInstance::PluginInstance(std::shared_ptr<PluginLibrary> library, HostServices& services,
                               resources::OwnerId owner, OptionValues options)
    : library_(std::move(library)), options_(std::move(options)), host_(new_host()) {
    host_.services = &services;
    host_.owner = owner;
    if (declarations_checked(entry())) host_.declared_writes = split_names(entry().writes);
}

PluginInstance::~PluginInstance() {
    (void)destroy();  // what it threw, where destroy() was not called first, has no fit left to fail
    report_foreign_thread_calls(true);  // those since destroy()
    host_.services = nullptr;
    host_.declared_writes.reset();
    host_.last_error = std::string();
}

namespace {

// A plugin's message is plain C text that may be missing its terminator.
// A plugin's message may quote a config value or anything else as it is: printed, a
// control character in it would act on the terminal, as one in the config would.
std::string message_of(const th_hook_result& result) {
    return printable(std::string_view(result.message, strnlen(result.message, sizeof result.message)),
                     sizeof result.message);
}

// A plugin may return any int where the ABI says th_status, and write any int where
// it says th_control; a C++ enum must not hold a value it does not define, so the
// number is taken as an int and checked before it becomes one.
th_status known_status(int raw) noexcept {
    return raw >= TH_OK && raw <= TH_UNDECLARED ? static_cast<th_status>(raw) : TH_ERROR;
}

int raw_control(const th_hook_result& result) noexcept {
    static_assert(sizeof(th_control) == sizeof(int));
    int raw = 0;
    std::memcpy(&raw, &result.control, sizeof raw);
    return raw;
}

// The SDK's trampolines catch every exception, but a plugin on the bare C ABI may let
// one cross it: that is its failure, named like any other, never a terminate in the host.
template <typename Call>
int call_plugin(Call&& call, std::string& thrown) noexcept {
    try {
        return static_cast<int>(call());
    } catch (const std::exception& e) {
        thrown = fmt::format("threw a C++ exception across the C ABI: {}", printable(e.what(), 4096));
    } catch (...) {
        thrown = "threw a C++ exception across the C ABI (not a std::exception)";
    }
    return TH_ERROR;
}

}  // namespace

void PluginInstance::create() {
    th_hook_result result{};
    void* instance = nullptr;
    std::string thrown;
    const th_status status = known_status(call_plugin(
        [&] { return entry().create(&host_api(), &host_, options_.data(), options_.size(), &instance, &result); },
        thrown));
    report_foreign_thread_calls();
    if (status != TH_OK || instance == nullptr) {
        // A refusal that still made an instance is destroyed, as every created one is;
        // not one whose create threw, which may be half made.
        std::string destroy_thrown;
        if (instance != nullptr && thrown.empty()) destroy_thrown = destroy_created(instance);
        report_foreign_thread_calls();  // also those made from its destroy
        std::string message = thrown.empty() ? message_of(result) : thrown;
        if (message.empty())
            message = status == TH_OK ? "create() returned no instance" : "create() failed without a message";
        if (!destroy_thrown.empty()) message += fmt::format(" (and then its destroy {})", destroy_thrown);
        if (status == TH_INVALID_ARGUMENT)
            throw ConfigError(fmt::format("[plugins.{}]: the plugin refused its options: {}", name(), message));
        throw PluginLoadError(fmt::format("plugin '{}' refused to start: {}", name(), message));
    }
    instance_ = instance;
}

HookOutcome PluginInstance::call(th_hook hook) noexcept {
    th_hook_fn function = entry().vtable->hooks[hook];
    if (function == nullptr || instance_ == nullptr) return {};
    th_hook_result result{};
    HookOutcome outcome;
    std::string thrown;
    const int status = call_plugin([&] { return function(instance_, &host_, &result); }, thrown);
    report_foreign_thread_calls();
    outcome.status = known_status(status);
    outcome.message = thrown.empty() ? message_of(result) : thrown;
    if (outcome.failed() && outcome.message.empty())
        outcome.message = fmt::format("hook failed without a message (status {})", status);
    // A control value this host does not know cannot be obeyed: a plugin bug, not a silent continue.
    const int control = raw_control(result);
    if (outcome.failed()) return outcome;
    if (control == TH_CONTINUE || control == TH_SKIP_BATCH || control == TH_STOP_FIT) {
        outcome.control = static_cast<th_control>(control);
    } else {
        outcome.status = TH_ERROR;
        outcome.message = fmt::format("hook returned an unknown control value {}", control);
    }
    return outcome;
}

HookOutcome PluginInstance::save_state() noexcept {
    th_hook_result result{};
    HookOutcome outcome;
    std::string thrown;
    outcome.status = known_status(call_plugin([&] { return entry().vtable->save_state(instance_, &host_, &result); }, thrown));
    report_foreign_thread_calls();
    outcome.message = thrown.empty() ? message_of(result) : thrown;
    if (outcome.failed() && outcome.message.empty()) outcome.message = "save_state failed without a message";
    return outcome;
}

HookOutcome PluginInstance::load_state(const void* bytes, std::uint64_t size) noexcept {
    th_hook_result result{};
    HookOutcome outcome;
    std::string thrown;
    outcome.status = known_status(
        call_plugin([&] { return entry().vtable->load_state(instance_, &host_, bytes, size, &result); }, thrown));
    report_foreign_thread_calls();
    outcome.message = thrown.empty() ? message_of(result) : thrown;
    if (outcome.failed() && outcome.message.empty()) outcome.message = "load_state failed without a message";
    return outcome;
}

std::string PluginInstance::destroy() noexcept {
    if (instance_ == nullptr) return {};
    void* instance = instance_;
    instance_ = nullptr;
    std::string thrown = destroy_created(instance);
    report_foreign_thread_calls();
    return thrown;
}

// A bare C plugin's destroy that lets an exception cross the ABI is caught, as from any
// other call; an SDK plugin's destructor that throws ends the process inside the
// plugin's own noexcept trampoline, where only the terminate handler can name it.
std::string PluginInstance::destroy_created(void* instance) noexcept {
    std::string thrown;
    g_destroying = name();
    const std::terminate_handler previous = std::set_terminate(&plugin_destructor_threw);
    (void)call_plugin(
        [&] {
            entry().destroy(instance);
            return TH_OK;
        },
        thrown);
    std::set_terminate(previous);
    g_destroying = {};
    return thrown;
}

void PluginInstance::report_foreign_thread_calls(bool ended) noexcept {
    if (host_.services != nullptr) record_foreign_thread_calls(host_.services->ledger(), host_, ended);
}

void record_foreign_thread_calls(resources::Ledger& ledger, th_host& host, bool ended) noexcept {
    const std::uint64_t calls = host.foreign_thread_calls.exchange(0);
    if (calls == 0) return;
    const char* first = host.first_foreign_call.exchange(nullptr);
    try {
        ledger.record_misuse(host.owner, resources::MisuseKind::wrong_thread, 0,
                             fmt::format("{} host call{} from a thread other than the one that runs its hooks (the "
                                         "first: {}){}, refused: the host API serves that thread alone",
                                         calls, calls == 1 ? "" : "s", first != nullptr ? first : "?",
                                         ended ? ", after its instance ended" : ""));
    } catch (...) {  // out of memory for the record: the calls were refused all the same
    }
}

}  // namespace trainhost::plugin
