// libFuzzer target: the parallel-text reader. The input is split at its first NUL byte (or its
// middle) into a source and a target file, read as training and dev files are read (line
// counts, UTF-8, empty lines): refused with an exception naming the file, or read, never a
// crash.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_file.h"
#include "text/corpus.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto nul = static_cast<size_t>(std::find(data, data + size, uint8_t{0}) - data);
  const size_t split = nul < size ? nul : size / 2;
  const size_t skip = nul < size ? 1 : 0;  // the NUL itself
  const std::string source = nmt::fuzz::write_input("corpus.src", data, split);
  const std::string target = nmt::fuzz::write_input("corpus.tgt", data + split + skip, size - split - skip);
  try {
    nmt::CorpusStats stats;
    const nmt::ParallelText text = nmt::read_parallel(source, target, stats);
    if (text.source.size() != text.target.size()) __builtin_trap();
    nmt::read_lines(source);
  } catch (const std::exception&) {
  }
  return 0;
}
