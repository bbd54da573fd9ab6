// Claims ABI major 99 (or, built with TEST_ABI_MAJOR and TEST_ABI_MINOR, another
// version): the loader must refuse it, naming both versions, before creating anything.
#define BOOST_DLL_USE_STD_FS
#include <boost/dll/alias.hpp>
#include <trainhost/abi.h>

#ifndef TEST_ABI_MAJOR
#define TEST_ABI_MAJOR 99
#define TEST_ABI_MINOR 3
#endif
#ifndef TEST_PLUGIN_NAME
#define TEST_PLUGIN_NAME "test_abi_mismatch"
#endif

namespace {

const th_plugin_entry* entry() noexcept {
    static const th_plugin_entry e = [] {
        th_plugin_entry value{};
        value.struct_size = sizeof value;
        value.abi_major = TEST_ABI_MAJOR;
        value.abi_minor = TEST_ABI_MINOR;
        value.name = TEST_PLUGIN_NAME;
        value.version = "1";
        value.description = "built for another ABI major";
        return value;
    }();
    return &e;
}

}  // namespace

BOOST_DLL_ALIAS_SECTIONED(entry, trainhost_plugin_entry, thplugin)
