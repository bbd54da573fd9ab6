// The glue between a trainhost::sdk::Callback and the C ABI: noexcept trampolines
// for every hook, the constant th_plugin_entry built from the class's static
// declarations, and TRAINHOST_PLUGIN. Included by sdk.hpp; plugins include sdk.hpp.
#pragma once

#include "trainhost/sdk.hpp"

#include <cstddef>

namespace trainhost::sdk {

namespace detail {

// hook enum -> Callback member, one line each; order matches th_hook.
#define TRAINHOST_SDK_HOOKS(X)                                                                  \
    X(TH_HOOK_SETUP, on_setup) X(TH_HOOK_TO_DEVICE, on_to_device) X(TH_HOOK_FIT_START, on_fit_start) \
    X(TH_HOOK_EPOCH_START, on_epoch_start) X(TH_HOOK_BATCH_START, on_batch_start)              \
    X(TH_HOOK_BEFORE_BACKWARD, on_before_backward) X(TH_HOOK_AFTER_BACKWARD, on_after_backward) \
    X(TH_HOOK_BEFORE_OPTIMIZER_STEP, on_before_optimizer_step)                                 \
    X(TH_HOOK_AFTER_OPTIMIZER_STEP, on_after_optimizer_step) X(TH_HOOK_BATCH_END, on_batch_end) \
    X(TH_HOOK_VALIDATION_START, on_validation_start) X(TH_HOOK_VAL_BATCH_START, on_val_batch_start) \
    X(TH_HOOK_VAL_BATCH_END, on_val_batch_end) X(TH_HOOK_VALIDATION_END, on_validation_end)     \
    X(TH_HOOK_EPOCH_END, on_epoch_end) X(TH_HOOK_FIT_END, on_fit_end)                           \
    X(TH_HOOK_TEARDOWN, on_teardown) X(TH_HOOK_EXCEPTION, on_exception)

struct Instance {
    HostLink link;
    std::unique_ptr<Callback> callback;
};

inline void write_message(th_hook_result* result, const char* text) noexcept {
    if (!result) return;
    std::snprintf(result->message, sizeof result->message, "%s", text);
}

template <typename Body>
th_status guarded(th_hook_result* result, Body&& body) noexcept {
    try {
        body();
        return TH_OK;
    } catch (const Error& e) {
        write_message(result, e.what());
        return e.status() == TH_OK ? TH_ERROR : e.status();
    } catch (const std::exception& e) {
        write_message(result, e.what());
        return TH_ERROR;
    } catch (...) {
        write_message(result, "unknown exception");
        return TH_ERROR;
    }
}

template <void (Callback::*Member)(Context&)>
th_status hook_trampoline(void* instance, th_host*, th_hook_result* result) noexcept {
    return guarded(result, [&] {
        auto* self = static_cast<Instance*>(instance);
        Context context(self->link, result);
        (self->callback.get()->*Member)(context);
    });
}

// A hook is dispatched only if the plugin overrides it: when it does not,
// &T::member names the base-class member and has the base's type.
// A hook declared with another signature (no Context&, a const one) hides the base's
// instead of overriding it, and would never be called: refused at compile time.
// So are on_save_state and on_load_state declared const or taking their argument by
// value: every checkpoint would hold no state, and every resume restore none.
template <typename Argument, typename>
struct overrides_with : std::false_type {};
template <typename Argument, typename Class>
struct overrides_with<Argument, void (Class::*)(Argument&)> : std::true_type {};
template <typename Argument, typename Class>
struct overrides_with<Argument, void (Class::*)(Argument&) noexcept> : std::true_type {};
template <typename Member>
using overrides_a_hook = overrides_with<Context, Member>;

template <typename MemberOfT, void (Callback::*Member)(Context&)>
constexpr th_hook_fn slot_for() {
    if constexpr (std::is_same_v<MemberOfT, void (Callback::*)(Context&)>) return nullptr;
    else return &hook_trampoline<Member>;
}

inline th_status save_state_trampoline(void* instance, th_host*, th_hook_result* result) noexcept {
    return guarded(result, [&] {
        auto* self = static_cast<Instance*>(instance);
        StateWriter writer(self->link);
        self->callback->on_save_state(writer);
    });
}

inline th_status load_state_trampoline(void* instance, th_host*, const void* bytes, std::uint64_t size,
                                       th_hook_result* result) noexcept {
    return guarded(result, [&] {
        auto* self = static_cast<Instance*>(instance);
        StateReader reader(bytes, size);
        self->callback->on_load_state(reader);
        if (!reader.done()) throw std::runtime_error("saved state has bytes this plugin did not read");
    });
}

template <typename T>
const th_plugin_vtable* vtable_for() {
    static const th_plugin_vtable table = [] {
        th_plugin_vtable t{};
        t.struct_size = sizeof t;
#define TRAINHOST_SDK_SLOT(hook, member)                                                                   \
    static_assert(overrides_a_hook<decltype(&T::member)>::value,                                           \
                  #member " is a hook: declare it void " #member "(trainhost::sdk::Context&) override, or it " \
                  "is never called");                                                                      \
    t.hooks[hook] = slot_for<decltype(&T::member), &Callback::member>();
        TRAINHOST_SDK_HOOKS(TRAINHOST_SDK_SLOT)
#undef TRAINHOST_SDK_SLOT
        static_assert(overrides_with<StateWriter, decltype(&T::on_save_state)>::value,
                      "on_save_state is a hook: declare it void on_save_state(trainhost::sdk::StateWriter&) override, "
                      "or it is never called");
        static_assert(overrides_with<StateReader, decltype(&T::on_load_state)>::value,
                      "on_load_state is a hook: declare it void on_load_state(trainhost::sdk::StateReader&) override, "
                      "or it is never called");
        constexpr bool saves = !std::is_same_v<decltype(&T::on_save_state), void (Callback::*)(StateWriter&)>;
        constexpr bool loads = !std::is_same_v<decltype(&T::on_load_state), void (Callback::*)(StateReader&)>;
        static_assert(saves == loads, "a stateful plugin overrides both on_save_state and on_load_state");
        if constexpr (saves) {
            t.save_state = &save_state_trampoline;
            t.load_state = &load_state_trampoline;
        }
        return t;
    }();
    return &table;
}

template <typename T>
constexpr std::span<const th_option_spec> options_of() {
    if constexpr (requires { T::options; }) return std::span<const th_option_spec>(T::options);
    else return {};
}

#define TRAINHOST_SDK_DECLARED(field)                                    \
    template <typename T>                                                \
    constexpr const char* field##_of() {                                 \
        if constexpr (requires { T::field; }) return T::field;           \
        else return "";                                                  \
    }
TRAINHOST_SDK_DECLARED(after)
TRAINHOST_SDK_DECLARED(before)
TRAINHOST_SDK_DECLARED(reads)
TRAINHOST_SDK_DECLARED(writes)
#undef TRAINHOST_SDK_DECLARED

template <typename T>
constexpr std::uint32_t state_version_of() {
    if constexpr (requires { T::state_version; }) return T::state_version;
    else return 0;
}

template <typename T>
th_status create(const th_host_api* api, th_host* host, const th_option_value* values,
                 std::uint32_t value_count, void** instance, th_hook_result* result) noexcept {
    return guarded(result, [&] {
        // Calls appended since (ABI 1.4 on) are checked where they are made, so that a
        // plugin that does not make them runs on an older host of its major.
        if (api == nullptr || api->struct_size < kHostApiOf10 || api->abi_major != TH_ABI_MAJOR)
            throw std::runtime_error("host offers an incompatible host API (plugin needs ABI " +
                                     std::to_string(TH_ABI_MAJOR) + ".x with at least ABI " +
                                     std::to_string(TH_ABI_MAJOR) + ".0's calls)");
        constexpr auto specs = options_of<T>();
        if (value_count != specs.size())
            throw std::runtime_error("host passed " + std::to_string(value_count) + " option values, plugin declares " +
                                     std::to_string(specs.size()));
        HostLink link(api, host);
        Context context(link, result);
        Options options(specs.data(), values, value_count);
        try {
            auto made = std::make_unique<Instance>(Instance{link, std::make_unique<T>(context, options)});
            *instance = made.release();
        } catch (const OptionError&) {
            throw;
        } catch (const Error& e) {
            // TH_INVALID_ARGUMENT from create tells the host an option value was refused
            // (exit 1); a host call's refusal of that status is the plugin's own fault.
            if (e.status() == TH_INVALID_ARGUMENT) throw Error(TH_ERROR, e.what());
            throw;
        }
    });
}

// Destructors are noexcept: a plugin whose destructor throws ends the process, as
// in any C++ program, so a destructor releases its leases and reports nothing.
inline void destroy(void* instance) noexcept { delete static_cast<Instance*>(instance); }

// The loader's rule for names, at compile time.
constexpr bool valid_plugin_name(std::string_view name) {
    if (name.empty()) return false;
    for (const char c : name)
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
    return true;
}

template <typename T>
const th_plugin_entry* entry_for() noexcept {
    static_assert(std::is_base_of_v<Callback, T>, "TRAINHOST_PLUGIN needs a trainhost::sdk::Callback");
    static_assert(valid_plugin_name(T::name), "a plugin's name is made of a-z, 0-9 and _ (the loader refuses others)");
    static_assert(std::string_view(T::name) != "core",
                  "a plugin may not be named core: it names trainhost's own leases (the loader refuses it)");
    // The host gives saved state back only to the same state_version: 0 would say the
    // layout never changes.
    static_assert(std::is_same_v<decltype(&T::on_save_state), void (Callback::*)(StateWriter&)> ||
                      state_version_of<T>() >= 1,
                  "a stateful plugin declares static constexpr std::uint32_t state_version = 1 (or more)");
    static const th_plugin_entry entry = [] {
        th_plugin_entry e{};
        e.struct_size = sizeof e;
        e.abi_major = TH_ABI_MAJOR;
        e.abi_minor = TH_ABI_MINOR;
        e.name = T::name;
        e.version = T::version;
        e.description = T::description;
        constexpr auto specs = options_of<T>();
        e.options = specs.data();
        e.option_count = static_cast<std::uint32_t>(specs.size());
        e.after = after_of<T>();
        e.before = before_of<T>();
        e.reads = reads_of<T>();
        e.writes = writes_of<T>();
        e.create = &create<T>;
        e.destroy = &destroy;
        e.vtable = vtable_for<T>();
        e.state_version = state_version_of<T>();
        return e;
    }();
    return &entry;
}

}  // namespace detail
}  // namespace trainhost::sdk

// Boost.DLL places the alias in its own section so the host can recognise a plugin
// from its section table alone, before running any of its code.
#ifndef BOOST_DLL_USE_STD_FS
#define BOOST_DLL_USE_STD_FS
#endif
#include <boost/dll/alias.hpp>

#define TRAINHOST_PLUGIN(Class)                                                        \
    namespace trainhost_plugin_export {                                                \
    inline const th_plugin_entry* entry() noexcept {                                   \
        return ::trainhost::sdk::detail::entry_for<Class>();                           \
    }                                                                                  \
    }                                                                                  \
    BOOST_DLL_ALIAS_SECTIONED(trainhost_plugin_export::entry, trainhost_plugin_entry, thplugin)
