// Writing a file whole or not at all: its parts go to a temporary file beside it,
// which is flushed to disk and renamed over the target, and then the directory entry
// is made durable. A reader finds the old file or the new one, never half of one.
#pragma once

#include <filesystem>
#include <initializer_list>
#include <string_view>

namespace trainhost::files {

// The most a temporary name's number goes to: a name needs up to 3 bytes more than
// `file` + `temporary_suffix` (".99").
inline constexpr int kMostTemporaryNumber = 99;

// The temporary file is `file` + `temporary_suffix`, or, where a file is already
// there (never replaced), that name with ".1", ".2", ... ".99" after it. Throws
// std::runtime_error naming the file and the system's reason ("cannot write
// out.json.tmp: No space left on device"); the temporary file is gone by then.
void write_atomically(const std::filesystem::path& file, std::string_view temporary_suffix,
                      std::initializer_list<std::string_view> parts);

}  // namespace trainhost::files
