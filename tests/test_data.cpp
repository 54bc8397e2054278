#include <torch/torch.h>

#include <unistd.h>
#include <CLI/CLI.hpp>
#include <catch2/catch.hpp>

#include <filesystem>
#include <set>
#include <sstream>

#include "config/train_config.h"
#include "helpers.h"
#include "inference/synthesize.h"
#include "text/batching.h"
#include "text/corpus.h"
#include "text/utf8.h"
#include "text/vocabulary.h"
#include "util/io.h"

using namespace nmt;
using namespace nmt::testing;
namespace fs = std::filesystem;

namespace {
std::string write_temp(const std::string& name, const std::string& content) {
  const fs::path path = fs::temp_directory_path() / ("nmt_data_" + std::to_string(::getpid()) + "_" + name);
  write_file_atomic(path.string(), content);
  return path.string();
}
}  // namespace

TEST_CASE("UTF-8 validation", "[data]") {
  CHECK(is_valid_utf8("plain ascii"));
  CHECK(is_valid_utf8("Grüße, 東京, 🙂"));
  CHECK_FALSE(is_valid_utf8("\xff"));
  CHECK_FALSE(is_valid_utf8("abc\xc3"));           // truncated 2-byte sequence
  CHECK_FALSE(is_valid_utf8("\xc0\xaf"));          // overlong '/'
  CHECK_FALSE(is_valid_utf8("\xed\xa0\x80"));      // UTF-16 surrogate
  CHECK_FALSE(is_valid_utf8("\xf4\x90\x80\x80"));  // above U+10FFFF
  CHECK_FALSE(is_valid_utf8("\xc1\xbf"));          // C1 leads only overlongs
  CHECK_FALSE(is_valid_utf8("\xf5\x80\x80\x80"));  // F5 and above lead nothing
  // The edges of table 3-7 that are well-formed.
  CHECK(is_valid_utf8("\xc2\x80"));
  CHECK(is_valid_utf8("\xe0\xa0\x80"));
  CHECK(is_valid_utf8("\xed\x9f\xbf"));
  CHECK(is_valid_utf8("\xee\x80\x80"));
  CHECK(is_valid_utf8("\xf0\x90\x80\x80"));
  CHECK(is_valid_utf8("\xf4\x8f\xbf\xbf"));
}

TEST_CASE("UTF-8 decoding reads each code point once and replaces a malformed byte", "[data]") {
  const std::string text = "a\xc3\xbc\xe6\x9d\xb1\xf0\x9f\x99\x82\xe0\x80\xafz";  // a ü 東 🙂, an overlong '/', z
  std::vector<char32_t> code_points;
  std::vector<bool> valid;
  std::string encoded;
  for (std::size_t position = 0; position < text.size();) {
    bool is_valid = false;
    code_points.push_back(next_code_point(text, position, &is_valid));
    valid.push_back(is_valid);
    append_utf8(encoded, code_points.back());
  }
  // The overlong sequence is three bytes, each read alone as U+FFFD.
  CHECK(code_points == std::vector<char32_t>{'a', 0xFC, 0x6771, 0x1F642, 0xFFFD, 0xFFFD, 0xFFFD, 'z'});
  CHECK(valid == std::vector<bool>{true, true, true, true, false, false, false, true});
  CHECK(encoded == "a\xc3\xbc\xe6\x9d\xb1\xf0\x9f\x99\x82\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdz");
}

TEST_CASE("a parallel corpus with different line counts names both files and counts", "[data]") {
  const std::string source = write_temp("mismatch.src", "a\nb\nc\n");
  const std::string target = write_temp("mismatch.tgt", "x\ny\n");
  CorpusStats stats;
  try {
    read_parallel(source, target, stats);
    FAIL("no error");
  } catch (const std::runtime_error& error) {
    const std::string message = error.what();
    CHECK_THAT(message,
               Catch::Contains(source) && Catch::Contains(target) && Catch::Contains("3") && Catch::Contains("2"));
  }
}

TEST_CASE("empty pairs are skipped and counted, invalid UTF-8 names file and line", "[data]") {
  const std::string source = write_temp("empty.src", "one\n\nthree\r\nfour\n");
  const std::string target = write_temp("empty.tgt", "uno\ndos\n  \ncuatro\n");
  CorpusStats stats;
  ParallelText text = read_parallel(source, target, stats);
  CHECK(stats.lines == 4);
  CHECK(stats.empty == 2);
  CHECK(text.source == std::vector<std::string>{"one", "four"});
  CHECK(text.target == std::vector<std::string>{"uno", "cuatro"});

  const std::string bad = write_temp("bad.src", "fine\nalso fine\nbroken \xe2\x82 here\n");
  CHECK_THROWS_WITH(read_lines(bad), Catch::Contains(bad + ":3") && Catch::Contains("UTF-8"));
  CHECK_THROWS_WITH(read_lines("/nonexistent/corpus.txt"), Catch::Contains("/nonexistent/corpus.txt"));
}

