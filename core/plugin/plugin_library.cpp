#include "plugin/plugin_library.hpp"

#include "errors.hpp"
#include "plugin/declarations.hpp"
#include "plugin/plugin_options.hpp"
#include "trainhost/nearest_name.hpp"

// library_info.hpp uses std::vector without including it (Boost 1.74).
#include <vector>
#ifndef BOOST_DLL_USE_STD_FS
#define BOOST_DLL_USE_STD_FS
#endif
#include <boost/dll/library_info.hpp>
#include <boost/dll/runtime_symbol_info.hpp>
#include <boost/dll/shared_library.hpp>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <fmt/format.h>
#include <sstream>
#include <tuple>

#ifndef TRAINHOST_BUILD_PLUGIN_DIR
#define TRAINHOST_BUILD_PLUGIN_DIR ""
#endif
#ifndef TRAINHOST_INSTALL_PLUGIN_DIR
#define TRAINHOST_INSTALL_PLUGIN_DIR ""
#endif
// The install plugin directory relative to the installed executable's directory
// (e.g. "../lib/trainhost/plugins"), so an install moved with --prefix still works.
#ifndef TRAINHOST_INSTALL_PLUGIN_RELDIR
#define TRAINHOST_INSTALL_PLUGIN_RELDIR ""
#endif

