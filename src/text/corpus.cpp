#include "text/corpus.h"

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "text/utf8.h"
#include "text/vocabulary.h"
#include "util/io.h"

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
  if (!in) {
    if (!std::filesystem::exists(path)) throw FileNotFound(path + ": file not found (check the path)");
    throw std::runtime_error(path + ": cannot open file (check the path)");
  }
  return read_lines(in, path);
}

void for_each_line_pair(const std::string& source_path, const std::string& target_path,
                        const std::function<void(std::string&, std::string&)>& take) {
  std::ifstream source_in(source_path, std::ios::binary), target_in(target_path, std::ios::binary);
  if (!source_in) throw std::runtime_error(source_path + ": cannot open file (check the path)");
  if (!target_in) throw std::runtime_error(target_path + ": cannot open file (check the path)");
  std::string source, target;
  int64_t line = 0;
  const auto next = [&line](std::istream& in, std::string& text, const std::string& path) {
    if (!std::getline(in, text)) {
      if (in.bad()) throw std::runtime_error(path + ": read error");
      return false;
    }
    if (!text.empty() && text.back() == '\r') text.pop_back();
    if (!is_valid_utf8(text)) {
      throw std::runtime_error(path + ":" + std::to_string(line + 1) +
                               ": invalid UTF-8; convert the file to UTF-8 (e.g. with iconv)");
    }
    return true;
  };
  while (true) {
    const bool has_source = next(source_in, source, source_path);
    const bool has_target = next(target_in, target, target_path);
    if (has_source != has_target) {
      // Count the rest of the longer file, for a message with both line counts.
      std::istream& longer = has_source ? source_in : target_in;
      int64_t rest = 1;
      for (std::string skipped; std::getline(longer, skipped);) ++rest;
      const int64_t source_lines = has_source ? line + rest : line;
      const int64_t target_lines = has_target ? line + rest : line;
      throw std::runtime_error(source_path + " has " + std::to_string(source_lines) + " lines but " + target_path +
                               " has " + std::to_string(target_lines) +
                               "; parallel files need one sentence per line on both sides");
    }
    if (!has_source) break;
    ++line;
    take(source, target);
  }
}

void for_each_pair(const std::vector<std::string>& source_files, const std::vector<std::string>& target_files,
                   CorpusStats& stats, const std::function<void(std::string&, std::string&)>& take) {
  if (source_files.size() != target_files.size()) {
    throw std::invalid_argument("train-source lists " + std::to_string(source_files.size()) +
                                " files but train-target " + std::to_string(target_files.size()) +
                                "; list the same number, pairs matched by position");
  }
  for (size_t file = 0; file < source_files.size(); ++file) {
    for_each_line_pair(source_files[file], target_files[file], [&](std::string& source, std::string& target) {
      ++stats.lines;
      if (source.find_first_not_of(" \t") == std::string::npos ||
          target.find_first_not_of(" \t") == std::string::npos) {
        ++stats.empty;
        return;
      }
      take(source, target);
    });
  }
}

ParallelText read_parallel(const std::string& source_path, const std::string& target_path, CorpusStats& stats) {
  ParallelText text;
  for_each_pair({source_path}, {target_path}, stats, [&text](std::string& source, std::string& target) {
    text.source.push_back(std::move(source));
    text.target.push_back(std::move(target));
  });
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
