// Words as the word-level tools (the word cache of the encoder, the noise of synthetic sources)
// see them: the runs of bytes between ASCII spaces.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

namespace nmt {

// Calls take(start, length) for each word of `line`.
template <typename Take>
void for_each_word(const std::string& line, Take take) {
  for (size_t start = 0; start < line.size();) {
    const size_t space = std::min(line.find(' ', start), line.size());
    if (space > start) take(start, space - start);
    start = space + 1;
  }
}

// The words of `line`, in order.
inline std::vector<std::string> words_of(const std::string& line) {
  std::vector<std::string> words;
  for_each_word(line, [&](size_t start, size_t length) { words.push_back(line.substr(start, length)); });
  return words;
}

}  // namespace nmt