TEST_CASE("token-budget batches cover every example once, respect the budget and follow the seed", "[data]") {
  std::vector<Example> examples;
  std::mt19937 generator(7);
  for (int i = 0; i < 500; ++i) {
    // Target lengths follow source lengths, as in real parallel text.
    const size_t length = 1 + generator() % 30;
    examples.push_back({std::vector<int64_t>(length, 5), std::vector<int64_t>(length + generator() % 4, 6)});
  }
  const int budget = 300;
  const TokenCorpus corpus = corpus_in_memory(examples, 1);
  auto batches = make_batches(corpus, all_pairs(corpus), budget, true, 1);
  std::multiset<int64_t> seen;
  size_t padded = 0, real = 0;
  for (const auto& batch : batches) {
    size_t max_source = 0, max_target = 0;
    for (int64_t index : batch) {
      seen.insert(index);
      max_source = std::max(max_source, examples[index].source.size() + 1);
      max_target = std::max(max_target, examples[index].target.size() + 1);
      real += examples[index].source.size() + examples[index].target.size() + 2;
    }
    CHECK(batch.size() * (max_source + max_target) <= static_cast<size_t>(budget));
    padded += batch.size() * (max_source + max_target);
    for (size_t i = 1; i < batch.size(); ++i) {  // decreasing target length within the batch
      CHECK(examples[batch[i - 1]].target.size() >= examples[batch[i]].target.size());
    }
  }
  CHECK(seen.size() == examples.size());
  CHECK(std::set<int64_t>(seen.begin(), seen.end()).size() == examples.size());
  // Length bucketing keeps padding small: random batching would waste about half.
  CHECK(static_cast<double>(real) / static_cast<double>(padded) > 0.8);
  CHECK(make_batches(corpus, all_pairs(corpus), budget, true, 1) == batches);
  CHECK(make_batches(corpus, all_pairs(corpus), budget, true, 2) != batches);
}

TEST_CASE("cut_batches keeps the order and cuts where the next item would pass the budget", "[data]") {
  // Source lengths of items 0..5, sorted longest first as translation sorts them.
  const std::vector<size_t> source = {9, 7, 4, 4, 3, 20};
  const auto lengths = [&](int64_t index) { return PaddedLengths{source[index], 0}; };
  const std::vector<int64_t> order = {5, 0, 1, 2, 3, 4};
  // Tokens: 20 alone (over the budget, still a batch), then 9+9 = 18 <= 20, then 3 x 4 = 12 <= 20 ...
  CHECK(cut_batches(order, lengths, 20, BatchCost::kPaddedTokens) ==
        std::vector<std::vector<int64_t>>{{5}, {0, 1}, {2, 3, 4}});
  CHECK(cut_batches(order, lengths, 12, BatchCost::kPaddedTokens) ==
        std::vector<std::vector<int64_t>>{{5}, {0}, {1}, {2, 3, 4}});
  CHECK(cut_batches(order, lengths, 4, BatchCost::kSentences) ==
        std::vector<std::vector<int64_t>>{{5, 0, 1, 2}, {3, 4}});
  // Targets count too: 2 x (4 + 3) = 14 > 13.
  const auto with_targets = [&](int64_t index) { return PaddedLengths{source[index], 3}; };
  CHECK(cut_batches({2, 3}, with_targets, 13, BatchCost::kPaddedTokens) == std::vector<std::vector<int64_t>>{{2}, {3}});
  CHECK(cut_batches({}, lengths, 10, BatchCost::kSentences).empty());
}

TEST_CASE("collate pads, appends EOS to the source and shifts the target", "[data]") {
  std::vector<Example> examples = {{{7, 8, 9}, {10, 11}}, {{7}, {12, 13, 14}}};
  Batch batch = collate(corpus_in_memory(examples, 2), {0, 1});
  CHECK(torch::equal(batch.source, torch::tensor({7, 8, 9, 3, 7, 3, 0, 0}, torch::kInt64).view({2, 4})));
  CHECK(torch::equal(batch.source_lengths, torch::tensor({4, 2}, torch::kInt64)));
  CHECK(torch::equal(batch.target_input, torch::tensor({2, 10, 11, 0, 2, 12, 13, 14}, torch::kInt64).view({2, 4})));
  CHECK(torch::equal(batch.target_output, torch::tensor({10, 11, 3, 0, 12, 13, 14, 3}, torch::kInt64).view({2, 4})));
  CHECK(batch.target_tokens == 7);
  // A right-to-left model (reverse-target) reads each target backwards; the source stays as it is.
  Batch backwards = collate(corpus_in_memory(examples, 2), {0, 1}, /*reverse_target=*/true);
  CHECK(torch::equal(backwards.source, batch.source));
  CHECK(torch::equal(backwards.target_input, torch::tensor({2, 11, 10, 0, 2, 14, 13, 12}, torch::kInt64).view({2, 4})));
  CHECK(
      torch::equal(backwards.target_output, torch::tensor({11, 10, 3, 0, 14, 13, 12, 3}, torch::kInt64).view({2, 4})));
}