namespace trainhost::plugin {

namespace fs = std::filesystem;

namespace {

// <directory of this executable>/<TRAINHOST_INSTALL_PLUGIN_RELDIR> when that directory
// exists, that is when this executable runs from an install tree (wherever it was
// installed to); empty otherwise, e.g. in the build tree.
fs::path installed_plugin_dir() {
    const fs::path relative(TRAINHOST_INSTALL_PLUGIN_RELDIR);
    if (relative.empty()) return {};
    boost::dll::fs::error_code ec;
    const fs::path exe = boost::dll::program_location(ec);  // /proc/self/exe, symlinks resolved
    if (ec || exe.empty()) return {};
    const fs::path dir = (exe.parent_path() / relative).lexically_normal();
    std::error_code ignored;
    return fs::is_directory(dir, ignored) ? dir : fs::path();
}

}  // namespace

std::vector<fs::path> plugin_search_path() {
    std::vector<fs::path> dirs;
    auto add = [&](const fs::path& dir) {
        if (!dir.empty() && std::find(dirs.begin(), dirs.end(), dir) == dirs.end()) dirs.push_back(dir);
    };
    // An installed trainhost takes its plugins from its own install tree, never from
    // the build tree it was compiled in (which may be gone, or hold newer plugins).
    const fs::path installed = installed_plugin_dir();
    if (installed.empty()) add(TRAINHOST_BUILD_PLUGIN_DIR);
    if (const char* env = std::getenv("TRAINHOST_PLUGIN_PATH")) {
        std::stringstream entries(env);
        for (std::string entry; std::getline(entries, entry, ':');) add(entry);
    }
    add(installed.empty() ? fs::path(TRAINHOST_INSTALL_PLUGIN_DIR) : installed);
    return dirs;
}

namespace {

// "<file> is a link to <target>, which does not exist", or empty.
std::string dangling_link(const fs::path& file) {
    std::error_code ec;
    if (!fs::is_symlink(file, ec)) return {};
    // A loop of links is an error here, not a missing target.
    if (const bool there = fs::exists(file, ec); there || ec) return {};
    return fmt::format("{} is a link to {}, which does not exist", file.string(), fs::read_symlink(file, ec).string());
}

}  // namespace

fs::path resolve_plugin(std::string_view name_or_path, const std::vector<fs::path>& search_path) {
    const bool is_path = name_or_path.find('/') != std::string_view::npos || name_or_path.ends_with(".so");
    if (is_path) {
        fs::path file(name_or_path);
        std::error_code ec;
        const fs::file_status status = fs::status(file, ec);
        if (fs::is_directory(status))
            throw PluginLoadError(fmt::format("plugin file '{}' is a directory, not a shared library", file.string()));
        if (const std::string dangling = dangling_link(file); !dangling.empty())
            throw PluginLoadError(fmt::format("plugin file {}", dangling));
        // A device, a pipe or a socket is there, only not a file a library can be.
        if (fs::exists(status) && !fs::is_regular_file(status))
            throw PluginLoadError(fmt::format("plugin file '{}' is not a regular file, so no shared library",
                                              file.string()));
        if (!fs::is_regular_file(status))
            throw PluginLoadError(ec && ec != std::errc::no_such_file_or_directory
                                      ? fmt::format("plugin file '{}' cannot be read: {}", file.string(), ec.message())
                                      : fmt::format("plugin file '{}' not found", file.string()));
        return file;
    }
    std::string dangling;  // the first dangling link met, said if no later directory has the plugin
    for (const fs::path& dir : search_path) {
        fs::path file = dir / (std::string(name_or_path) + ".so");
        std::error_code ec;  // a name too long for a path is simply not there
        if (fs::is_regular_file(file, ec)) return file;
        if (dangling.empty()) dangling = dangling_link(file);
    }
    if (!dangling.empty()) throw PluginLoadError(fmt::format("plugin '{}': {}", name_or_path, dangling));
    std::vector<std::string> dirs;
    std::vector<std::string> there;  // the names the search path offers
    for (const fs::path& dir : search_path) {
        dirs.push_back(dir.string());
        std::error_code ec;
        for (fs::directory_iterator entry(dir, ec), end; !ec && entry != end; entry.increment(ec)) {
            std::error_code ignored;
            if (entry->path().extension() == ".so" && fs::is_regular_file(entry->path(), ignored))
                there.push_back(entry->path().stem().string());
        }
    }
    const std::optional<std::string> meant = nearest_name(name_or_path, there);
    throw PluginLoadError(fmt::format("plugin '{}' not found; searched: {} (add a directory with TRAINHOST_PLUGIN_PATH "
                                      "or give a path to the .so){}",
                                      name_or_path, dirs.empty() ? std::string("(empty search path)") : fmt::format("{}", fmt::join(dirs, ", ")),
                                      meant ? fmt::format("; did you mean '{}'?", *meant) : ""));
}

std::vector<std::string> split_names(const char* list) {
    std::vector<std::string> names;
    if (list == nullptr) return names;
    std::stringstream entries(list);
    for (std::string name; std::getline(entries, name, ',');) {
        name.erase(0, name.find_first_not_of(" \t"));
        name.erase(name.find_last_not_of(" \t") + 1);
        if (!name.empty()) names.push_back(name);
    }
    return names;
}

namespace {

// Reads the section table only; no code of the file runs.
void require_entry_section(const fs::path& file) {
    std::vector<std::string> symbols;
    try {
        boost::dll::library_info info(file);
        symbols = info.symbols(TH_ENTRY_SECTION);
    } catch (const std::exception& e) {
        // Boost.DLL's own text for a file that is not ELF is an iostream error.
        char magic[4] = {};
        std::ifstream stream(file, std::ios::binary);
        if (!stream)  // unreadable (permissions): not to be taken for a file that is no ELF
            throw PluginLoadError(fmt::format("{}: cannot read: {}", file.string(), std::strerror(errno)));
        stream.read(magic, sizeof magic);
        const bool elf = std::memcmp(magic, "\x7f" "ELF", sizeof magic) == 0;
        throw PluginLoadError(fmt::format("{}: not a plugin: {}", file.string(),
                                          elf ? fmt::format("a truncated or damaged ELF file (reading its section "
                                                            "table failed: {})",
                                                            e.what())
                                              : std::string("not a shared library (no ELF header)")));
    }
    if (std::find(symbols.begin(), symbols.end(), TH_ENTRY_SYMBOL) == symbols.end())
        throw PluginLoadError(fmt::format("{}: not a trainhost plugin: no '{}' symbol in section '{}' (was it built "
                                          "with TRAINHOST_PLUGIN from trainhost/sdk.hpp?)",
                                          file.string(), TH_ENTRY_SYMBOL, TH_ENTRY_SECTION));
}

bool valid_plugin_name(const char* name) {
    if (name == nullptr || *name == '\0') return false;
    for (const char* c = name; *c; ++c)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_')) return false;
    return true;
}

void check_entry(const fs::path& file, const th_plugin_entry* entry) {
    if (entry == nullptr) throw PluginLoadError(fmt::format("{}: plugin entry returned no description", file.string()));
    // abi_major/minor sit at the same offset in every version: read them before anything else.
    if (entry->abi_major != TH_ABI_MAJOR)
        throw PluginLoadError(fmt::format("{}: ABI mismatch: plugin was built for trainhost ABI {}.{}, this trainhost "
                                          "speaks ABI {}.{}; rebuild the plugin against this SDK",
                                          file.string(), entry->abi_major, entry->abi_minor, TH_ABI_MAJOR, TH_ABI_MINOR));
    if (entry->struct_size < sizeof(th_plugin_entry))
        throw PluginLoadError(fmt::format("{}: malformed plugin entry: struct_size {} is smaller than ABI {}'s {}",
                                          file.string(), entry->struct_size, TH_ABI_MAJOR, sizeof(th_plugin_entry)));
    if (!valid_plugin_name(entry->name))
        throw PluginLoadError(fmt::format("{}: plugin name '{}' is not made of a-z, 0-9 and _", file.string(),
                                          entry->name ? entry->name : ""));
    // The ledger, the leak lines and the verdict name trainhost's own leases so: a
    // plugin of that name would have its leaks read as the core's.
    if (std::string_view(entry->name) == "core")
        throw PluginLoadError(fmt::format("{}: plugin name 'core' is reserved: it names trainhost's own leases",
                                          file.string()));
    if (entry->create == nullptr || entry->destroy == nullptr || entry->vtable == nullptr)
        throw PluginLoadError(fmt::format("{}: plugin '{}' lacks create, destroy or its hook table", file.string(),
                                          entry->name));
    if (entry->option_count > 0 && entry->options == nullptr)
        throw PluginLoadError(fmt::format("{}: plugin '{}' declares {} options but no option table", file.string(),
                                          entry->name, entry->option_count));
    if (const std::string fault = option_schema_fault(*entry); !fault.empty())
        throw PluginLoadError(fmt::format("{}: {}", file.string(), fault));
    if (entry->vtable->struct_size < sizeof(th_plugin_vtable))
        throw PluginLoadError(fmt::format("{}: plugin '{}' has a hook table of {} bytes, ABI {} needs {}",
                                          file.string(), entry->name, entry->vtable->struct_size, TH_ABI_MAJOR,
                                          sizeof(th_plugin_vtable)));
    // Saved and never restored, or restored from nothing: a resume would not give the
    // plugin back its state, and validate's round trip would call through NULL.
    if ((entry->vtable->save_state == nullptr) != (entry->vtable->load_state == nullptr))
        throw PluginLoadError(fmt::format("{}: plugin '{}' has {} but no {}: a stateful plugin needs both",
                                          file.string(), entry->name,
                                          entry->vtable->save_state ? "save_state" : "load_state",
                                          entry->vtable->save_state ? "load_state" : "save_state"));
    // A plugin of a newer minor may use names this host does not know yet: they
    // order it, and no call of this host can write them.
    if (!declarations_checked(*entry) || entry->abi_minor > TH_ABI_MINOR) return;
    for (auto [list, field, names] : {std::tuple{DeclarationList::reads, "reads", entry->reads},
                                      std::tuple{DeclarationList::writes, "writes", entry->writes}})
        for (const std::string& name : split_names(names))
            if (std::string reason = unknown_declaration(name, list); !reason.empty())
                throw PluginLoadError(fmt::format("{}: plugin '{}' declares {} = \"{}\": {}", file.string(), entry->name,
                                                  field, names, reason));
}

// The dynamic loader's own words from Boost.DLL's wrapping of them ("load() failed
// (dlerror system message: FILE: undefined symbol: x): Bad file descriptor"), without
// the file, which the caller names first.
std::string loader_reason(const fs::path& file, std::string_view what) {
    constexpr std::string_view kOpen = "(dlerror system message: ";
    const std::size_t open = what.find(kOpen);
    const std::size_t close = what.rfind("): ") != std::string_view::npos ? what.rfind("): ") : what.rfind(')');
    if (open == std::string_view::npos || close == std::string_view::npos || close < open + kOpen.size())
        return std::string(what);
    std::string_view reason = what.substr(open + kOpen.size(), close - open - kOpen.size());
    // Boost.DLL loads a bare file name as ./NAME, which dlerror then names.
    for (const std::string& named : {file.string(), "./" + file.string()})
        if (const std::string prefix = named + ": "; reason.starts_with(prefix)) {
            reason.remove_prefix(prefix.size());
            break;
        }
    return std::string(reason);
}

}  // namespace

std::shared_ptr<PluginLibrary> PluginLibrary::load(const fs::path& file) {
    if (const std::string dangling = dangling_link(file); !dangling.empty()) throw PluginLoadError(dangling);
    require_entry_section(file);
    auto library = std::make_unique<boost::dll::shared_library>();
    try {
        library->load(file, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
    } catch (const std::exception& e) {
        throw PluginLoadError(fmt::format("{}: cannot load: {}", file.string(), loader_reason(file, e.what())));
    }
    const th_plugin_entry* entry = nullptr;
    try {
        auto& entry_function = library->get_alias<const th_plugin_entry*()>(TH_ENTRY_SYMBOL);
        entry = entry_function();
    } catch (const std::exception& e) {
        throw PluginLoadError(fmt::format("{}: cannot read the plugin entry: {}", file.string(), e.what()));
    } catch (...) {  // the C ABI's entry must not throw; a plugin's mistake is not the host's end
        throw PluginLoadError(fmt::format("{}: cannot read the plugin entry: its entry function threw something that "
                                          "is not a std::exception (an entry must not throw)",
                                          file.string()));
    }
    check_entry(file, entry);
    return std::shared_ptr<PluginLibrary>(new PluginLibrary(file, std::move(library), entry));
}

PluginLibrary::PluginLibrary(fs::path file, std::unique_ptr<boost::dll::shared_library> library,
                             const th_plugin_entry* entry)
    : file_(std::move(file)), library_(std::move(library)), entry_(entry) {}

PluginLibrary::~PluginLibrary() = default;

}  // namespace trainhost::plugin
