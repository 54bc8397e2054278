#include "search/shortlist.h"

#include <torch/torch.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "text/prepared_corpus.h"
#include "text/special_tokens.h"
#include "util/io.h"

namespace nmt {
namespace {

constexpr char kMagic[] = "NMTSLST1";
constexpr char kEndMark[] = "NMTSEND1";
constexpr size_t kMarkSize = 8;
// Pairs whose (source, target) co-occurrences are sorted and merged into the totals at a time.
constexpr int64_t kCountChunkPairs = 1 << 15;

// Sentence co-occurrence counts: sorted keys source << 32 | target, with their counts.
struct PairCounts {
  std::vector<uint64_t> keys;
  std::vector<uint32_t> counts;
};

// Sorts `chunk` (keys, one per co-occurrence) and merges its runs into `total`.
void merge_chunk(std::vector<uint64_t>& chunk, PairCounts& total) {
  std::sort(chunk.begin(), chunk.end());
  PairCounts merged;
  merged.keys.reserve(total.keys.size() + chunk.size() / 4);
  merged.counts.reserve(merged.keys.capacity());
  size_t i = 0, j = 0;
  while (i < total.keys.size() || j < chunk.size()) {
    uint64_t key = 0;
    uint32_t count = 0;
    if (j == chunk.size() || (i < total.keys.size() && total.keys[i] <= chunk[j])) {
      key = total.keys[i];
      count = total.counts[i++];
    } else {
      key = chunk[j];
    }
    for (; j < chunk.size() && chunk[j] == key; ++j) ++count;
    merged.keys.push_back(key);
    merged.counts.push_back(count);
  }
  total = std::move(merged);
  chunk.clear();
}

// The distinct ids of `ids` below `size`, sorted.
std::vector<uint32_t> distinct(const std::vector<int64_t>& ids, int64_t size) {
  std::vector<uint32_t> result;
  result.reserve(ids.size());
  for (const int64_t id : ids) {
    if (id >= 0 && id < size) result.push_back(static_cast<uint32_t>(id));
  }
  std::sort(result.begin(), result.end());
  result.erase(std::unique(result.begin(), result.end()), result.end());
  return result;
}

template <typename T>
void append_array(std::string& bytes, const std::vector<T>& values) {
  bytes.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

// Reads a file's parts in order; any read past the end is a truncated file.
class Reader {
 public:
  Reader(const std::string& bytes, const std::string& path) : bytes_(bytes), path_(path) {}
  const char* take(size_t size) {
    if (size > bytes_.size() - at_) damaged("truncated");
    const char* data = bytes_.data() + at_;
    at_ += size;
    return data;
  }
  uint64_t number() {
    uint64_t value = 0;
    std::memcpy(&value, take(sizeof value), sizeof value);
    return value;
  }
  std::vector<uint32_t> ids(uint64_t count) {
    if (count > (bytes_.size() - at_) / sizeof(uint32_t)) damaged("truncated");
    std::vector<uint32_t> values(count);
    std::memcpy(values.data(), take(count * sizeof(uint32_t)), count * sizeof(uint32_t));
    return values;
  }
  size_t left() const { return bytes_.size() - at_; }
  [[noreturn]] void damaged(const std::string& why) const {
    throw std::runtime_error("shortlist " + path_ + ": " + why +
                             ", not a whole shortlist file: make it again with nmt shortlist");
  }

 private:
  const std::string& bytes_;
  const std::string& path_;
  size_t at_ = 0;
};

std::string hex(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

}  // namespace

Shortlist Shortlist::build(const TokenCorpus& corpus, const Vocabulary& source_vocabulary,
                           const Vocabulary& target_vocabulary, const ShortlistSizes& sizes,
                           const std::string& origin) {
  if (sizes.translations < 0 || sizes.frequent < 0 || sizes.max_pairs < 1 || sizes.batch_sentences < 0) {
    throw std::invalid_argument(
        "shortlist: --translations, --frequent and --batch-sentences must be >= 0 and --max-pairs >= 1");
  }
  Shortlist shortlist;
  shortlist.source_ = {source_vocabulary.size(), vocabulary_checksum(source_vocabulary)};
  shortlist.target_ = {target_vocabulary.size(), vocabulary_checksum(target_vocabulary)};
  shortlist.sizes_ = sizes;
  shortlist.origin_ = origin;
  const int64_t source_size = shortlist.source_.size, target_size = shortlist.target_.size;

  // c(s) and c(t): pairs holding the subword; token counts of the target side for the frequent list.
  std::vector<uint32_t> source_pairs(static_cast<size_t>(source_size)), target_pairs(static_cast<size_t>(target_size));
  std::vector<uint64_t> target_tokens(static_cast<size_t>(target_size));
  PairCounts together;
  std::vector<uint64_t> chunk;
  const int64_t pairs = std::min(corpus.size(), sizes.max_pairs);
  for (int64_t i = 0; i < pairs; ++i) {
    const int64_t pair = pairs == corpus.size() ? i : i * corpus.size() / pairs;  // evenly spread
    const std::vector<uint32_t> sources = distinct(corpus.source(pair), source_size);
    const std::vector<int64_t> target_ids = corpus.target(pair);
    for (const int64_t id : target_ids) {
      if (id >= 0 && id < target_size) ++target_tokens[static_cast<size_t>(id)];
    }
    const std::vector<uint32_t> targets = distinct(target_ids, target_size);
    for (const uint32_t s : sources) ++source_pairs[s];
    for (const uint32_t t : targets) ++target_pairs[t];
    for (const uint32_t s : sources) {
      for (const uint32_t t : targets) chunk.push_back(uint64_t{s} << 32 | t);
    }
    if ((i + 1) % kCountChunkPairs == 0) merge_chunk(chunk, together);
  }
  merge_chunk(chunk, together);
  shortlist.pairs_ = pairs;

  // The most frequent target subwords (ties: the lower id), the special ones left out: every list has them.
  std::vector<uint32_t> by_frequency;
  for (int64_t t = kEosId + 1; t < target_size; ++t) {
    if (target_tokens[static_cast<size_t>(t)] > 0) by_frequency.push_back(static_cast<uint32_t>(t));
  }
  const auto more_frequent = [&](uint32_t a, uint32_t b) {
    return target_tokens[a] != target_tokens[b] ? target_tokens[a] > target_tokens[b] : a < b;
  };
  const size_t frequent = std::min(by_frequency.size(), static_cast<size_t>(sizes.frequent));
  std::partial_sort(by_frequency.begin(), by_frequency.begin() + static_cast<std::ptrdiff_t>(frequent),
                    by_frequency.end(), more_frequent);
  shortlist.frequent_.assign(by_frequency.begin(), by_frequency.begin() + static_cast<std::ptrdiff_t>(frequent));

  // Each source subword's best targets by Dice, then frequency, then id.
  shortlist.offsets_.assign(1, 0);
  struct Scored {
    double dice;
    uint32_t target;
  };
  std::vector<Scored> scored;
  size_t at = 0;
  for (int64_t s = 0; s < source_size; ++s) {
    scored.clear();
    for (; at < together.keys.size() && static_cast<int64_t>(together.keys[at] >> 32) == s; ++at) {
      const auto t = static_cast<uint32_t>(together.keys[at] & 0xffffffffu);
      if (t <= kEosId) continue;
      const double dice =
          2.0 * together.counts[at] / (static_cast<double>(source_pairs[static_cast<size_t>(s)]) + target_pairs[t]);
      scored.push_back({dice, t});
    }
    const size_t keep = std::min(scored.size(), static_cast<size_t>(sizes.translations));
    std::partial_sort(scored.begin(), scored.begin() + static_cast<std::ptrdiff_t>(keep), scored.end(),
                      [&](const Scored& a, const Scored& b) {
                        return a.dice != b.dice ? a.dice > b.dice : more_frequent(a.target, b.target);
                      });
    for (size_t k = 0; k < keep; ++k) shortlist.lists_.push_back(scored[k].target);
    shortlist.offsets_.push_back(static_cast<uint32_t>(shortlist.lists_.size()));
  }
  return shortlist;
}

void Shortlist::write(const std::string& path) const {
  const nlohmann::json header = {{"source_vocabulary", {{"size", source_.size}, {"checksum", hex(source_.checksum)}}},
                                 {"target_vocabulary", {{"size", target_.size}, {"checksum", hex(target_.checksum)}}},
                                 {"translations", sizes_.translations},
                                 {"frequent", sizes_.frequent},
                                 {"max_pairs", sizes_.max_pairs},
                                 {"batch_sentences", sizes_.batch_sentences},
                                 {"pairs", pairs_},
                                 {"frequent_ids", frequent_.size()},
                                 {"list_ids", lists_.size()},
                                 {"made_for", origin_}};
  const std::string text = header.dump();
  std::string bytes(kMagic, kMarkSize);
  const uint64_t version = kShortlistVersion, length = text.size();
  bytes.append(reinterpret_cast<const char*>(&version), sizeof version);
  bytes.append(reinterpret_cast<const char*>(&length), sizeof length);
  bytes += text;
  append_array(bytes, frequent_);
  append_array(bytes, offsets_);
  append_array(bytes, lists_);
  bytes.append(kEndMark, kMarkSize);
  write_file_atomic(path, bytes);
}

Shortlist Shortlist::read(const std::string& path) {
  if (!file_exists(path)) throw FileNotFound("shortlist " + path + ": file not found (check the path)");
  const std::string bytes = read_file(path);
  Reader reader(bytes, path);
  if (bytes.size() < kMarkSize || std::memcmp(bytes.data(), kMagic, kMarkSize) != 0) {
    throw std::runtime_error("shortlist " + path + ": not a shortlist file (make one with nmt shortlist --model DIR)");
  }
  reader.take(kMarkSize);
  if (const uint64_t version = reader.number(); version != kShortlistVersion) {
    throw std::runtime_error("shortlist " + path + ": format version " + std::to_string(version) +
                             ", this nmt reads version " + std::to_string(kShortlistVersion) +
                             ": make it again with this nmt shortlist");
  }
  const uint64_t length = reader.number();
  if (length > reader.left()) reader.damaged("truncated");
  Shortlist shortlist;
  shortlist.path_ = path;
  try {
    const nlohmann::json header = nlohmann::json::parse(std::string(reader.take(length), length));
    const auto stamp = [](const nlohmann::json& part) {
      return VocabularyStamp{part.at("size").get<int64_t>(),
                             std::stoull(part.at("checksum").get<std::string>(), nullptr, 16)};
    };
    shortlist.source_ = stamp(header.at("source_vocabulary"));
    shortlist.target_ = stamp(header.at("target_vocabulary"));
    shortlist.sizes_ = {header.at("translations").get<int64_t>(), header.at("frequent").get<int64_t>(),
                        header.at("max_pairs").get<int64_t>(), header.value("batch_sentences", int64_t{0})};
    if (shortlist.sizes_.batch_sentences < 0) reader.damaged("batch_sentences below 0");
    shortlist.pairs_ = header.at("pairs").get<int64_t>();
    shortlist.origin_ = header.at("made_for").get<std::string>();
    const auto frequent_ids = header.at("frequent_ids").get<uint64_t>();
    const auto list_ids = header.at("list_ids").get<uint64_t>();
    if (shortlist.source_.size <= 0 || shortlist.target_.size <= kEosId)
      reader.damaged("vocabulary sizes out of range");
    shortlist.frequent_ = reader.ids(frequent_ids);
    shortlist.offsets_ = reader.ids(static_cast<uint64_t>(shortlist.source_.size) + 1);
    shortlist.lists_ = reader.ids(list_ids);
  } catch (const nlohmann::json::exception&) {
    reader.damaged("its header is damaged");
  } catch (const std::logic_error&) {  // stoull
    reader.damaged("its header is damaged");
  }
  if (reader.left() != kMarkSize || std::memcmp(reader.take(kMarkSize), kEndMark, kMarkSize) != 0) {
    reader.damaged("no end mark where the header says the data ends");
  }
  const auto target_size = static_cast<uint32_t>(shortlist.target_.size);
  const auto in_range = [&](const std::vector<uint32_t>& ids) {
    return std::all_of(ids.begin(), ids.end(), [&](uint32_t id) { return id < target_size; });
  };
  const bool offsets_ok = shortlist.offsets_.front() == 0 && shortlist.offsets_.back() == shortlist.lists_.size() &&
                          std::is_sorted(shortlist.offsets_.begin(), shortlist.offsets_.end());
  if (!offsets_ok || !in_range(shortlist.frequent_) || !in_range(shortlist.lists_)) {
    reader.damaged("ids or offsets out of range");
  }
  return shortlist;
}

void Shortlist::check_vocabularies(const Vocabulary& source_vocabulary, const Vocabulary& target_vocabulary,
                                   const std::string& model) const {
  const auto describe = [](const VocabularyStamp& source, const VocabularyStamp& target) {
    return "source " + std::to_string(source.size) + " subwords (checksum " + hex(source.checksum) + "), target " +
           std::to_string(target.size) + " (checksum " + hex(target.checksum) + ")";
  };
  const VocabularyStamp source{source_vocabulary.size(), vocabulary_checksum(source_vocabulary)};
  const VocabularyStamp target{target_vocabulary.size(), vocabulary_checksum(target_vocabulary)};
  if (source.size == source_.size && source.checksum == source_.checksum && target.size == target_.size &&
      target.checksum == target_.checksum) {
    return;
  }
  throw std::invalid_argument("--shortlist " + path_ + " was built for the vocabularies of " + origin_ + " (" +
                              describe(source_, target_) + "), but " + model + " has others (" +
                              describe(source, target) + "): build one for this model with nmt shortlist --model");
}

torch::Tensor Shortlist::select(const std::vector<const std::vector<int64_t>*>& sources,
                                const std::vector<int64_t>& extra) const {
  std::vector<char> chosen(static_cast<size_t>(target_.size), 0);
  for (int64_t id = 0; id <= kEosId; ++id) chosen[static_cast<size_t>(id)] = 1;
  for (const uint32_t id : frequent_) chosen[id] = 1;
  for (const std::vector<int64_t>* sentence : sources) {
    for (const int64_t s : *sentence) {
      if (s < 0 || s >= source_.size) continue;
      for (uint32_t k = offsets_[static_cast<size_t>(s)]; k < offsets_[static_cast<size_t>(s) + 1]; ++k) {
        chosen[lists_[k]] = 1;
      }
    }
  }
  for (const int64_t id : extra) {
    if (id >= 0 && id < target_.size) chosen[static_cast<size_t>(id)] = 1;
  }
  std::vector<int64_t> ids;
  for (size_t id = 0; id < chosen.size(); ++id) {
    if (chosen[id]) ids.push_back(static_cast<int64_t>(id));
  }
  return torch::tensor(ids, torch::kInt64);
}

std::vector<int64_t> Shortlist::translations(int64_t source) const {
  TORCH_CHECK(source >= 0 && source < source_.size, "shortlist: source id out of range");
  return {lists_.begin() + offsets_[static_cast<size_t>(source)],
          lists_.begin() + offsets_[static_cast<size_t>(source) + 1]};
}

SearchResult search_in_vocabulary(const Ensemble& model, const torch::Tensor& ids, const torch::Tensor& source,
                                  const torch::Tensor& lengths, const SearchOptions& options,
                                  const torch::Tensor& prefix, const BatchConstraints& constraints) {
  const torch::Tensor ids_cpu = ids.to(torch::kCPU, torch::kInt64).contiguous();
  const auto id_of = ids_cpu.accessor<int64_t, 1>();
  const int64_t vocab = model.members().front()->decoder->options().vocab_size;
  std::vector<int64_t> position(static_cast<size_t>(vocab), -1);  // each target id's place in `ids`
  for (int64_t k = 0; k < id_of.size(0); ++k) position[static_cast<size_t>(id_of[k])] = k;
  // The searches ban and end with the special ids: they must keep their places.
  for (int64_t id = 0; id <= kEosId; ++id) {
    TORCH_CHECK(position[static_cast<size_t>(id)] == id, "search_in_vocabulary: the special ids must lead the list");
  }
  const auto local = [&](int64_t id) {
    TORCH_CHECK(position[static_cast<size_t>(id)] >= 0, "search_in_vocabulary: token ", id, " is not in the list");
    return position[static_cast<size_t>(id)];
  };
  torch::Tensor local_prefix;
  if (prefix.defined()) {
    const torch::Tensor prefix_cpu = prefix.to(torch::kCPU).contiguous();
    local_prefix = torch::empty_like(prefix_cpu);
    const int64_t* from = prefix_cpu.data_ptr<int64_t>();
    int64_t* to = local_prefix.data_ptr<int64_t>();
    for (int64_t i = 0; i < prefix_cpu.numel(); ++i) to[i] = local(from[i]);
    local_prefix = local_prefix.to(prefix.device());
  }
  BatchConstraints local_constraints = constraints;
  for (SentenceConstraints& phrases : local_constraints) {
    for (Phrase& phrase : phrases) {
      for (int64_t& token : phrase) token = local(token);
    }
  }
  SearchResult result = search(model.restricted_to(ids), source, lengths, options, local_prefix, local_constraints);
  for (std::vector<Hypothesis>& hypotheses : result) {
    for (Hypothesis& hypothesis : hypotheses) {
      for (int64_t& token : hypothesis.tokens) token = id_of[token];
    }
  }
  return result;
}

}  // namespace nmt
