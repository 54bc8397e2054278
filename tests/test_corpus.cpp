// The prepared corpus (text/prepared_corpus.h) and the shards it maps (text/token_corpus.h).
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>

#include "helpers.h"
#include "text/batching.h"
#include "text/corpus.h"
#include "text/prepared_corpus.h"
#include "text/token_corpus.h"
#include "text/vocabulary.h"
#include "util/io.h"

using namespace nmt;
using namespace nmt::testing;
namespace fs = std::filesystem;

namespace {

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("nmt_corpus_" + std::to_string(::getpid())) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// The first `lines` lines of the toy corpus, with a blank pair and an over-long pair added.
CorpusRecipe toy_recipe(const fs::path& dir, size_t lines) {
  const auto source = read_lines(source_path("data/toy/train.src"));
  const auto target = read_lines(source_path("data/toy/train.tgt"));
  std::string source_text, target_text;
  for (size_t i = 0; i < lines; ++i) source_text += source[i] + "\n", target_text += target[i] + "\n";
  source_text += "  \nword\n";
  target_text += "something\n" + std::string(4000, 'x') + "\n";
  write_file_atomic((dir / "train.src").string(), source_text);
  write_file_atomic((dir / "train.tgt").string(), target_text);
  return {{(dir / "train.src").string()}, {(dir / "train.tgt").string()}, "toy settings"};
}

Vocabulary toy_vocabulary(const CorpusRecipe& recipe) {
  ParallelText text;
  CorpusStats stats;
  for_each_pair(recipe.source_files, recipe.target_files, stats, [&](std::string& source, std::string& target) {
    text.source.push_back(source);
    text.target.push_back(target);
  });
  return Vocabulary::from_serialized(train_vocabulary({&text.source, &text.target}, {VocabType::kUnigram, 150, 1, 1}),
                                     "toy");
}

}  // namespace

TEST_CASE("a prepared corpus holds exactly the in-memory encoding of its text", "[corpus]") {
  const fs::path dir = scratch("round_trip");
  const CorpusRecipe recipe = toy_recipe(dir, 700);
  const Vocabulary vocabulary = toy_vocabulary(recipe);
  const std::string path = (dir / "train.corpus").string();
  prepare_corpus(path, recipe, vocabulary, vocabulary, 2);
  std::string why;
  const std::optional<PreparedCorpus> opened = open_prepared_corpus(path, recipe, vocabulary, vocabulary, why);
  REQUIRE(opened);
  const PreparedCorpus& prepared = *opened;
  CHECK(prepared.vocabulary_settings == "toy settings");

  CorpusStats stats;
  const ParallelText text = read_parallel(recipe.source_files[0], recipe.target_files[0], stats);
  const std::vector<Example> expected =
      encode_parallel(text, vocabulary, vocabulary, std::numeric_limits<int>::max(), stats);
  REQUIRE(prepared.corpus.size() == static_cast<int64_t>(expected.size()));
  CHECK(prepared.lines == 702);
  CHECK(prepared.empty == 1);
  CHECK(prepared.corpus.token_width() == 1);  // 150 pieces fit a byte
  for (size_t i = 0; i < expected.size(); ++i) {
    INFO("pair " << i);
    REQUIRE(prepared.corpus.source(static_cast<int64_t>(i)) == expected[i].source);
    REQUIRE(prepared.corpus.target(static_cast<int64_t>(i)) == expected[i].target);
  }
  // The over-long pair (the last) is in the file and left out by the length filter.
  size_t longest = 0;
  for (size_t i = 0; i + 1 < expected.size(); ++i) {
    longest = std::max({longest, expected[i].source.size(), expected[i].target.size()});
  }
  REQUIRE(expected.back().target.size() > longest);
  CHECK(prepared.corpus.within_length(static_cast<int64_t>(longest)).size() == expected.size() - 1);
}

