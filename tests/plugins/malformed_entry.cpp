// A plugin entry broken in one way, chosen by MALFORMED_ENTRY at build time: the
// loader must refuse each with a message naming the fault, before creating
// anything, and never read past what the entry holds.
#define BOOST_DLL_USE_STD_FS
#include <boost/dll/alias.hpp>
#include <trainhost/abi.h>

#include <cstring>

namespace {

th_status create(const th_host_api*, th_host*, const th_option_value*, uint32_t, void** instance, th_hook_result*) {
    static int token = 0;
    *instance = &token;
    return TH_OK;
}

void destroy(void*) {}

const th_plugin_entry* entry() noexcept {
    static th_plugin_vtable vtable = [] {
        th_plugin_vtable value{};
        value.struct_size = sizeof value;
        if (std::strcmp(MALFORMED_ENTRY, "short_hook_table") == 0) value.struct_size = 8;
        return value;
    }();
    static const th_plugin_entry e = [] {
        th_plugin_entry value{};
        value.struct_size = sizeof value;
        value.abi_major = TH_ABI_MAJOR;
        value.abi_minor = TH_ABI_MINOR;
        value.name = "test_malformed_entry";
        value.version = "1";
        value.description = "an entry broken in one way";
        value.create = &create;
        value.destroy = &destroy;
        value.vtable = &vtable;
        const char* fault = MALFORMED_ENTRY;
        if (std::strcmp(fault, "no_option_table") == 0) value.option_count = 2;
        if (std::strcmp(fault, "bad_name") == 0) value.name = "Malformed-Entry";
        if (std::strcmp(fault, "no_create") == 0) value.create = nullptr;
        if (std::strcmp(fault, "short_entry") == 0) value.struct_size = 16;
        return value;
    }();
    if (std::strcmp(MALFORMED_ENTRY, "no_entry") == 0) return nullptr;
    return &e;
}

}  // namespace

BOOST_DLL_ALIAS_SECTIONED(entry, trainhost_plugin_entry, thplugin)
