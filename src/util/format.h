// Numbers as text, the same way everywhere they are written for people or files.
#pragma once

#include <cstddef>
#include <string>

namespace nmt {

// The shortest text that reads back as the same double, always with a '.', 'e' or "n" so that TOML
// reads it as a float: 0.001, 1.0, 1e-05.
std::string format_double(double value);

// printf's %.Nf: format_fixed(41.237, 2) == "41.24".
std::string format_fixed(double value, int decimals);

// printf's %.6g (6 significant digits), in the classic locale: 0.123457, 1e-05.
std::string format_significant(double value);

// A value from a file or a request as a message quotes it: at most its first `limit` bytes, then
// "..." when there were more, so that a message never echoes a long value whole.
std::string format_excerpt(const std::string& text, size_t limit = 60);

// H:MM:SS for a non-negative number of seconds (negative counts as 0).
std::string format_duration(double seconds);

}  // namespace nmt