TEST_CASE("the same seed gives the same batches from the prepared file as from text, each kept pair once", "[corpus]") {
  const fs::path dir = scratch("batches");
  const CorpusRecipe recipe = toy_recipe(dir, 3000);
  const Vocabulary vocabulary = toy_vocabulary(recipe);
  const std::string path = (dir / "train.corpus").string();
  prepare_corpus(path, recipe, vocabulary, vocabulary, 2);
  std::string why;
  const TokenCorpus mapped = open_prepared_corpus(path, recipe, vocabulary, vocabulary, why).value().corpus;

  CorpusStats stats;
  const ParallelText text = read_parallel(recipe.source_files[0], recipe.target_files[0], stats);
  const TokenCorpus in_memory =
      corpus_in_memory(encode_parallel(text, vocabulary, vocabulary, std::numeric_limits<int>::max(), stats), 4);

  const std::vector<int64_t> kept = mapped.within_length(60);
  CHECK(kept == in_memory.within_length(60));
  const auto batches = make_batches(mapped, kept, 500, /*shuffle=*/true, 17);
  CHECK(batches == make_batches(in_memory, kept, 500, /*shuffle=*/true, 17));
  // The same batches as from a corpus of the kept pairs alone (what training read before the
  // prepared corpus), once its indices are mapped back through `kept`.
  std::vector<Example> kept_examples;
  for (const int64_t pair : kept) kept_examples.push_back({mapped.source(pair), mapped.target(pair)});
  const TokenCorpus kept_only = corpus_in_memory(kept_examples, 4);
  auto alone = make_batches(kept_only, all_pairs(kept_only), 500, /*shuffle=*/true, 17);
  for (auto& batch : alone) {
    for (int64_t& index : batch) index = kept[static_cast<size_t>(index)];
  }
  CHECK(alone == batches);
  std::multiset<int64_t> seen;
  for (const auto& batch : batches) seen.insert(batch.begin(), batch.end());
  CHECK(seen == std::multiset<int64_t>(kept.begin(), kept.end()));
}

TEST_CASE("a stale, truncated or foreign prepared file is noticed, and preparing again repairs it", "[corpus]") {
  const fs::path dir = scratch("stale");
  const CorpusRecipe recipe = toy_recipe(dir, 200);
  const Vocabulary vocabulary = toy_vocabulary(recipe);
  const std::string path = (dir / "train.corpus").string();
  CHECK(why_stale(path, recipe, vocabulary, vocabulary) == "not prepared yet");
  prepare_corpus(path, recipe, vocabulary, vocabulary, 1);
  REQUIRE(why_stale(path, recipe, vocabulary, vocabulary).empty());

  SECTION("the text changed") {
    std::ofstream(recipe.target_files[0], std::ios::app) << "one more\n";
    std::ofstream(recipe.source_files[0], std::ios::app) << "line\n";
    CHECK_THAT(why_stale(path, recipe, vocabulary, vocabulary), Catch::Contains("text changed"));
  }
  SECTION("another vocabulary") {
    const std::vector<std::string> sentences = read_lines(recipe.source_files[0]);
    const Vocabulary other =
        Vocabulary::from_serialized(train_vocabulary({&sentences}, {VocabType::kBpe, 120, 1, 1}), "other");
    CHECK_THAT(why_stale(path, recipe, other, other), Catch::Contains("vocabulary changed"));
  }
  SECTION("truncated") {
    fs::resize_file(path, fs::file_size(path) - 5);
    CHECK_THAT(why_stale(path, recipe, vocabulary, vocabulary), Catch::Contains("truncated"));
  }
  SECTION("not a prepared corpus") {
    write_file_atomic(path, "just some text that is long enough to have a head and a tail\n");
    CHECK_THAT(why_stale(path, recipe, vocabulary, vocabulary), Catch::Contains("not a prepared corpus"));
  }
  SECTION("a damaged shard is refused, never read out of bounds") {
    std::string bytes = read_file(path);
    bytes[16 + 8 + 4 * 3] = '\xff';  // the fourth source offset of the first shard
    bytes[16 + 8 + 4 * 3 + 3] = '\x7f';
    write_file_atomic(path, bytes);
    CHECK_THAT(why_stale(path, recipe, vocabulary, vocabulary), Catch::Contains("shard 0 is damaged"));
  }
  prepare_corpus(path, recipe, vocabulary, vocabulary, 1);
  CHECK(why_stale(path, recipe, vocabulary, vocabulary).empty());
}