TEST_CASE("vocabularies keep the special ids and round-trip text", "[data]") {
  const std::vector<std::string> sentences = read_lines(source_path("data/toy/train.src"));
  const std::vector<std::string> some(sentences.begin(), sentences.begin() + 300);
  for (VocabType type : {VocabType::kUnigram, VocabType::kBpe}) {
    DYNAMIC_SECTION(to_string(type)) {
      const std::string proto = train_vocabulary({&some}, {type, 150, 1, 1, false, {}});
      Vocabulary vocabulary = Vocabulary::from_serialized(proto, "test");
      CHECK(vocabulary.size() <= 150);
      CHECK(vocabulary.piece(kUnkId) == "<unk>");
      CHECK(vocabulary.piece(kBosId) == "<s>");
      CHECK(vocabulary.piece(kEosId) == "</s>");
      CHECK(vocabulary.decode(vocabulary.encode(some[0])) == some[0]);
      CHECK_THROWS_WITH(Vocabulary::from_serialized("not a model", "bad.model"), Catch::Contains("bad.model"));
    }
  }
}

namespace {

// Every line of `lines` gets the same ids from a word cache as from sentencepiece.
void check_cached_encoding(const Vocabulary& vocabulary, const std::vector<std::string>& lines) {
  WordCachedEncoder cached(vocabulary);
  REQUIRE(cached.caching());
  size_t differ = 0;
  for (const std::string& line : lines) {
    if (cached.encode(line) != vocabulary.encode(line)) {
      if (++differ <= 3) FAIL_CHECK("the cache encodes differently: '" << line << "'");
    }
  }
  CHECK(differ == 0);
}

}  // namespace

TEST_CASE("a word cache encodes exactly as sentencepiece: toy corpus, odd spaces and characters", "[data]") {
  std::vector<std::string> lines = read_lines(source_path("data/toy/train.src"));
  const std::vector<std::string> targets = read_lines(source_path("data/toy/train.tgt"));
  lines.insert(lines.end(), targets.begin(), targets.end());
  // Spaces of every kind, where sentencepiece's normaliser changes characters (compatibility
  // forms, a combining mark after a space), characters the vocabulary lacks, each twice (cached).
  const std::vector<std::string> odd = {"  two  spaces  ",
                                        "tab\there",
                                        "no\xc2\xa0break \xe3\x80\x80ideographic",
                                        "\xef\xbc\xa1\xef\xbd\x82c full width",
                                        "\xe2\x91\xb4 circled \xe3\x8d\xb1",
                                        "a \xcc\x88b \xc2\xa8 c",
                                        "\xe6\xbc\xa2\xe5\xad\x97 \xf0\x9f\x99\x82!",
                                        "\xe2\x96\x81 lower one eighth",
                                        "",
                                        " "};
  for (int twice = 0; twice < 2; ++twice) lines.insert(lines.end(), odd.begin(), odd.end());
  for (VocabType type : {VocabType::kUnigram, VocabType::kBpe}) {
    DYNAMIC_SECTION(to_string(type)) {
      const std::vector<std::string> some(lines.begin(), lines.begin() + 2000);
      check_cached_encoding(Vocabulary::from_serialized(train_vocabulary({&some}, {type, 300, 1, 1, false, {}}), "toy"),
                            lines);
    }
  }
  // A cache of one word encodes the rest one by one, the same.
  const std::vector<std::string> some(lines.begin(), lines.begin() + 300);
  const Vocabulary vocabulary =
      Vocabulary::from_serialized(train_vocabulary({&some}, {VocabType::kBpe, 150, 1, 1, false, {}}), "toy");
  WordCachedEncoder tiny(vocabulary, 1);
  for (size_t i = 0; i < 50; ++i) CHECK(tiny.encode(lines[i]) == vocabulary.encode(lines[i]));
}

TEST_CASE("a word cache encodes exactly as sentencepiece: all of Multi30k with the recipe's vocabulary",
          "[data][slow]") {
  const std::string dir = source_path("data/multi30k");
  if (!fs::exists(dir + "/train.de")) return skip_case("data/multi30k not found (scripts/get_multi30k.sh)");
  std::vector<std::string> lines;
  for (const std::string name :
       {"train.de", "train.en", "val.de", "val.en", "test_2016_flickr.de", "test_2016_flickr.en"}) {
    const std::vector<std::string> file = read_lines(dir + "/" + name);
    lines.insert(lines.end(), file.begin(), file.end());
  }
  check_cached_encoding(
      Vocabulary::from_serialized(train_vocabulary({&lines}, {VocabType::kBpe, 8000, 1, 2, false, {}}), "m30k"), lines);
}

