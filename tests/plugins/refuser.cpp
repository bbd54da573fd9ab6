// Refuses to be created: by default with its own message, through the SDK; the
// other modes break create()'s contract as a raw C plugin could, and the host
// must refuse each with a clear message, never read past the message buffer.
#include <trainhost/sdk.hpp>

#include <cstring>
#include <stdexcept>

namespace {

class Refuser final : public trainhost::sdk::Callback {
public:
    static constexpr const char* name = "test_refuser";
    static constexpr const char* version = "1";
    static constexpr const char* description = "create() always fails";
    static constexpr th_option_spec options[] = {
        {"mode", TH_OPTION_STRING, "\"throw\"",
         "throw (a message, through the SDK), no_instance (TH_OK without an instance), silent (an error without a "
         "message), unterminated (an error whose 512-byte message has no terminating NUL) or invalid_call (an "
         "sdk::Error of TH_INVALID_ARGUMENT, as a failed host call in the constructor throws: no bad option)"},
    };
    Refuser(trainhost::sdk::Context&, const trainhost::sdk::Options& options) {
        if (options.get_string("mode") == "invalid_call")
            throw trainhost::sdk::Error(TH_INVALID_ARGUMENT, "magnitude_threshold: 1 masks for 2 parameters");
        throw std::runtime_error("no GPU budget configured for test_refuser");
    }
};

th_status create(const th_host_api* api, th_host* host, const th_option_value* values, std::uint32_t value_count,
                 void** instance, th_hook_result* result) noexcept {
    const char* mode = value_count == 1 && values[0].string_value ? values[0].string_value : "throw";
    if (std::strcmp(mode, "no_instance") == 0) {
        *instance = nullptr;
        return TH_OK;
    }
    if (std::strcmp(mode, "silent") == 0) return TH_ERROR;
    if (std::strcmp(mode, "unterminated") == 0) {
        std::memset(result->message, 'x', sizeof result->message);
        return TH_ERROR;
    }
    return trainhost::sdk::detail::create<Refuser>(api, host, values, value_count, instance, result);
}

const th_plugin_entry* entry() noexcept {
    static const th_plugin_entry e = [] {
        th_plugin_entry value = *trainhost::sdk::detail::entry_for<Refuser>();
        value.create = &create;
        return value;
    }();
    return &e;
}

}  // namespace

BOOST_DLL_ALIAS_SECTIONED(entry, trainhost_plugin_entry, thplugin)