TEST_CASE("several training files and globs are read in order, and their errors name the files", "[corpus]") {
  const fs::path dir = scratch("files");
  write_file_atomic((dir / "a.src").string(), "a1\na2\n");
  write_file_atomic((dir / "a.tgt").string(), "A1\nA2\n");
  write_file_atomic((dir / "b.src").string(), "b1\n");
  write_file_atomic((dir / "b.tgt").string(), "B1\n");
  const auto sources = expand_file_list((dir / "*.src").string(), "train-source");
  CHECK(sources == std::vector<std::string>{(dir / "a.src").string(), (dir / "b.src").string()});
  CHECK(expand_file_list((dir / "b.src").string() + "," + (dir / "a.src").string(), "train-source").size() == 2);
  CHECK_THROWS_WITH(expand_file_list((dir / "*.xyz").string(), "train-source"), Catch::Contains("train-source"));

  CorpusRecipe recipe{sources, expand_file_list((dir / "*.tgt").string(), "train-target"), ""};
  std::vector<std::string> seen;
  CorpusStats stats;
  for_each_pair(recipe.source_files, recipe.target_files, stats,
                [&](std::string& source, std::string& target) { seen.push_back(source + target); });
  CHECK(seen == std::vector<std::string>{"a1A1", "a2A2", "b1B1"});

  write_file_atomic((dir / "b.tgt").string(), "B1\nB2\nB3\n");
  CHECK_THROWS_WITH(for_each_pair(recipe.source_files, recipe.target_files, stats, [](std::string&, std::string&) {}),
                    Catch::Contains("b.src has 1 lines") && Catch::Contains("b.tgt has 3"));
  write_file_atomic((dir / "b.tgt").string(), "B1\n\xff\n");
  write_file_atomic((dir / "b.src").string(), "b1\nb2\n");
  CHECK_THROWS_WITH(for_each_pair(recipe.source_files, recipe.target_files, stats, [](std::string&, std::string&) {}),
                    Catch::Contains("b.tgt:2") && Catch::Contains("UTF-8"));
  recipe.target_files.pop_back();
  CHECK_THROWS_WITH(for_each_pair(recipe.source_files, recipe.target_files, stats, [](std::string&, std::string&) {}),
                    Catch::Contains("train-target 1"));
}

TEST_CASE("a corpus of several shards reads every pair back, across shard boundaries", "[corpus]") {
  std::vector<Example> pairs;
  for (int64_t i = 0; i < kShardPairs + 1000; ++i) {
    pairs.push_back({std::vector<int64_t>(1 + i % 7, 300 + i % 50), std::vector<int64_t>(1 + i % 5, 7)});
  }
  pairs[5].source = {65535};  // the largest id two bytes hold
  const TokenCorpus corpus = corpus_in_memory(pairs, 2);
  REQUIRE(corpus.size() == static_cast<int64_t>(pairs.size()));
  for (const int64_t i : {int64_t{0}, int64_t{5}, kShardPairs - 1, kShardPairs, kShardPairs + 999}) {
    INFO("pair " << i);
    CHECK(corpus.source(i) == pairs[static_cast<size_t>(i)].source);
    CHECK(corpus.target(i) == pairs[static_cast<size_t>(i)].target);
    CHECK(corpus.source_length(i) == static_cast<int64_t>(pairs[static_cast<size_t>(i)].source.size()));
  }
  CHECK(corpus.within_length(4).size() ==
        static_cast<size_t>(std::count_if(pairs.begin(), pairs.end(), [](const Example& pair) {
          return pair.source.size() <= 4 && pair.target.size() <= 4;
        })));
  pairs[6].source = {65536};
  CHECK_THROWS(corpus_in_memory(pairs, 2));  // an id the width cannot hold is refused, not cut
}
