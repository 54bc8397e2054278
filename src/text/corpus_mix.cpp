#include "text/corpus_mix.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>

#include "text/languages.h"
#include "text/prepared_corpus.h"
#include "text/sentences.h"
#include "util/format.h"

namespace nmt {
namespace {

// "1 file", "2 files"; "1 corpus", "2 corpora".
std::string count_of(size_t count, const std::string& one, const std::string& many) {
  return std::to_string(count) + " " + (count == 1 ? one : many);
}

// The items of the per-corpus list `key` (train-weights, train-tags, train-languages): none when it
// is empty; a list of another length than `corpora` is an error naming the key, its count of
// `unit` (one, many) and `hint`.
std::vector<std::string> per_corpus(const std::string& list, const std::string& key, size_t corpora,
                                    const std::pair<std::string, std::string>& unit, const std::string& hint) {
  if (list.empty()) return {};
  std::vector<std::string> items = split_commas(list);
  if (items.size() != corpora) {
    throw std::invalid_argument(key + ": " + count_of(items.size(), unit.first, unit.second) + " for " +
                                count_of(corpora, "corpus", "corpora") + " in train-source; " + hint);
  }
  return items;
}

double parse_weight(const std::string& text) {
  size_t used = 0;
  double weight = 0;
  try {
    weight = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || !std::isfinite(weight) || weight <= 0 || weight > 1000) {
    throw std::invalid_argument("train-weights: '" + text +
                                "' is not a weight; give a number in (0, 1000] per corpus (2 = each pair twice "
                                "an epoch, 0.5 = a random half)");
  }
  return weight;
}

}  // namespace

std::vector<std::string> non_empty_items(const std::string& value) {
  std::vector<std::string> kept;
  for (std::string& item : split_commas(value)) {
    if (!item.empty()) kept.push_back(std::move(item));
  }
  return kept;
}

std::vector<std::string> split_commas(const std::string& value) {
  std::vector<std::string> items;
  size_t start = 0;
  while (true) {
    const size_t comma = value.find(',', start);
    items.push_back(value.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) return items;
    start = comma + 1;
  }
}

void check_tag(const std::string& tag, const std::string& key) {
  const bool shaped = tag.size() >= 3 && tag.front() == '<' && tag.back() == '>' &&
                      tag.find_first_of(" \t\n\r,<>", 1) == tag.size() - 1;
  if (!shaped || tag == "<unk>" || tag == "<pad>") {
    throw std::invalid_argument(key + ": '" + tag +
                                "' is not a tag; a tag is a token such as <bt>: '<', then letters, digits or "
                                "punctuation (no space, comma or angle bracket), then '>'");
  }
}

std::string CorpusSpec::source_tokens() const {
  if (language.empty()) return tag;
  return language_token(language) + (tag.empty() ? "" : " " + tag);
}

void check_corpus_lists(const CorpusLists& lists) {
  const size_t corpora = non_empty_items(lists.sources).size();
  const size_t target_entries = non_empty_items(lists.targets).size();
  if (target_entries != corpora) {
    throw std::invalid_argument("train-target: " + count_of(target_entries, "entry", "entries") +
                                " but train-source has " + std::to_string(corpora) +
                                "; give each corpus's target files at its position");
  }
  for (const std::string& item :
       per_corpus(lists.weights, "train-weights", corpora, {"weight", "weights"}, "give one per corpus, in order")) {
    parse_weight(item);
  }
  for (const std::string& item : per_corpus(lists.tags, "train-tags", corpora, {"item", "items"},
                                            "give one per corpus, empty for none (e.g. ',<bt>')")) {
    if (!item.empty()) check_tag(item, "train-tags");
  }
  for (const std::string& item : per_corpus(lists.languages, "train-languages", corpora, {"language", "languages"},
                                            "give each corpus's target language, in order (e.g. 'en,en,de')")) {
    if (item.empty()) {
      throw std::invalid_argument(
          "train-languages: a corpus without a language; a multilingual model needs the target language of "
          "every corpus (translate then picks one with --target-language)");
    }
    if (const std::string problem = language_problem(item); !problem.empty()) {
      throw std::invalid_argument("train-languages: " + problem);
    }
  }
}

std::vector<CorpusSpec> corpus_specs(const CorpusLists& lists) {
  check_corpus_lists(lists);
  const std::vector<std::string> source_entries = non_empty_items(lists.sources);
  const std::vector<std::string> target_entries = non_empty_items(lists.targets);
  if (source_entries.empty()) throw std::invalid_argument("train-source: no file given");
  const auto items = [](const std::string& list) {
    return list.empty() ? std::vector<std::string>{} : split_commas(list);
  };
  const std::vector<std::string> weight_items = items(lists.weights), tag_items = items(lists.tags),
                                 language_items = items(lists.languages);
  std::vector<CorpusSpec> corpora;
  for (size_t i = 0; i < source_entries.size(); ++i) {
    CorpusSpec corpus;
    corpus.source_files = expand_file_list(source_entries[i], "train-source");
    corpus.target_files = expand_file_list(target_entries[i], "train-target");
    if (corpus.source_files.size() != corpus.target_files.size()) {
      throw std::invalid_argument("train-target: '" + target_entries[i] + "' names " +
                                  count_of(corpus.target_files.size(), "file", "files") + " but train-source's '" +
                                  source_entries[i] + "' names " + std::to_string(corpus.source_files.size()) +
                                  "; each corpus needs as many target files as source files, matched in order");
    }
    if (!weight_items.empty()) corpus.weight = parse_weight(weight_items[i]);
    if (!tag_items.empty()) corpus.tag = tag_items[i];
    if (!language_items.empty()) corpus.language = language_items[i];
    corpora.push_back(std::move(corpus));
  }
  return corpora;
}

std::vector<std::string> vocabulary_tags(const std::vector<CorpusSpec>& corpora, const std::string& reserved) {
  std::vector<std::string> tags;
  const auto add = [&tags](const std::string& tag) {
    if (!tag.empty() && std::find(tags.begin(), tags.end(), tag) == tags.end()) tags.push_back(tag);
  };
  for (const CorpusSpec& corpus : corpora) {
    if (!corpus.language.empty()) add(language_token(corpus.language));
    add(corpus.tag);
  }
  for (const std::string& tag : split_commas(reserved)) add(tag);
  return tags;
}

std::vector<double> temperature_weights(const std::vector<int64_t>& sizes, double temperature) {
  double total = 0, tempered_total = 0;
  for (const int64_t size : sizes) {
    total += static_cast<double>(size);
    tempered_total += std::pow(static_cast<double>(size), 1 / temperature);
  }
  std::vector<double> weights;
  for (const int64_t size : sizes) {
    const double share = std::pow(static_cast<double>(size), 1 / temperature) / tempered_total;
    weights.push_back(size == 0 ? 1 : share * total / static_cast<double>(size));
  }
  return weights;
}

EpochMix mix_epoch(const std::vector<CorpusShare>& corpora, uint64_t seed) {
  EpochMix mix;
  std::mt19937_64 generator(seed);
  for (const CorpusShare& corpus : corpora) {
    const auto whole = static_cast<int64_t>(std::floor(corpus.weight));
    const auto size = static_cast<int64_t>(corpus.pairs.size());
    for (int64_t copy = 0; copy < whole; ++copy)
      mix.pairs.insert(mix.pairs.end(), corpus.pairs.begin(), corpus.pairs.end());
    const auto extra = std::min(size, static_cast<int64_t>(std::llround((corpus.weight - static_cast<double>(whole)) *
                                                                        static_cast<double>(size))));
    if (extra > 0) {
      // The first `extra` of a partial Fisher-Yates shuffle: a uniform draw without replacement.
      std::vector<int64_t> drawn = corpus.pairs;
      for (int64_t i = 0; i < extra; ++i) {
        std::uniform_int_distribution<int64_t> pick(i, size - 1);
        std::swap(drawn[static_cast<size_t>(i)], drawn[static_cast<size_t>(pick(generator))]);
      }
      mix.pairs.insert(mix.pairs.end(), drawn.begin(), drawn.begin() + extra);
    }
    mix.taken.push_back(whole * size + extra);
  }
  return mix;
}

std::string describe_mix(const std::vector<CorpusShare>& corpora, const EpochMix& mix) {
  std::string text;
  for (size_t i = 0; i < corpora.size(); ++i) {
    const CorpusShare& corpus = corpora[i];
    text += (i == 0 ? "" : ", ") + std::to_string(mix.taken[i]) + " of " + corpus.name + " (weight " +
            format_significant(corpus.weight) + (corpus.language.empty() ? "" : ", into " + corpus.language) +
            (corpus.tag.empty() ? "" : ", tag " + corpus.tag) + ")";
  }
  return text;
}

}  // namespace nmt