TEST_CASE("configuration: entries round-trip, bad values name the key", "[config]") {
  TrainConfig config;
  config.train_source = "a.src";
  config.model.attention = "cosine";
  config.learning_rate = 0.0003;
  config.joint_vocab = false;
  CHECK(config_entries(config_from_entries(config_entries(config))) == config_entries(config));

  CLI::App app;
  TrainConfig parsed;
  add_train_options(app, parsed);
  CHECK_THROWS_AS(app.parse(std::vector<std::string>{"sideways", "--attention"}), CLI::ValidationError);
  try {
    app.parse(std::vector<std::string>{"sideways", "--attention"});
  } catch (const CLI::ParseError& error) {
    CHECK_THAT(std::string(error.what()), Catch::Contains("additive") && Catch::Contains("cosine"));
  }

  TrainConfig invalid = config;
  invalid.train_target = "b", invalid.dev_source = "c", invalid.dev_target = "d", invalid.model_dir = "m";
  REQUIRE_NOTHROW(validate(invalid));
  invalid.model.dropout = 1.5;
  CHECK_THROWS_WITH(validate(invalid), Catch::StartsWith("dropout"));
  invalid.model.dropout = 0.1;
  invalid.model.tie_embeddings = true;
  invalid.model.embedding_size = 100;
  CHECK_THROWS_WITH(validate(invalid), Catch::StartsWith("tie-embeddings"));
  invalid.model.tie_embeddings = false;
  invalid.device = "tpu";
  CHECK_THROWS_WITH(validate(invalid), Catch::StartsWith("device"));
  invalid.device = "cpu";
  invalid.precision = "bf16";  // on both (whether this CPU or GPU has bf16 is check_precision's)
  CHECK_NOTHROW(validate(invalid));
  invalid.device = "cuda";
  CHECK_NOTHROW(validate(invalid));
  invalid.precision = "fp16";
  CHECK_THROWS_WITH(validate(invalid), Catch::StartsWith("precision"));
  TrainConfig missing;
  CHECK_THROWS_WITH(validate(missing), Catch::StartsWith("train-source"));
}

TEST_CASE("synthetic-source noise: deletion, fillers and a shuffle that moves no word further than asked", "[data]") {
  std::string line;
  for (int i = 0; i < 40; ++i) line += (i == 0 ? "" : " ") + std::string("w") + std::to_string(i);
  const auto words = [](const std::string& text) {
    std::vector<std::string> split;
    std::istringstream in(text);
    for (std::string word; in >> word;) split.push_back(word);
    return split;
  };
  std::mt19937_64 generator(7);
  CHECK(add_noise(line, NoiseOptions{}, generator) == line);

  // Shuffle alone: the same words, none more than 3 places from where it was.
  NoiseOptions shift;
  shift.max_shift = 3;
  bool moved = false;
  for (int trial = 0; trial < 50; ++trial) {
    const std::vector<std::string> shuffled = words(add_noise(line, shift, generator));
    REQUIRE(shuffled.size() == 40);
    for (size_t at = 0; at < shuffled.size(); ++at) {
      const auto was = static_cast<size_t>(std::stoi(shuffled[at].substr(1)));
      CHECK((at > was ? at - was : was - at) <= 3);
      moved = moved || at != was;
    }
  }
  CHECK(moved);

  // Deletion and fillers alone: the kept words in order, about the asked shares of 4000 words.
  NoiseOptions drop;
  drop.delete_probability = 0.1;
  drop.blank_probability = 0.2;
  int deleted = 0, blanks = 0;
  for (int trial = 0; trial < 100; ++trial) {
    const std::vector<std::string> noisy = words(add_noise(line, drop, generator));
    deleted += 40 - static_cast<int>(noisy.size());
    int last = -1;
    for (const std::string& word : noisy) {
      if (word == "<blank>") {
        ++blanks;
        continue;
      }
      CHECK(std::stoi(word.substr(1)) > last);
      last = std::stoi(word.substr(1));
    }
  }
  CHECK(deleted > 300);
  CHECK(deleted < 500);
  CHECK(blanks > 650);
  CHECK(blanks < 950);

  // A line never loses every word; the same seed gives the same noise.
  NoiseOptions all;
  all.delete_probability = 0.99;
  CHECK(words(add_noise("a b", all, generator)).size() == 1);
  std::mt19937_64 first(3), second(3);
  CHECK(add_noise(line, drop, first) == add_noise(line, drop, second));
  NoiseOptions bad;
  bad.delete_probability = 1;
  CHECK_THROWS_WITH(validate(bad), Catch::StartsWith("--noise-delete"));
}
