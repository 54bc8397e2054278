// The prepared corpus (text/prepared_corpus.h) and the shards it maps (text/token_corpus.h).
#include <unistd.h>
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <optional>
#include <set>

#include "helpers.h"
#include "text/batching.h"
#include "text/corpus.h"
#include "text/corpus_mix.h"
#include "text/prepared_corpus.h"
#include "text/special_tokens.h"
#include "text/subword_sampling.h"
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
  return {{(dir / "train.src").string()}, {(dir / "train.tgt").string()}, "toy settings", {}};
}

Vocabulary toy_vocabulary(const CorpusRecipe& recipe) {
  ParallelText text;
  CorpusStats stats;
  for_each_pair(recipe.source_files, recipe.target_files, stats, [&](std::string& source, std::string& target) {
    text.source.push_back(source);
    text.target.push_back(target);
  });
  return Vocabulary::from_serialized(
      train_vocabulary({&text.source, &text.target}, {VocabType::kUnigram, 150, 1, 1, false, {}}), "toy");
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
        Vocabulary::from_serialized(train_vocabulary({&sentences}, {VocabType::kBpe, 120, 1, 1, false, {}}), "other");
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

  CorpusRecipe recipe{sources, expand_file_list((dir / "*.tgt").string(), "train-target"), "", {}};
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

TEST_CASE("several corpora: each weight takes its share of an epoch's batches, a fraction drawn anew", "[corpus]") {
  // Three corpora of one in-memory corpus: pairs 0-99 of weight 2, 100-399 of weight 0.5, 400-409 of 1.
  std::vector<Example> examples;
  for (int64_t i = 0; i < 410; ++i) examples.push_back({{5 + i % 7, 6}, {7, 8 + i % 5}});
  const TokenCorpus corpus = corpus_in_memory(examples, 2);
  const auto range = [](int64_t begin, int64_t end) {
    std::vector<int64_t> pairs;
    for (int64_t i = begin; i < end; ++i) pairs.push_back(i);
    return pairs;
  };
  const std::vector<CorpusShare> corpora = {
      {"a", 2, "", range(0, 100)}, {"b", 0.5, "<bt>", range(100, 400)}, {"c", 1, "", range(400, 410)}};
  const EpochMix mix = mix_epoch(corpora, 11);
  CHECK(mix.taken == std::vector<int64_t>{200, 150, 10});
  CHECK(describe_mix(corpora, mix) == "200 of a (weight 2), 150 of b (weight 0.5, tag <bt>), 10 of c (weight 1)");

  // Counted over the epoch's batches: each pair of a twice, 150 distinct pairs of b once, c once.
  std::map<int64_t, int> uses;
  for (const auto& batch : make_batches(corpus, mix.pairs, 60, /*shuffle=*/true, 11)) {
    for (const int64_t pair : batch) ++uses[pair];
  }
  int64_t from_b = 0;
  for (int64_t i = 0; i < 410; ++i) {
    const bool in_b = i >= 100 && i < 400;
    if (in_b) from_b += uses[i];
    CHECK(uses[i] == (i < 100 ? 2 : in_b ? std::min(uses[i], 1) : 1));
  }
  CHECK(from_b == 150);

  // The same seed draws the same half of b; another epoch's seed another half.
  CHECK(mix_epoch(corpora, 11).pairs == mix.pairs);
  const EpochMix next = mix_epoch(corpora, 12);
  const std::set<int64_t> half(mix.pairs.begin() + 200, mix.pairs.begin() + 350);
  const std::set<int64_t> next_half(next.pairs.begin() + 200, next.pairs.begin() + 350);
  CHECK(half.size() == 150);
  CHECK(half != next_half);

  // One corpus of weight 1 trains on exactly its pairs, in order, as a run without weights did.
  CHECK(mix_epoch({{"c", 1, "", range(0, 410)}}, 3).pairs == range(0, 410));
}

TEST_CASE("a tagged corpus: its sources start with the reserved tag, which no text encodes to and decode drops",
          "[corpus]") {
  const fs::path dir = scratch("tags");
  CorpusRecipe recipe = toy_recipe(dir, 60);
  write_file_atomic((dir / "bt.src").string(), "a dog runs\nthe <bt> cat\n");
  write_file_atomic((dir / "bt.tgt").string(), "ein Hund\ndie Katze\n");
  recipe.source_files.push_back((dir / "bt.src").string());
  recipe.target_files.push_back((dir / "bt.tgt").string());
  recipe.tags = {"", "<bt>"};

  ParallelText text;
  CorpusStats stats;
  for_each_pair(recipe.source_files, recipe.target_files, stats, [&](std::string& source, std::string& target) {
    text.source.push_back(source);
    text.target.push_back(target);
  });
  const VocabularyTrainingOptions options{VocabType::kUnigram, 150, 1, 1, false, {"<bt>", "<ft>"}};
  const Vocabulary tagged =
      Vocabulary::from_serialized(train_vocabulary({&text.source, &text.target}, options), "tagged");
  const int64_t tag = tagged.tag_id("<bt>");
  REQUIRE(tag > kEosId);
  CHECK(tagged.tag_id("<ft>") > kEosId);
  CHECK(tagged.tag_id("<xx>") == -1);
  CHECK(tagged.tag_id("dog") == -1);  // an ordinary piece is no tag

  const std::string path = (dir / "train.corpus").string();
  prepare_corpus(path, recipe, tagged, tagged, 2);
  std::string why;
  const std::optional<PreparedCorpus> prepared = open_prepared_corpus(path, recipe, tagged, tagged, why);
  REQUIRE(prepared);
  REQUIRE(prepared->file_pairs.size() == 2);
  CHECK(prepared->file_pairs[1] == 2);
  const int64_t first_tagged = prepared->file_pairs[0];
  CHECK(prepared->corpus.size() == first_tagged + 2);
  for (int64_t pair = 0; pair < prepared->corpus.size(); ++pair) {
    const std::vector<int64_t> source = prepared->corpus.source(pair);
    const bool is_tagged = pair >= first_tagged;
    CHECK((source.front() == tag) == is_tagged);
    CHECK(std::count(source.begin(), source.end(), tag) == (is_tagged ? 1 : 0));  // "<bt>" in the text is text
    if (is_tagged) {
      CHECK(std::vector<int64_t>(source.begin() + 1, source.end()) ==
            tagged.encode(text.source[text.source.size() - 2 + static_cast<size_t>(pair - first_tagged)]));
    }
  }
  std::vector<int64_t> with_tag = tagged.encode("a dog");
  with_tag.insert(with_tag.begin(), tag);
  CHECK(tagged.decode(with_tag) == "a dog");

  // Another tagging makes the file stale; a vocabulary without the tag cannot prepare it.
  recipe.tags = {"<bt>", ""};
  CHECK(why_stale(path, recipe, tagged, tagged) == "the corpora's tags changed");
  const Vocabulary plain = toy_vocabulary(recipe);
  CHECK_THROWS_WITH(prepare_corpus(path, recipe, plain, plain, 1),
                    Catch::StartsWith("train-tags or train-languages: <bt> is not reserved in the source vocabulary"));
  fs::remove_all(dir);
}

TEST_CASE("target-language tokens: each corpus's sources start with its language's token, then its tag", "[corpus]") {
  const fs::path dir = scratch("languages");
  CorpusRecipe recipe = toy_recipe(dir, 40);
  write_file_atomic((dir / "bt.src").string(), "a dog runs\nthe cat\n");
  write_file_atomic((dir / "bt.tgt").string(), "ein Hund\ndie Katze\n");
  recipe.source_files.push_back((dir / "bt.src").string());
  recipe.target_files.push_back((dir / "bt.tgt").string());
  const CorpusSpec real{{}, {}, 1, "", "de"}, back{{}, {}, 1, "<bt>", "en"};
  CHECK(real.source_tokens() == "<2de>");
  CHECK(back.source_tokens() == "<2en> <bt>");
  CHECK(vocabulary_tags({real, back}, "<2fr>") == std::vector<std::string>{"<2de>", "<2en>", "<bt>", "<2fr>"});
  recipe.tags = {real.source_tokens(), back.source_tokens()};

  ParallelText text;
  CorpusStats stats;
  for_each_pair(recipe.source_files, recipe.target_files, stats, [&](std::string& source, std::string& target) {
    text.source.push_back(source);
    text.target.push_back(target);
  });
  const VocabularyTrainingOptions options{
      VocabType::kUnigram, 150, 1, 1, false, vocabulary_tags({real, back}, "<2fr>")};
  const Vocabulary vocabulary =
      Vocabulary::from_serialized(train_vocabulary({&text.source, &text.target}, options), "languages");
  const int64_t de = vocabulary.tag_id("<2de>"), en = vocabulary.tag_id("<2en>"), bt = vocabulary.tag_id("<bt>");
  REQUIRE(de > kEosId);
  REQUIRE(en > kEosId);
  REQUIRE(bt > kEosId);
  CHECK(vocabulary.decode({de, en, bt}).empty());  // control symbols: never in an output

  const std::string path = (dir / "train.corpus").string();
  prepare_corpus(path, recipe, vocabulary, vocabulary, 2);
  std::string why;
  const std::optional<PreparedCorpus> prepared = open_prepared_corpus(path, recipe, vocabulary, vocabulary, why);
  REQUIRE(prepared);
  const int64_t first_back = prepared->file_pairs[0];
  REQUIRE(prepared->corpus.size() == first_back + 2);
  for (int64_t pair = 0; pair < prepared->corpus.size(); ++pair) {
    const std::vector<int64_t> source = prepared->corpus.source(pair);
    const std::string& line = text.source[static_cast<size_t>(pair)];
    std::vector<int64_t> expected = vocabulary.encode(line);
    if (pair < first_back) {
      expected.insert(expected.begin(), de);
    } else {
      expected.insert(expected.begin(), {en, bt});
    }
    CHECK(source == expected);
    CHECK(prepared->corpus.target(pair) == vocabulary.encode(text.target[static_cast<size_t>(pair)]));
  }
  recipe.tags = {"<2fr>", back.source_tokens()};  // another language: another corpus
  CHECK(why_stale(path, recipe, vocabulary, vocabulary) == "the corpora's tags changed");
  fs::remove_all(dir);
}

TEST_CASE(
    "subword sampling: each draw segments anew, decodes to the same text, keeps the tokens and repeats for a seed",
    "[corpus]") {
  const fs::path dir = scratch("sampling");
  const CorpusRecipe recipe = toy_recipe(dir, 80);
  ParallelText text;
  CorpusStats stats;
  for_each_pair(recipe.source_files, recipe.target_files, stats, [&](std::string& source, std::string& target) {
    text.source.push_back(source);
    text.target.push_back(target);
  });
  for (const VocabType type : {VocabType::kUnigram, VocabType::kBpe}) {
    INFO(to_string(type));
    const VocabularyTrainingOptions options{type, 150, 1, 1, false, {"<2de>"}};
    const Vocabulary vocabulary =
        Vocabulary::from_serialized(train_vocabulary({&text.source, &text.target}, options), "sampling");
    const int64_t tag = vocabulary.tag_id("<2de>");
    REQUIRE(tag > kEosId);
    std::vector<Example> examples;
    for (size_t i = 0; i < text.source.size(); ++i) {
      Example example{vocabulary.encode(text.source[i]), vocabulary.encode(text.target[i])};
      example.source.insert(example.source.begin(), tag);
      examples.push_back(std::move(example));
    }
    const TokenCorpus corpus = corpus_in_memory(examples, 2);
    std::vector<int64_t> pairs = all_pairs(corpus);
    pairs.pop_back();  // the last pair is not drawn: it stays as it is
    const SubwordSampling sampling{type == VocabType::kUnigram ? 0.2 : 0.3, -1};
    const TokenCorpus first = sample_segmentations(corpus, pairs, vocabulary, vocabulary, sampling, 7).get().corpus;
    const TokenCorpus again = sample_segmentations(corpus, pairs, vocabulary, vocabulary, sampling, 7).get().corpus;
    const TokenCorpus other = sample_segmentations(corpus, pairs, vocabulary, vocabulary, sampling, 8).get().corpus;
    REQUIRE(first.size() == corpus.size());
    int64_t changed = 0, differ = 0;
    for (int64_t pair = 0; pair < corpus.size(); ++pair) {
      const std::vector<int64_t> source = first.source(pair), target = first.target(pair);
      CHECK(source.front() == tag);
      CHECK(vocabulary.decode(source) == vocabulary.decode(corpus.source(pair)));
      CHECK(vocabulary.decode(target) == vocabulary.decode(corpus.target(pair)));
      CHECK(source == again.source(pair));
      CHECK(target == again.target(pair));
      if (source != corpus.source(pair) || target != corpus.target(pair)) ++changed;
      if (source != other.source(pair) || target != other.target(pair)) ++differ;
    }
    CHECK(first.source(corpus.size() - 1) == corpus.source(corpus.size() - 1));
    CHECK(changed > corpus.size() / 2);  // most pairs get another segmentation than the best one
    CHECK(differ > corpus.size() / 2);   // and another seed (another epoch) another one again
  }
  fs::remove_all(dir);
}

TEST_CASE("train-temperature: corpus shares n^(1/T) of an epoch as long as all corpora", "[corpus]") {
  const std::vector<int64_t> sizes = {9000, 1000};
  const std::vector<double> as_they_are = temperature_weights(sizes, 1);
  CHECK(as_they_are[0] == Approx(1));
  CHECK(as_they_are[1] == Approx(1));
  // T = 2: shares sqrt(9000) : sqrt(1000) = 3 : 1 of 10000 pairs.
  const std::vector<double> tempered = temperature_weights(sizes, 2);
  CHECK(tempered[0] * 9000 == Approx(7500));
  CHECK(tempered[1] * 1000 == Approx(2500));
  // A large T: nearly the same share each.
  const std::vector<double> flat = temperature_weights(sizes, 1000);
  CHECK(flat[0] * 9000 == Approx(5000).epsilon(0.01));
  CHECK(flat[1] * 1000 == Approx(5000).epsilon(0.01));
  CHECK(temperature_weights({5, 0}, 5)[1] == 1);
  // mix_epoch takes those shares.
  std::vector<int64_t> big(9000), small(1000);
  std::iota(big.begin(), big.end(), 0);
  std::iota(small.begin(), small.end(), 9000);
  const EpochMix mix = mix_epoch({{"big", tempered[0], "", big}, {"small", tempered[1], "", small}}, 3);
  CHECK(mix.taken == std::vector<int64_t>{7500, 2500});
}

TEST_CASE("corpus lists: each entry is a corpus, and a bad weight, tag or count names its key", "[corpus]") {
  const fs::path dir = scratch("lists");
  for (const char* name : {"a.de", "a.en", "b1.de", "b2.de", "b1.en", "b2.en"}) {
    write_file_atomic((dir / name).string(), "x\n");
  }
  const std::string a = (dir / "a").string(), b = (dir / "b").string();
  const std::vector<CorpusSpec> corpora =
      corpus_specs({a + ".de," + b + "*.de", a + ".en," + b + "*.en", "2,0.25", ",<bt>"});
  REQUIRE(corpora.size() == 2);
  CHECK(corpora[0].source_files == std::vector<std::string>{a + ".de"});
  CHECK(corpora[1].target_files == std::vector<std::string>{b + "1.en", b + "2.en"});
  CHECK(corpora[0].weight == 2);
  CHECK(corpora[1].weight == 0.25);
  CHECK(corpora[0].tag.empty());
  CHECK(corpora[1].tag == "<bt>");
  CHECK(vocabulary_tags(corpora, "<ft>,<bt>") == std::vector<std::string>{"<bt>", "<ft>"});

  const std::string sources = a + ".de," + b + "*.de", targets = a + ".en," + b + "*.en";
  CHECK_THROWS_WITH(corpus_specs({sources, targets, "1,-2", ""}), Catch::StartsWith("train-weights: '-2'"));
  CHECK_THROWS_WITH(corpus_specs({sources, targets, "1,x", ""}), Catch::StartsWith("train-weights: 'x'"));
  CHECK_THROWS_WITH(corpus_specs({sources, targets, "1,2.5e9", ""}), Catch::StartsWith("train-weights"));
  CHECK_THROWS_WITH(corpus_specs({sources, targets, "1", ""}),
                    Catch::StartsWith("train-weights: 1 weight for 2 corpora"));
  CHECK_THROWS_WITH(corpus_specs({sources, targets, "", "<bt>"}), Catch::StartsWith("train-tags: 1 item for 2"));
  CHECK_THROWS_WITH(corpus_specs({sources, targets, "", ",bt"}), Catch::StartsWith("train-tags: 'bt' is not a tag"));
  CHECK_THROWS_WITH(corpus_specs({sources, targets, "", ",<b t>"}), Catch::StartsWith("train-tags: '<b t>'"));
  CHECK_THROWS_WITH(corpus_specs({sources, a + ".en", "", ""}), Catch::StartsWith("train-target: 1 entry but"));
  CHECK_THROWS_WITH(corpus_specs({sources, a + ".en," + b + "1.en", "", ""}),
                    Catch::StartsWith("train-target: '" + b + "1.en' names 1 file but"));
  const std::vector<CorpusSpec> multilingual = corpus_specs({sources, targets, "", ",<bt>", "en,pt-BR"});
  CHECK(multilingual[0].language == "en");
  CHECK(multilingual[1].source_tokens() == "<2pt-BR> <bt>");
  CHECK_THROWS_WITH(corpus_specs({sources, targets, "", "", "en"}),
                    Catch::StartsWith("train-languages: 1 language for 2 corpora"));
  CHECK_THROWS_WITH(corpus_specs({sources, targets, "", "", "en,"}),
                    Catch::StartsWith("train-languages: a corpus without a language"));
  CHECK_THROWS_WITH(corpus_specs({sources, targets, "", "", "en,English"}),
                    Catch::StartsWith("train-languages: \"English\" is not an ISO 639 language code"));
  CHECK_THROWS_WITH(corpus_specs({a + ".de," + b + "*.xx", targets, "", ""}),
                    Catch::StartsWith("train-source: '" + b + "*.xx' matches no file"));
  fs::remove_all(dir);
}
