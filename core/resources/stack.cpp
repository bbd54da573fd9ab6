// Allocation stacks through Boost.Stacktrace (libbacktrace): captured as raw frames
// at acquire time, symbolised only when a violation is printed.
#include "resources/lease.hpp"

#include <boost/stacktrace.hpp>
#include <sstream>

namespace trainhost::resources {

struct AllocationStack {
    boost::stacktrace::stacktrace frames;
};

std::shared_ptr<const AllocationStack> capture_stack() {
    // Skip this function and the ledger's acquire.
    return std::make_shared<AllocationStack>(AllocationStack{boost::stacktrace::stacktrace(2, 32)});
}

std::string format_stack(const AllocationStack& stack) {
    std::ostringstream out;
    std::size_t index = 0;
    for (const auto& frame : stack.frames) {
        out << "    #" << index++ << ' ' << frame.name();
        if (!frame.source_file().empty()) out << " at " << frame.source_file() << ':' << frame.source_line();
        out << '\n';
    }
    return out.str();
}

}  // namespace trainhost::resources
