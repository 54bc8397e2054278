// A last resort for code that has decided to fail but must still call into a library that can
// block without a timeout on the way out. c10d's TCPStore is one: its server reads each message of
// a client with blocking recv(), so a rank stopped (SIGSTOP) halfway through a message leaves rank
// 0's store server blocked for good, and with it every later store call and the store's destructor.
#pragma once

#include <string>

namespace nmt {

// Unless the process has ended `seconds` from now, writes `message` as an error (as the command
// line would) and ends it with exit status 1, running no destructors. A later call replaces the
// deadline and the message.
void exit_unless_ended_within(double seconds, const std::string& message);

}  // namespace nmt
