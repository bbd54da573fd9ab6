// One plugin shared library: found on the search path, recognised by its section
// table before any of its code runs, loaded with Boost.DLL, its entry checked.
#pragma once

#include "trainhost/abi.h"

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace boost::dll {
class shared_library;
}

namespace trainhost::plugin {

// Where named plugins are looked for, in order: the build's plugin directory,
// each entry of TRAINHOST_PLUGIN_PATH (colon-separated), the install directory.
[[nodiscard]] std::vector<std::filesystem::path> plugin_search_path();

// A name ("early_stopping") is looked up as <dir>/<name>.so; anything with a '/'
// or ending in ".so" is taken as a path. Throws PluginLoadError listing the path.
[[nodiscard]] std::filesystem::path resolve_plugin(std::string_view name_or_path,
                                                   const std::vector<std::filesystem::path>& search_path);

class PluginLibrary {
public:
    // Throws PluginLoadError: not a plugin, cannot be loaded, ABI mismatch, bad entry.
    static std::shared_ptr<PluginLibrary> load(const std::filesystem::path& file);

    PluginLibrary(const PluginLibrary&) = delete;
    PluginLibrary& operator=(const PluginLibrary&) = delete;
    ~PluginLibrary();

    [[nodiscard]] const th_plugin_entry& entry() const noexcept { return *entry_; }
    [[nodiscard]] const std::filesystem::path& file() const noexcept { return file_; }
    [[nodiscard]] std::string_view name() const noexcept { return entry_->name; }

private:
    PluginLibrary(std::filesystem::path file, std::unique_ptr<boost::dll::shared_library> library,
                  const th_plugin_entry* entry);

    std::filesystem::path file_;
    std::unique_ptr<boost::dll::shared_library> library_;
    const th_plugin_entry* entry_;
};

// The names a plugin lists in one of its comma-separated declarations.
[[nodiscard]] std::vector<std::string> split_names(const char* list);

}  // namespace trainhost::plugin
