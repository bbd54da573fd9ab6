// A plugin on the bare C ABI, broken in one way chosen by BARE_ABI_FAULT at build
// time. Entry faults (no_entry, short_entry, bad_name, reserved_name, no_create, no_option_table,
// short_hook_table, half_state: save_state without load_state; entry_throws and entry_throws_unknown, an entry function that
// throws across the C ABI) and option schema faults (option_twice, host_key_option,
// mistyped_default, invalid_default): the loader must refuse each with a message
// naming the fault, before creating anything, and never read past what the entry holds.
// required_option is no fault: an option without a default, which a config must set. Hook faults
// (bare_status: a status the ABI does not define and no message; bad_control: success
// with a control value the ABI does not define): the host must fail the fit naming
// the plugin and the hook, and act on neither. Faults a loader cannot see: no_text (no
// version or description, which list-plugins and inspect show as "(none)"); throws,
// throws_unknown (not a std::exception), throws_in_create, throws_in_destroy and
// refuses_then_throws_in_destroy (a C++ exception across the C ABI, a named failure and
// never a terminate; the last after create refused with an instance made);
// throws_in_twentieth_destroy (sound in all else, a throw that only the 20th instance of
// a process shows, which validate must name by its cycle); stop_in_setup (TH_STOP_FIT where request_stop is refused: a misuse);
// save_in_save_state (a checkpoint saved from its own save_state: refused, never a
// recursion); stale_host (its host kept in a global and called as the library is
// unloaded, after its instance ended: refused, and the refusal printed); silent_save_state
// and silent_load_state (a state hook that fails with no message: the failure is still
// named); unnamed_option (an option spec without a name, refused at load);
// unresolved_symbol (a function no library defines: the dynamic loader's refusal, passed on);
// hidden_entry (the entry in its section but not exported: no plugin).
#define BOOST_DLL_USE_STD_FS
#include <boost/dll/alias.hpp>
#include <trainhost/abi.h>

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <tuple>

#ifdef BARE_ABI_UNRESOLVED
extern "C" int trainhost_test_symbol_nobody_defines();
// Kept, so that the reference stays in the library.
extern "C" __attribute__((visibility("default"), used)) int trainhost_test_unresolved_caller() {
    return trainhost_test_symbol_nobody_defines();
}
#endif

