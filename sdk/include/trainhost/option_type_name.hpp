// An option type's name as the schema, inspect and every message spell it; one
// spelling for the SDK and the host.
#pragma once

#include "trainhost/abi.h"

namespace trainhost {

[[nodiscard]] inline const char* option_type_name(th_option_type type) noexcept {
    switch (type) {
    case TH_OPTION_BOOL: return "bool";
    case TH_OPTION_INT: return "int";
    case TH_OPTION_FLOAT: return "float";
    case TH_OPTION_STRING: return "string";
    }
    return "unknown";
}

}  // namespace trainhost
