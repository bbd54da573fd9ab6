// trainhost inspect PLUGIN: what a plugin declares, read from its entry alone.
#pragma once

#include <iosfwd>
#include <string>

namespace trainhost::cli {

struct InspectOptions {
    std::string plugin;  // a name or a path, resolved as --plugins does
    bool json = false;   // machine-readable output
};

// Resolves and loads the plugin exactly as training does, then prints its name,
// version, file, ABI version, description, order and access declarations, state
// version, hooks and option schema. No instance is created and no hook runs.
// Returns 0; throws PluginLoadError (exit 2) with the loader's own messages.
int inspect_plugin(const InspectOptions& options, std::ostream& out);

// An entry's optional text (its version or description), or `fallback` where the plugin gives none.
std::string entry_text(const char* text, const char* fallback);

}  // namespace trainhost::cli
