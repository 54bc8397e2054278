// Lexical shortlists (search/shortlist.h): how they are counted, the file, and its checks. How a
// search runs over one is in test_search.cpp.
#include <unistd.h>
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>

#include "helpers.h"
#include "search/shortlist.h"
#include "text/prepared_corpus.h"
#include "text/token_corpus.h"
#include "text/vocabulary.h"
#include "util/io.h"

using namespace nmt;
using namespace nmt::testing;
namespace fs = std::filesystem;

namespace {

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("nmt_shortlist_" + std::to_string(::getpid())) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// A vocabulary of `size` pieces from the toy corpus: the shortlist needs only its size and checksum.
Vocabulary toy_vocabulary(int size) {
  const std::vector<std::string> lines = read_lines(source_path("data/toy/train.src"));
  return Vocabulary::from_serialized(train_vocabulary({&lines}, {VocabType::kBpe, size, 1, 1, false, {}}), "toy");
}

// Pairs whose counts are worked out by hand below.
TokenCorpus hand_corpus() {
  return corpus_in_memory({{{10, 11}, {20, 21, 30}}, {{10}, {20, 30}}, {{11, 12}, {21, 30}}, {{12}, {22, 30, 30}}}, 4);
}

}  // namespace

TEST_CASE("shortlist: Dice lists with their ties, the frequent subwords, and a batch's union", "[shortlist]") {
  const Vocabulary vocabulary = toy_vocabulary(100);
  const Shortlist shortlist = Shortlist::build(hand_corpus(), vocabulary, vocabulary, {2, 1, 100}, "hand");
  // c(10) = c(11) = c(12) = 2; c(20) = c(21) = 2, c(22) = 1, c(30) = 4 pairs (5 tokens).
  // dice(10, 20) = 2*2/(2+2) = 1, dice(10, 30) = 2*2/(2+4) = 0.67, dice(10, 21) = 2/(2+2) = 0.5.
  CHECK(shortlist.translations(10) == std::vector<int64_t>{20, 30});
  CHECK(shortlist.translations(11) == std::vector<int64_t>{21, 30});
  // dice(12, 22) = 2/(2+1) = dice(12, 30) = 4/(2+4): the more frequent target first.
  CHECK(shortlist.translations(12) == std::vector<int64_t>{30, 22});
  CHECK(shortlist.translations(13).empty());
  CHECK(shortlist.frequent() == std::vector<uint32_t>{30});
  CHECK(shortlist.pairs_counted() == 4);
  // The special ids, the frequent one, 10's list and the extra token, sorted.
  const std::vector<int64_t> source{10, 3};
  const torch::Tensor ids = shortlist.select({&source}, {25, 20});
  CHECK(std::vector<int64_t>(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + ids.numel()) ==
        std::vector<int64_t>{0, 1, 2, 3, 20, 25, 30});

  // At most two pairs: the first and the third (evenly spread).
  const Shortlist sampled = Shortlist::build(hand_corpus(), vocabulary, vocabulary, {2, 1, 2}, "hand");
  CHECK(sampled.pairs_counted() == 2);
  // dice(12, 21) = dice(12, 30) = 2/(1+2), and both have 2 tokens: the lower id first.
  CHECK(sampled.translations(12) == std::vector<int64_t>{21, 30});
}

TEST_CASE("shortlist: the file round trip, and damaged, foreign and mismatched files", "[shortlist]") {
  const fs::path dir = scratch("file");
  const Vocabulary vocabulary = toy_vocabulary(100), other = toy_vocabulary(90);
  const Shortlist built = Shortlist::build(hand_corpus(), vocabulary, vocabulary, {2, 1, 100}, "models/hand/best.ckpt");
  const std::string path = (dir / "shortlist.bin").string();
  built.write(path);
  const Shortlist read = Shortlist::read(path);
  for (int64_t s = 0; s < vocabulary.size(); ++s) CHECK(read.translations(s) == built.translations(s));
  CHECK(read.frequent() == built.frequent());
  CHECK(read.pairs_counted() == 4);
  CHECK(read.sizes().batch_sentences == ShortlistSizes{}.batch_sentences);
  Shortlist::build(hand_corpus(), vocabulary, vocabulary, {2, 1, 100, 3}, "hand").write(path);
  CHECK(Shortlist::read(path).sizes().batch_sentences == 3);
  // A file from before the key (made for batches of --batch-size): the key renamed, the same length.
  std::string without_key = read_file(path);
  const size_t key = without_key.find("\"batch_sentences\"");
  REQUIRE(key != std::string::npos);
  without_key[key + 1] = 'B';
  write_file_atomic(path, without_key);
  CHECK(Shortlist::read(path).sizes().batch_sentences == 0);
  built.write(path);
  CHECK_NOTHROW(read.check_vocabularies(vocabulary, vocabulary, "models/hand/best.ckpt"));
  // Other vocabularies: the error names the file, the model it was made for and the one given.
  CHECK_THROWS_WITH(read.check_vocabularies(vocabulary, other, "models/other/best.ckpt"),
                    Catch::Contains(path) && Catch::Contains("models/hand/best.ckpt") &&
                        Catch::Contains("models/other/best.ckpt") && Catch::Contains("nmt shortlist --model"));

  const std::string bytes = read_file(path);
  const auto damaged = [&](const std::string& name, const std::string& content) {
    const std::string file = (dir / name).string();
    write_file_atomic(file, content);
    return file;
  };
  CHECK_THROWS_AS(Shortlist::read((dir / "missing.bin").string()), FileNotFound);
  CHECK_THROWS_WITH(Shortlist::read(damaged("foreign.bin", "hello world, not a shortlist")),
                    Catch::Contains("not a shortlist file"));
  for (const size_t cut : {size_t{9}, size_t{30}, bytes.size() / 2, bytes.size() - 3}) {
    INFO("cut to " << cut << " bytes");
    CHECK_THROWS_WITH(Shortlist::read(damaged("cut.bin", bytes.substr(0, cut))),
                      Catch::Contains("make it again with nmt shortlist"));
  }
  CHECK_THROWS_WITH(Shortlist::read(damaged("longer.bin", bytes + "more")), Catch::Contains("no end mark"));
  // The last list id (just before the end mark) pointing past the vocabulary.
  std::string out_of_range = bytes;
  const uint32_t huge = 100000;
  std::memcpy(out_of_range.data() + out_of_range.size() - 8 - sizeof huge, &huge, sizeof huge);
  CHECK_THROWS_WITH(Shortlist::read(damaged("range.bin", out_of_range)), Catch::Contains("out of range"));
  std::string version = bytes;
  version[8] = 9;
  CHECK_THROWS_WITH(Shortlist::read(damaged("version.bin", version)), Catch::Contains("format version 9"));
}
