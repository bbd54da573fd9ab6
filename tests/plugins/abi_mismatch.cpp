// Claims ABI major 99: the loader must refuse it, naming both versions, before
// creating anything.
#define BOOST_DLL_USE_STD_FS
#include <boost/dll/alias.hpp>
#include <trainhost/abi.h>

namespace {

const th_plugin_entry* entry() noexcept {
    static const th_plugin_entry e = [] {
        th_plugin_entry value{};
        value.struct_size = sizeof value;
        value.abi_major = 99;
        value.abi_minor = 3;
        value.name = "test_abi_mismatch";
        value.version = "1";
        value.description = "built for a future ABI";
        return value;
    }();
    return &e;
}

}  // namespace

BOOST_DLL_ALIAS_SECTIONED(entry, trainhost_plugin_entry, thplugin)