namespace {

bool fault_is(const char* fault) { return std::strcmp(BARE_ABI_FAULT, fault) == 0; }

const th_host_api* g_api = nullptr;
th_host* g_host = nullptr;

// Runs as the library is unloaded, after the instance, and the session, ended.
struct StaleHostCall {
    ~StaleHostCall() {
        if (g_host == nullptr) return;
        uint32_t count = 0;
        const th_status status = g_api->param_count(g_host, &count);
        std::fprintf(stderr, "stale host: status %d: %s\n", static_cast<int>(status), g_api->last_error(g_host));
    }
} g_stale_host_call;

th_status create(const th_host_api* api, th_host* host, const th_option_value*, uint32_t, void** instance,
                 th_hook_result* result) {
    if (fault_is("throws_in_create")) throw std::runtime_error("no instance today");
    // Sound in all but its destroy, it checks the host as the SDK does.
    if (fault_is("throws_in_twentieth_destroy") &&
        (api->struct_size < offsetof(th_host_api, move_model) + sizeof api->move_model || api->abi_major != TH_ABI_MAJOR)) {
        std::snprintf(result->message, sizeof result->message, "this plugin needs a host speaking ABI 1.x");
        return TH_ERROR;
    }
    g_api = api;
    if (fault_is("stale_host")) g_host = host;
    static int token = 0;
    *instance = &token;
    if (fault_is("refuses_then_throws_in_destroy")) {
        std::snprintf(result->message, sizeof result->message, "not today");
        return TH_ERROR;
    }
    return TH_OK;
}

void destroy(void*) {
    if (fault_is("throws_in_destroy") || fault_is("refuses_then_throws_in_destroy"))
        throw std::runtime_error("no destroy today");
    static int destroyed = 0;
    if (fault_is("throws_in_twentieth_destroy") && ++destroyed == 20)
        throw std::runtime_error("no destroy on the 20th");
}

th_status setup(void*, th_host*, th_hook_result* result) {
    if (fault_is("stop_in_setup")) {
        result->control = TH_STOP_FIT;
        std::snprintf(result->message, sizeof result->message, "before anything ran");
    }
    return TH_OK;
}

th_status batch_start(void*, th_host*, th_hook_result* result) {
    if (fault_is("bare_status")) return static_cast<th_status>(77);
    if (fault_is("bad_control")) result->control = static_cast<th_control>(7);
    if (fault_is("throws")) throw std::runtime_error("a C++ exception where the ABI says C");
    if (fault_is("throws_unknown")) throw 42;
    return TH_OK;
}

bool saves_at_epoch_end() {
    return fault_is("save_in_save_state") || fault_is("silent_save_state") || fault_is("silent_load_state");
}

th_status epoch_end(void*, th_host* host, th_hook_result* result) {
    if (!saves_at_epoch_end()) return TH_OK;
    if (g_api->save_checkpoint(host, "outer.safetensors", 0) == TH_OK) return TH_OK;
    std::snprintf(result->message, sizeof result->message, "save_checkpoint: %s", g_api->last_error(host));
    return TH_ERROR;
}

// The nested save must be refused: the state saved is this one, whole.
th_status save_state(void*, th_host* host, th_hook_result* result) {
    if (fault_is("silent_save_state")) return TH_ERROR;
    if (fault_is("silent_load_state")) return g_api->state_write(host, "whole", 5);
    const th_status nested = g_api->save_checkpoint(host, "inner.safetensors", 0);
    if (nested != TH_OUT_OF_PHASE) {
        std::snprintf(result->message, sizeof result->message, "a checkpoint saved from save_state was not refused");
        return TH_ERROR;
    }
    return g_api->state_write(host, "whole", 5);
}

th_status load_state(void*, th_host*, const void*, uint64_t, th_hook_result*) {
    return fault_is("silent_load_state") ? TH_ERROR : TH_OK;
}

// Not noexcept: entry_throws and entry_throws_unknown throw across the C ABI, as a
// careless plugin's entry would.
const th_plugin_entry* entry() {
    if (fault_is("entry_throws")) throw std::runtime_error("no entry today");
    if (fault_is("entry_throws_unknown")) throw 42;
    static const th_plugin_vtable vtable = [] {
        th_plugin_vtable value{};
        value.struct_size = fault_is("short_hook_table") ? 8 : sizeof value;
        value.hooks[TH_HOOK_SETUP] = &setup;
        value.hooks[TH_HOOK_BATCH_START] = &batch_start;
        value.hooks[TH_HOOK_EPOCH_END] = &epoch_end;
        if (saves_at_epoch_end()) {
            value.save_state = &save_state;
            value.load_state = &load_state;
        }
        // State a resume would save and never give back.
        if (fault_is("half_state")) value.save_state = &save_state;
        return value;
    }();
    static const th_plugin_entry e = [] {
        th_plugin_entry value{};
        value.struct_size = fault_is("short_entry") ? 16 : sizeof value;
        value.abi_major = TH_ABI_MAJOR;
        value.abi_minor = TH_ABI_MINOR;
        value.name = fault_is("bad_name") ? "Malformed-Entry" : fault_is("reserved_name") ? "core" : TEST_PLUGIN_NAME;
        value.version = fault_is("no_text") ? nullptr : "1";
        value.description = fault_is("no_text") ? nullptr : "a plugin on the bare C ABI, broken in one way";
        value.create = fault_is("no_create") ? nullptr : &create;
        value.destroy = &destroy;
        value.vtable = &vtable;
        value.option_count = fault_is("no_option_table") ? 2 : 0;
        static const th_option_spec twice[] = {{"rate", TH_OPTION_FLOAT, "0.5", "a rate"},
                                               {"rate", TH_OPTION_FLOAT, "0.1", "the same rate again"}};
        static const th_option_spec host_key[] = {{"device_memory_limit", TH_OPTION_INT, "1", "the host's own key"}};
        static const th_option_spec mistyped[] = {{"steps", TH_OPTION_INT, "1.5", "an int with a float default"}};
        static const th_option_spec invalid[] = {{"name", TH_OPTION_STRING, "unquoted", "a string default without quotes"}};
        static const th_option_spec required[] = {{"rate", TH_OPTION_FLOAT, nullptr, "a rate with no default"}};
        static const th_option_spec unnamed[] = {{"", TH_OPTION_INT, "1", "an option with no name"}};
        for (const auto& [fault, options, count] : {std::tuple{"option_twice", twice, 2u}, std::tuple{"host_key_option", host_key, 1u},
                                                    std::tuple{"mistyped_default", mistyped, 1u},
                                                    std::tuple{"invalid_default", invalid, 1u},
                                                    std::tuple{"required_option", required, 1u},
                                                    std::tuple{"unnamed_option", unnamed, 1u}})
            if (fault_is(fault)) {
                value.options = options;
                value.option_count = count;
            }
        return value;
    }();
    return fault_is("no_entry") ? nullptr : &e;
}

}  // namespace

#ifdef BARE_ABI_HIDDEN_ENTRY
// The entry in its section, as BOOST_DLL_ALIAS_SECTIONED puts it, but not exported.
namespace _autoaliases {
extern "C" __attribute__((visibility("hidden"))) const void* trainhost_plugin_entry;
BOOST_DLL_SECTION(thplugin, read) BOOST_DLL_SELECTANY const void* trainhost_plugin_entry =
    reinterpret_cast<const void*>(reinterpret_cast<intptr_t>(&entry));
}  // namespace _autoaliases
#else
BOOST_DLL_ALIAS_SECTIONED(entry, trainhost_plugin_entry, thplugin)
#endif
