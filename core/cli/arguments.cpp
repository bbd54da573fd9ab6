#include "cli/arguments.hpp"

#include "errors.hpp"
#include "trainhost/nearest_name.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <set>
#include <sstream>

namespace trainhost::cli {

// "progress, early_stopping" names two plugins, as a reader of it would expect (the
// option's check has refused empty names).
std::vector<std::string> split_list(const std::string& list) {
    std::vector<std::string> items;
    std::stringstream entries(list);
    for (std::string item; std::getline(entries, item, ',');) {
        const auto first = item.find_first_not_of(" \t");
        if (first == std::string::npos) continue;
        items.push_back(item.substr(first, item.find_last_not_of(" \t") - first + 1));
    }
    return items;
}

// A whole number in [low, high], checked before the conversion (a transform, so that
// the number converted is the decimal one checked): CLI11's own Range
// calls "x" out of range, and an unsigned parse would wrap -1 to 2^64-1. The seed
// takes the config file's range, so it is the same number whichever way it was given.
CLI::Validator integer_in(std::int64_t low, std::int64_t high) {
    return CLI::Validator(
        [low, high](std::string& text) {
            std::int64_t value = 0;
            const char* end = text.data() + text.size();
            const auto [stop, error] = std::from_chars(text.data(), end, value);
            if (text.empty() || stop != end || (error != std::errc() && error != std::errc::result_out_of_range))
                return fmt::format("'{}' is not an integer", printable(text));
            if (error == std::errc::result_out_of_range || value < low || value > high)
                return fmt::format("{} is out of range [{}, {}]", printable(text), low, high);
            // CLI11 converts with strtoll's base 0 afterwards, which reads 010 as octal 8:
            // it is handed the decimal number checked here.
            text = std::to_string(value);
            return std::string();
        },
        fmt::format("INT in [{}, {}]", low, high));
}

// CLI11 lists the arguments it did not expect last first, and suggests nothing: the
// first unknown option as it was given, with the known one most like it (--max_steps,
// as the config file spells the key, is --max-steps here), among the options of the
// command given (validate's for `trainhost validate ...`). None for a stray value.
std::optional<std::string> unexpected_arguments(CLI::App& app, int argc, char** argv) {
    const std::vector<CLI::App*> given = app.get_subcommands();
    const CLI::App& command = given.empty() ? app : *given.front();
    std::vector<std::string> known;
    for (const CLI::Option* option : command.get_options()) {
        for (const std::string& name : option->get_lnames()) known.push_back("--" + name);
        for (const std::string& name : option->get_snames()) known.push_back("-" + name);
    }
    int first = 1;  // the arguments after the command's name
    while (!given.empty() && first < argc && argv[first] != command.get_name()) ++first;
    for (int i = given.empty() ? 1 : first + 1; i < argc; ++i) {
        const std::string_view argument = argv[i];
        if (argument == "--") break;
        // A value, a negative number among them (--max-steps -1).
        if (argument.size() < 2 || argument[0] != '-' || std::isdigit(static_cast<unsigned char>(argument[1])) != 0)
            continue;
        const std::string name(argument.substr(0, argument.find('=')));
        if (name.find_first_not_of('-') == std::string::npos || std::find(known.begin(), known.end(), name) != known.end())
            continue;
        // Alike by their names, not by the dashes all of them share.
        std::vector<std::string> bare;
        for (const std::string& option : known) bare.push_back(option.substr(option.find_first_not_of('-')));
        const std::optional<std::string> meant = nearest_name(name.substr(name.find_first_not_of('-')), bare);
        const auto spelt = meant ? std::find(bare.begin(), bare.end(), *meant) - bare.begin() : 0;
        return fmt::format("unknown option '{}'{}", printable(name),
                           meant ? fmt::format("; did you mean '{}'?", known[static_cast<std::size_t>(spelt)])
                                 : std::string());
    }
    return std::nullopt;
}

// max_steps: -1 (no limit) or a count of steps; 0 would train nothing, as --epochs 0 says.
CLI::Validator a_step_limit() {
    const CLI::Validator in_range = integer_in(-1, INT64_MAX);
    return CLI::Validator(
        [in_range](std::string& text) {
            std::string why = in_range(text);
            if (why.empty() && std::stoll(text) == 0) why = "0 would train nothing (--epochs 0 does that); -1 sets no limit";
            return why;
        },
        "INT: -1, or 1 or more");
}

// An empty name (a doubled, leading or trailing comma, or only blanks) is a slip, not
// a wish for one plugin fewer: "--plugins=progress," would otherwise run without the
// plugin the user was about to name.
CLI::Validator a_plugin_list() {
    return CLI::Validator(
        [](std::string& text) {
            for (std::size_t start = 0;;) {
                const std::size_t comma = text.find(',', start);
                if (text.substr(start, comma - start).find_first_not_of(" \t") == std::string::npos)
                    return fmt::format("'{}' has an empty plugin name (names are separated by single commas)",
                                       printable(text));
                if (comma == std::string::npos) return std::string();
                start = comma + 1;
            }
        },
        "");
}

// An option that takes a path: given empty (`--report ''`, an unset shell variable)
// it would silently mean "none".
CLI::Validator a_path() {
    return CLI::Validator([](std::string& text) { return text.empty() ? std::string("needs a path, not ''") : std::string(); },
                          "");
}

// `inspect ''` is the same slip as `--plugins=''`: a usage error, not a plugin looked for.
CLI::Validator a_plugin_name() {
    return CLI::Validator(
        [](std::string& text) {
            return text.find_first_not_of(" \t") == std::string::npos
                       ? fmt::format("needs a plugin name or a path to its .so, not '{}'", printable(text))
                       : std::string();
        },
        "");
}

namespace {

// Whether `name` ("--report") is an option of the app or a subcommand that takes a value.
bool takes_value(CLI::App& app, const std::string& name) {
    std::vector<CLI::App*> apps = app.get_subcommands([](CLI::App*) { return true; });
    apps.push_back(&app);
    return std::any_of(apps.begin(), apps.end(), [&](CLI::App* each) {
        const CLI::Option* option = each->get_option_no_throw(name);
        return option != nullptr && option->get_items_expected_max() > 0;
    });
}

}  // namespace

// CLI11 reads "--report=" as "--report" still waiting for its value, and takes the
// next argument whatever it is: "--report= --epochs 3" would report to "--epochs" and
// refuse the 3. Given apart, as "--report ''", the empty value meets the option's own
// check, also where the value may be left out ("--fast-dev-run=" would otherwise be
// "--fast-dev-run", 1); a flag's "--verbose=" stays as it is, for CLI11 to refuse. The arguments come
// back in the reverse order CLI11's parse(vector) takes.
std::vector<std::string> arguments_for_parse(CLI::App& app, int argc, char** argv) {
    std::vector<std::string> arguments;
    bool options_ended = false;  // after "--" an argument is a value, whatever it looks like
    for (int i = 1; i < argc; ++i) {
        std::string argument = argv[i];
        options_ended = options_ended || argument == "--";
        if (!options_ended && argument.starts_with("--") && argument.size() > 3 &&
            argument.find('=') == argument.size() - 1 && takes_value(app, argument.substr(0, argument.size() - 1))) {
            argument.pop_back();
            arguments.push_back(std::move(argument));
            arguments.emplace_back();
        } else {
            arguments.push_back(std::move(argument));
        }
    }
    std::reverse(arguments.begin(), arguments.end());
    return arguments;
}

// The arguments CLI11 did not expect, in the order they were typed, less the first
// "--", which ends the options. CLI11 lists them backwards (as it was handed them),
// a subcommand's after the command's, and keeps that "--" only without a subcommand.
std::string stray_arguments(CLI::App& app, const CLI::ExtrasError& error, int argc, char** argv) {
    const std::vector<std::string> remaining = app.remaining(true);
    std::multiset<std::string> left(remaining.begin(), remaining.end());
    const std::vector<std::string> typed(argv + 1, argv + argc);
    const bool marker_kept = left.count("--") == static_cast<std::size_t>(std::ranges::count(typed, "--"));
    std::vector<std::string> stray;
    bool options_ended = false;
    for (const std::string& argument : typed) {
        if (argument == "--" && !options_ended) {
            options_ended = true;
            if (marker_kept) left.erase(left.find("--"));
            continue;
        }
        if (const auto found = left.find(argument); found != left.end()) {
            stray.push_back(argument);
            left.erase(found);
        }
    }
    if (stray.empty()) return error.what();
    std::vector<std::string> quoted;
    for (const std::string& argument : stray) quoted.push_back("'" + printable(argument) + "'");
    return fmt::format("unexpected argument{} {} (not an option, nor a value an option takes)",
                       stray.size() == 1 ? "" : "s", fmt::join(quoted, " "));
}
}  // namespace trainhost::cli
