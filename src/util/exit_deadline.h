// A last resort for code that has decided to fail but must still call into something that can
// block for long on the way out: a store call to a rank 0 that is stopped (SIGSTOP) or cut off waits
// out the store's timeout, and a process group's destructor may wait for a peer that never answers.
#pragma once

#include <string>

namespace nmt {

// Unless the process has ended `seconds` from now, writes `message` as an error (as the command
// line would) and ends it with exit status 1, running no destructors. A later call replaces the
// deadline and the message.
void exit_unless_ended_within(double seconds, const std::string& message);

}  // namespace nmt
