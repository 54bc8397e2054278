#include "text/corpus.h"

#include <fstream>
#include <stdexcept>

#include "text/utf8.h"
#include "text/vocabulary.h"

namespace nmt {

std::vector<std::string> read_lines(std::istream& in, const std::string& name) {
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!is_valid_utf8(line)) {
      throw std::runtime_error(name + ":" + std::to_string(lines.size() + 1) +
                               ": invalid UTF-8; convert the file to UTF-8 (e.g. with iconv)");
    }
    lines.push_back(std::move(line));
  }
  if (in.bad()) throw std::runtime_error(name + ": read error");
  return lines;
}

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open file (check the path)");
  return read_lines(in, path);
}

ParallelText read_parallel(const std::string& source_path, const std::string& target_path, CorpusStats& stats) {
  std::vector<std::string> source = read_lines(source_path);
  std::vector<std::string> target = read_lines(target_path);
  if (source.size() != target.size()) {
    throw std::runtime_error(source_path + " has " + std::to_string(source.size()) + " lines but " + target_path +
                             " has " + std::to_string(target.size()) +
                             "; a parallel corpus needs one sentence per line on both sides");
  }
  ParallelText text;
  stats.lines += static_cast<int64_t>(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i].find_first_not_of(" \t") == std::string::npos ||
        target[i].find_first_not_of(" \t") == std::string::npos) {
      ++stats.empty;
      continue;
    }
    text.source.push_back(std::move(source[i]));
    text.target.push_back(std::move(target[i]));
  }
  return text;
}

std::vector<Example> encode_parallel(const ParallelText& text, const Vocabulary& source_vocabulary,
                                     const Vocabulary& target_vocabulary, int max_length, CorpusStats& stats) {
  std::vector<Example> examples;
  examples.reserve(text.source.size());
  for (size_t i = 0; i < text.source.size(); ++i) {
    Example example{source_vocabulary.encode(text.source[i]), target_vocabulary.encode(text.target[i])};
    const auto limit = static_cast<size_t>(max_length);
    if (example.source.empty() || example.target.empty()) {
      ++stats.empty;
    } else if (example.source.size() > limit || example.target.size() > limit) {
      ++stats.too_long;
    } else {
      examples.push_back(std::move(example));
    }
  }
  stats.kept += static_cast<int64_t>(examples.size());
  return examples;
}

}  // namespace nmt
