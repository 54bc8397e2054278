#include "util/format.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <iomanip>
#include <locale>
#include <sstream>

namespace nmt {

std::string format_double(double value) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  std::string text(buffer, result.ptr);
  if (text.find_first_of(".en") == std::string::npos) text += ".0";
  return text;
}

std::string format_fixed(double value, int decimals) {
  std::ostringstream stream;
  stream.imbue(std::locale::classic());
  stream << std::fixed << std::setprecision(decimals) << value;
  return stream.str();
}

std::string format_significant(double value) {
  std::ostringstream stream;
  stream.imbue(std::locale::classic());
  stream << std::setprecision(6) << value;  // the default float field: %.6g
  return stream.str();
}

std::string format_duration(double seconds) {
  const auto total = static_cast<int64_t>(std::max(0.0, seconds));
  std::ostringstream stream;
  stream << total / 3600 << ':' << std::setfill('0') << std::setw(2) << (total / 60) % 60 << ':' << std::setw(2)
         << total % 60;
  return stream.str();
}

std::string format_excerpt(const std::string& text, size_t limit) {
  return text.size() <= limit ? text : text.substr(0, limit) + "...";
}

}  // namespace nmt
