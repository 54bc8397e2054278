#include "text/prepared_corpus.h"

#include <fcntl.h>
#include <glob.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "text/masking.h"
#include "text/special_tokens.h"
#include "util/io.h"
#include "util/runtime.h"

namespace nmt {
namespace {

namespace fs = std::filesystem;

constexpr char kStartMark[] = "NMTCORP1";
constexpr char kEndMark[] = "NMTCEND1";
constexpr size_t kMarkSize = 8;
constexpr size_t kTailSize = 16 + kMarkSize;  // JSON offset and length, end mark

// A read-only mapping of a whole file, unmapped when the last corpus using it goes.
class Mapping {
 public:
  explicit Mapping(const std::string& path) {
    const int descriptor = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (descriptor < 0) throw std::runtime_error(path + ": cannot open (" + std::strerror(errno) + ")");
    struct stat status {};
    if (::fstat(descriptor, &status) != 0) {
      ::close(descriptor);
      throw std::runtime_error(path + ": cannot read its size");
    }
    size_ = static_cast<size_t>(status.st_size);
    if (size_ > 0) {
      void* address = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, descriptor, 0);
      if (address == MAP_FAILED) {
        ::close(descriptor);
        throw std::runtime_error(path + ": cannot map (" + std::strerror(errno) + ")");
      }
      data_ = static_cast<const unsigned char*>(address);
    }
    ::close(descriptor);
  }
  ~Mapping() {
    if (data_ != nullptr) ::munmap(const_cast<unsigned char*>(data_), size_);
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;

  const unsigned char* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  const unsigned char* data_ = nullptr;
  size_t size_ = 0;
};

uint64_t read_u64(const unsigned char* at) {
  uint64_t value = 0;
  std::memcpy(&value, at, 8);
  return value;
}

void append_u64(std::string& out, uint64_t value) { out.append(reinterpret_cast<const char*>(&value), 8); }

nlohmann::json file_record(const std::string& path) {
  std::error_code error;
  const auto size = fs::file_size(path, error);
  if (error) throw std::runtime_error(path + ": cannot open file (check the path)");
  const auto modified = fs::last_write_time(path, error);
  if (error) throw std::runtime_error(path + ": cannot read its modification time");
  return {{"path", fs::absolute(path).lexically_normal().string()},
          {"size", size},
          {"modified_ns", modified.time_since_epoch().count()}};
}

nlohmann::json files_record(const std::vector<std::string>& paths) {
  nlohmann::json records = nlohmann::json::array();
  for (const auto& path : paths) records.push_back(file_record(path));
  return records;
}

// The header of a whole file, or a reason why the file is not one.
struct Header {
  nlohmann::json json;
  std::string problem;  // "" when json is the header
};

Header read_header(const Mapping& mapping) {
  const unsigned char* data = mapping.data();
  const size_t size = mapping.size();
  if (size < 16 + kTailSize || std::memcmp(data, kStartMark, kMarkSize) != 0) return {{}, "not a prepared corpus"};
  if (read_u64(data + kMarkSize) != kPreparedCorpusVersion) {
    return {{},
            "prepared by format version " + std::to_string(read_u64(data + kMarkSize)) + ", this is version " +
                std::to_string(kPreparedCorpusVersion)};
  }
  if (std::memcmp(data + size - kMarkSize, kEndMark, kMarkSize) != 0) return {{}, "truncated (no end mark)"};
  const uint64_t json_offset = read_u64(data + size - kTailSize);
  const uint64_t json_size = read_u64(data + size - kTailSize + 8);
  if (json_offset < 16 || json_offset > size - kTailSize || json_size != size - kTailSize - json_offset) {
    return {{}, "damaged (header position)"};
  }
  Header header;
  header.json = nlohmann::json::parse(data + json_offset, data + json_offset + json_size, nullptr, false);
  if (header.json.is_discarded() || !header.json.is_object()) return {{}, "damaged (header)"};
  return header;
}

// The recipe's tag of each file pair ("" for none).
std::vector<std::string> file_tags(const CorpusRecipe& recipe) {
  if (recipe.tags.empty()) return std::vector<std::string>(recipe.source_files.size());
  if (recipe.tags.size() != recipe.source_files.size()) {
    throw std::logic_error("CorpusRecipe: " + std::to_string(recipe.tags.size()) + " tags for " +
                           std::to_string(recipe.source_files.size()) + " file pairs");
  }
  return recipe.tags;
}

// One thread's encoders: its caches of both sides' words, kept from chunk to chunk.
struct PairEncoder {
  WordCachedEncoder source, target;
};

// Encodes `texts` into `out`, a share on each thread with its own PairEncoder.
void encode_chunk(const std::vector<std::pair<std::string, std::string>>& texts, std::vector<PairEncoder>& encoders,
                  std::vector<Example>& out) {
  out.assign(texts.size(), Example{});
  const size_t threads = encoders.size();
  const size_t per_thread = (texts.size() + threads - 1) / threads;
  run_in_parallel(threads, threads, [&](size_t thread) {
    const size_t begin = std::min(texts.size(), thread * per_thread), end = std::min(texts.size(), begin + per_thread);
    PairEncoder& encoder = encoders[thread];
    for (size_t i = begin; i < end; ++i) {
      out[i].source = encoder.source.encode(texts[i].first);
      out[i].target = encoder.target.encode(texts[i].second);
    }
  });
}

}  // namespace

std::vector<std::string> expand_file_list(const std::string& value, const std::string& key) {
  std::vector<std::string> files;
  size_t start = 0;
  while (start <= value.size()) {
    const size_t comma = std::min(value.find(',', start), value.size());
    const std::string item = value.substr(start, comma - start);
    start = comma + 1;
    if (item.empty()) continue;
    if (item.find_first_of("*?[") == std::string::npos) {
      files.push_back(item);
      continue;
    }
    glob_t matches{};
    const int result = ::glob(item.c_str(), 0, nullptr, &matches);
    std::vector<std::string> found(matches.gl_pathv, matches.gl_pathv + matches.gl_pathc);
    ::globfree(&matches);
    if (result != 0 || found.empty()) {
      throw std::invalid_argument(key + ": '" + item + "' matches no file (check the pattern)");
    }
    std::sort(found.begin(), found.end());
    files.insert(files.end(), found.begin(), found.end());
  }
  if (files.empty()) throw std::invalid_argument(key + ": no file given");
  return files;
}

uint64_t vocabulary_checksum(const Vocabulary& vocabulary) {
  uint64_t hash = 1469598103934665603ULL;  // FNV-1a, 64 bits
  for (const char byte : vocabulary.serialized()) {
    hash ^= static_cast<unsigned char>(byte);
    hash *= 1099511628211ULL;
  }
  return hash;
}

namespace {

// The source vocabulary's ids of each file pair's tags (none for ""; several separated by spaces,
// as CorpusSpec::source_tokens gives them), after checking that the recipe fits the vocabularies:
// as many target files as source files, every tag reserved, and the placeholder tokens there when
// pairs are to be masked.
std::vector<std::vector<int64_t>> checked_tag_ids(const CorpusRecipe& recipe, const std::vector<std::string>& tags,
                                                  const Vocabulary& source_vocabulary,
                                                  const Vocabulary& target_vocabulary) {
  if (recipe.source_files.size() != recipe.target_files.size()) {
    throw std::invalid_argument("train-source lists " + std::to_string(recipe.source_files.size()) +
                                " files but train-target " + std::to_string(recipe.target_files.size()) +
                                "; list the same number, pairs matched by position");
  }
  std::vector<std::vector<int64_t>> tag_ids;
  for (const std::string& tokens : tags) {
    tag_ids.emplace_back();
    std::istringstream words(tokens);
    for (std::string tag; words >> tag;) {
      tag_ids.back().push_back(source_vocabulary.tag_id(tag));
      if (tag_ids.back().back() == -1) {
        throw std::invalid_argument("train-tags or train-languages: " + tag +
                                    " is not reserved in the source vocabulary; tags and language tokens go into a "
                                    "vocabulary when it is trained (train-tags, train-languages or reserved-tags of "
                                    "the first run), so train a new model or leave the tag out");
      }
    }
  }
  if (recipe.placeholder_share > 0 && (source_vocabulary.placeholder_tokens() < kPlaceholderTokens ||
                                       target_vocabulary.placeholder_tokens() < kPlaceholderTokens)) {
    throw std::invalid_argument(
        "placeholder-share: the vocabularies hold no placeholder tokens; they go into a vocabulary when it is "
        "trained with placeholder-share above 0, so train a new model or set placeholder-share = 0");
  }
  return tag_ids;
}

}  // namespace

void prepare_corpus(const std::string& path, const CorpusRecipe& recipe, const Vocabulary& source_vocabulary,
                    const Vocabulary& target_vocabulary, int threads) {
  const int token_width = token_width_for(std::max(source_vocabulary.size(), target_vocabulary.size()));
  const std::vector<std::string> tags = file_tags(recipe);
  const std::vector<std::vector<int64_t>> tag_ids = checked_tag_ids(recipe, tags, source_vocabulary, target_vocabulary);
  // Before the files are read: one changed while it is read no longer matches what is recorded.
  const nlohmann::json source_files = files_record(recipe.source_files);
  const nlohmann::json target_files = files_record(recipe.target_files);
  const PairMasker masker(recipe.placeholder_share, recipe.placeholder_seed);
  int64_t masked = 0;
  write_via_temporary(path, [&](const std::string& temporary) {
    OutputFile out(temporary, path);
    uint64_t position = 0;
    const auto write = [&](const std::string& bytes) {
      out.write(bytes);
      position += bytes.size();
    };
    std::string start(kStartMark, kMarkSize);
    append_u64(start, kPreparedCorpusVersion);
    write(start);

    std::string table;  // offset and size of each shard
    uint64_t shards = 0, pairs = 0;
    std::vector<Example> pending;  // encoded pairs not yet in a shard
    const auto emit = [&](size_t count) {
      const std::vector<Example> shard_pairs(
          std::make_move_iterator(pending.begin()),
          std::make_move_iterator(pending.begin() + static_cast<std::ptrdiff_t>(count)));
      pending.erase(pending.begin(), pending.begin() + static_cast<std::ptrdiff_t>(count));
      const std::string shard = make_shard(shard_pairs, token_width);
      append_u64(table, position);
      append_u64(table, shard.size());
      write(shard);
      ++shards;
      pairs += count;
    };
    CorpusStats stats;
    std::vector<std::pair<std::string, std::string>> chunk;
    std::vector<Example> encoded;
    std::vector<PairEncoder> encoders;
    for (int thread = 0; thread < std::max(1, threads); ++thread) {
      encoders.push_back({WordCachedEncoder(source_vocabulary), WordCachedEncoder(target_vocabulary)});
    }
    std::vector<int64_t> file_pairs;  // kept per file pair
    const auto encode_and_emit = [&](const std::vector<int64_t>& file_tag_ids) {
      encode_chunk(chunk, encoders, encoded);
      chunk.clear();
      for (Example& pair : encoded) {
        if (pair.source.empty() || pair.target.empty()) {
          ++stats.empty;
          continue;
        }
        pair.source.insert(pair.source.begin(), file_tag_ids.begin(), file_tag_ids.end());
        pending.push_back(std::move(pair));
        ++file_pairs.back();
      }
      while (static_cast<int64_t>(pending.size()) >= kShardPairs) emit(static_cast<size_t>(kShardPairs));
    };
    for (size_t file = 0; file < recipe.source_files.size(); ++file) {
      file_pairs.push_back(0);
      for_each_pair({recipe.source_files[file]}, {recipe.target_files[file]}, stats,
                    [&](std::string& source, std::string& target) {
                      if (masker.mask(source, target, static_cast<uint64_t>(stats.lines))) ++masked;
                      chunk.emplace_back(std::move(source), std::move(target));
                      if (static_cast<int64_t>(chunk.size()) == kShardPairs) encode_and_emit(tag_ids[file]);
                    });
      encode_and_emit(tag_ids[file]);
    }
    if (!pending.empty()) emit(pending.size());

    const uint64_t table_offset = position;
    write(table);
    const nlohmann::json header = {{"token_width", token_width},
                                   {"shards", shards},
                                   {"shard_table", table_offset},
                                   {"pairs", pairs},
                                   {"lines", stats.lines},
                                   {"empty", stats.empty},
                                   {"source_vocabulary", vocabulary_checksum(source_vocabulary)},
                                   {"target_vocabulary", vocabulary_checksum(target_vocabulary)},
                                   {"vocabulary_settings", recipe.vocabulary_settings},
                                   {"source_files", source_files},
                                   {"target_files", target_files},
                                   {"file_tags", tags},
                                   {"placeholder_share", recipe.placeholder_share},
                                   {"placeholder_seed", recipe.placeholder_share > 0 ? recipe.placeholder_seed : 0},
                                   {"masked_pairs", masked},
                                   {"file_pairs", file_pairs}};
    const std::string json = header.dump();
    const uint64_t json_offset = position;
    write(json);
    std::string tail;
    append_u64(tail, json_offset);
    append_u64(tail, json.size());
    tail.append(kEndMark, kMarkSize);
    write(tail);
    out.close();
  });
}

std::optional<PreparedCorpus> open_prepared_corpus(const std::string& path, const CorpusRecipe& recipe,
                                                   const Vocabulary& source_vocabulary,
                                                   const Vocabulary& target_vocabulary, std::string& why) {
  if (!fs::exists(path)) {
    why = "not prepared yet";
    return std::nullopt;
  }
  try {
    // One mapping, checked and then used: another run replacing the file in between cannot mix.
    auto mapping = std::make_shared<Mapping>(path);
    const Header header = read_header(*mapping);
    if (!header.problem.empty()) {
      why = header.problem;
      return std::nullopt;
    }
    const nlohmann::json& json = header.json;
    if (json.at("source_files") != files_record(recipe.source_files) ||
        json.at("target_files") != files_record(recipe.target_files)) {
      why = "the training text changed (another file list, size or modification time)";
      return std::nullopt;
    }
    if (json.at("file_tags").get<std::vector<std::string>>() != file_tags(recipe)) {
      why = "the corpora's tags changed";
      return std::nullopt;
    }
    if (json.value("placeholder_share", 0.0) != recipe.placeholder_share ||
        json.value("placeholder_seed", 0) != (recipe.placeholder_share > 0 ? recipe.placeholder_seed : 0)) {
      why = "placeholder-share changed";
      return std::nullopt;
    }
    if (json.at("source_vocabulary").get<uint64_t>() != vocabulary_checksum(source_vocabulary) ||
        json.at("target_vocabulary").get<uint64_t>() != vocabulary_checksum(target_vocabulary)) {
      why = "the vocabulary changed";
      return std::nullopt;
    }
    const auto damaged = [](const std::string& what) { return std::runtime_error("damaged (" + what + ")"); };
    const auto shards = json.at("shards").get<uint64_t>();
    const auto table = json.at("shard_table").get<uint64_t>();
    const int token_width = json.at("token_width").get<int>();
    const size_t size = mapping->size();
    if (token_width != 1 && token_width != 2 && token_width != 4) throw damaged("token width");
    if (table > size || shards > (size - table) / 16) throw damaged("shard table");
    std::vector<std::pair<const unsigned char*, size_t>> views;
    for (uint64_t shard = 0; shard < shards; ++shard) {
      const uint64_t offset = read_u64(mapping->data() + table + 16 * shard);
      const uint64_t bytes = read_u64(mapping->data() + table + 16 * shard + 8);
      if (offset % 8 != 0 || offset > table || bytes > table - offset) throw damaged("shard position");
      views.emplace_back(mapping->data() + offset, bytes);
    }
    PreparedCorpus prepared;
    prepared.lines = json.at("lines").get<int64_t>();
    prepared.empty = json.at("empty").get<int64_t>();
    prepared.vocabulary_settings = json.at("vocabulary_settings").get<std::string>();
    prepared.file_pairs = json.at("file_pairs").get<std::vector<int64_t>>();
    prepared.masked = json.value("masked_pairs", int64_t{0});
    int64_t listed = 0;
    for (const int64_t count : prepared.file_pairs) {
      if (count < 0) throw damaged("pairs per file");
      listed += count;
    }
    if (prepared.file_pairs.size() != recipe.source_files.size() || listed != json.at("pairs").get<int64_t>()) {
      throw damaged("pairs per file");
    }
    prepared.corpus = TokenCorpus(views, token_width, mapping, "prepared corpus");
    if (static_cast<uint64_t>(prepared.corpus.size()) != json.at("pairs").get<uint64_t>()) throw damaged("pair count");
    return prepared;
  } catch (const nlohmann::json::exception& error) {
    why = std::string("damaged (header: ") + error.what() + ")";
  } catch (const std::runtime_error& error) {
    why = error.what();
  }
  return std::nullopt;
}

std::string why_stale(const std::string& path, const CorpusRecipe& recipe, const Vocabulary& source_vocabulary,
                      const Vocabulary& target_vocabulary) {
  std::string why;
  return open_prepared_corpus(path, recipe, source_vocabulary, target_vocabulary, why) ? "" : why;
}

}  // namespace nmt
