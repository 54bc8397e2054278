// Reading and checking text: parallel corpora for training, plain lines for translation.
#pragma once

#include <cstdint>
#include <functional>
#include <istream>
#include <string>
#include <vector>

namespace nmt {

class Vocabulary;

struct ParallelText {
  std::vector<std::string> source;
  std::vector<std::string> target;
};

struct CorpusStats {
  int64_t lines = 0;     // pairs read
  int64_t empty = 0;     // skipped: a side is empty
  int64_t too_long = 0;  // skipped: a side is over the length limit
  int64_t kept = 0;
};

// Reads a file's lines (without '\n' or a trailing '\r'), checking UTF-8. Throws
// std::runtime_error naming the file (and line) when it is missing or malformed.
std::vector<std::string> read_lines(const std::string& path);
// The same for an open stream (standard input); `name` stands for it in errors.
std::vector<std::string> read_lines(std::istream& in, const std::string& name);

// Streams every line pair of two parallel files, blank ones included, checking their line counts
// and UTF-8 (errors name the file and line, and the line counts).
void for_each_line_pair(const std::string& source_path, const std::string& target_path,
                        const std::function<void(std::string&, std::string&)>& take);

// Streams the pairs of parallel files (source_files[i] with target_files[i], in order), checking
// each file pair's line counts and UTF-8 (errors name the file and line) and skipping pairs with a
// blank side (counted in stats.lines and stats.empty). Calls `take(source, target)` for every other
// pair; it may move from them.
void for_each_pair(const std::vector<std::string>& source_files, const std::vector<std::string>& target_files,
                   CorpusStats& stats, const std::function<void(std::string&, std::string&)>& take);

// Reads a parallel corpus into memory (for_each_pair over one file pair).
ParallelText read_parallel(const std::string& source_path, const std::string& target_path, CorpusStats& stats);

// One training pair as subword ids, without BOS/EOS.
struct Example {
  std::vector<int64_t> source;
  std::vector<int64_t> target;
};

// Encodes pairs; those with a side longer than `max_length` subwords are dropped and counted.
std::vector<Example> encode_parallel(const ParallelText& text, const Vocabulary& source_vocabulary,
                                     const Vocabulary& target_vocabulary, int max_length, CorpusStats& stats);

}  // namespace nmt
