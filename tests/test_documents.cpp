// Real text in, real text out: lines cut into sentences and joined again, long sentences cut at
// their clauses, the output caps reported, and the language keys a model records.
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <random>

#include "cli_helpers.h"
#include "config/train_config.h"
#include "search/translator.h"
#include "text/sentences.h"
#include "text/special_tokens.h"
#include "text/vocabulary.h"
#include "util/io.h"

using namespace nmt;
using namespace nmt::testing;
namespace fs = std::filesystem;

namespace {

std::string joined_back(const SplitLine& split) { return join_sentences(split, split.sentences); }

// A sentence's translation as the search and finish_translation leave it: `tokens` output ids, a
// row of attention per token and one for EOS over `pieces` source pieces and EOS.
Translation sentence_translation(const std::string& sentence, size_t pieces, std::vector<int64_t> tokens,
                                 const std::string& text, double score, float fill) {
  Translation translation;
  for (size_t i = 0; i < pieces; ++i) translation.source_pieces.push_back("p" + std::to_string(i));
  Hypothesis hypothesis;
  hypothesis.tokens = std::move(tokens);
  hypothesis.score = score;
  hypothesis.log_probability = 2 * score;
  hypothesis.attention =
      torch::full({static_cast<int64_t>(hypothesis.tokens.size()) + 1, static_cast<int64_t>(pieces) + 1}, fill);
  translation.hypotheses.push_back(hypothesis);
  translation.texts.push_back(text);
  translation.sentences = {sentence};
  return translation;
}

}  // namespace

TEST_CASE("sentences: ICU's rules with the language's abbreviations, and the line's own spacing", "[text]") {
  const SentenceSplitter english("en");
  const SplitLine split = english.split("Mr. Smith went to Washington. He saw it!  Then he left.");
  REQUIRE(split.sentences == std::vector<std::string>{"Mr. Smith went to Washington.", "He saw it!", "Then he left."});
  CHECK(split.gaps == std::vector<std::string>{"", " ", "  ", ""});

  // German abbreviations do not end a sentence in German; the rules every language shares do.
  const std::string german = "Das ist z.B. Obst. Ja.";
  const SentenceSplitter splitter_de("de");
  CHECK(splitter_de.split(german).sentences == std::vector<std::string>{"Das ist z.B. Obst.", "Ja."});
  CHECK(SentenceSplitter("").split(german).sentences.size() == 3);
  // An abbreviation is a whole word: German's "r." does not keep "Vater." from ending a sentence.
  CHECK(splitter_de.split("Er sah den Vater. Dann ging er um 3 Uhr. Nr. 5 kam.").sentences ==
        std::vector<std::string>{"Er sah den Vater.", "Dann ging er um 3 Uhr.", "Nr. 5 kam."});
  CHECK(splitter_de.split("Er kam mit Dr.  ").sentences == std::vector<std::string>{"Er kam mit Dr."});

  // Leading and trailing space, other scripts, emoji: every byte comes back.
  for (const std::string line : {"  Hello there.  How are you?\t", "你好。再见。", "Ein 😀 kam. Dann ging’s weiter…",
                                 "no end mark at all", "Straße 3. Stock. Ende"}) {
    INFO(line);
    const SplitLine each = english.split(line);
    CHECK(joined_back(each) == line);
    CHECK(each.gaps.size() == each.sentences.size() + 1);
    for (const std::string& sentence : each.sentences) {
      CHECK_FALSE(sentence.empty());
      CHECK(sentence.front() != ' ');
      CHECK(sentence.back() != ' ');
    }
  }
  CHECK(english.split("你好。再见。").sentences.size() == 2);
  CHECK(english.split("  Hello there.  How are you?\t").gaps.front() == "  ");

  // White space only, and empty: no sentence; joined, an empty line.
  for (const std::string line : {"", "   ", "\t"}) {
    const SplitLine each = english.split(line);
    CHECK(each.sentences.empty());
    CHECK(joined_back(each).empty());
  }
}

TEST_CASE("sentences: long lines, many sentences, invalid UTF-8 and unknown languages", "[text]") {
  const SentenceSplitter english("en");
  std::string many;
  for (int i = 0; i < 1000; ++i) many += "This is sentence number " + std::to_string(i) + ". ";
  const SplitLine split = english.split(many);
  REQUIRE(split.sentences.size() == 1000);
  CHECK(split.sentences[999] == "This is sentence number 999.");
  CHECK(joined_back(split) == many);

  const std::string long_line(100000, 'a');
  CHECK(english.split(long_line).sentences == std::vector<std::string>{long_line});

  CHECK_THROWS_WITH(english.split("caf\xC3"), Catch::Contains("not valid UTF-8"));

  CHECK(language_problem("de").empty());
  CHECK(language_problem("pt-BR").empty());
  CHECK(language_problem("deu").empty());
  CHECK(language_problem("").empty());
  for (const std::string bad : {"english", "xx", "DE", "de-", "de-brazil", "src"}) {
    INFO(bad);
    CHECK_FALSE(language_problem(bad).empty());
    CHECK_THROWS_WITH(SentenceSplitter(bad), Catch::Contains("ISO 639"));
  }
}

// Subwords as words: what ClauseCutter counts, for tests that know each part's length.
size_t words_in(std::string_view text) {
  size_t words = 0;
  bool in_word = false;
  for (char c : text) {
    const bool space = c == ' ';
    if (!space && !in_word) ++words;
    in_word = !space;
  }
  return words;
}

TEST_CASE("clauses: long sentences cut after commas, semicolons and colons into even parts within the limit",
          "[text]") {
  const ClauseCutter cutter(4, words_in);
  // Within the limit, or nowhere to cut: the sentence itself.
  CHECK(cutter.cut("a b c d").sentences == std::vector<std::string>{"a b c d"});
  CHECK(cutter.cut("a b c d e f g h").sentences == std::vector<std::string>{"a b c d e f g h"});
  // Seven words: two parts, cut where the parts are most even (3 + 4, not 1 + 6 or 6 + 1).
  const SplitLine two = cutter.cut("a, b c, d e; f g");
  CHECK(two.sentences == std::vector<std::string>{"a, b c,", "d e; f g"});
  CHECK(two.gaps == std::vector<std::string>{"", " ", ""});
  CHECK(joined_back(two) == "a, b c, d e; f g");
  // Colons, the white space kept as it was, and the fewest parts: clauses of 4 words in 3 parts.
  const SplitLine three = cutter.cut("one two three four:  five six seven eight;\tnine ten eleven twelve");
  CHECK(three.sentences ==
        std::vector<std::string>{"one two three four:", "five six seven eight;", "nine ten eleven twelve"});
  CHECK(joined_back(three) == "one two three four:  five six seven eight;\tnine ten eleven twelve");
  // A semicolon or colon before a comma when the parts stay within the limit: "a b; c d, e f" is
  // not cut as evenly as 4 + 2 after the comma, but 2 + 4 after the semicolon.
  CHECK(cutter.cut("a b; c d, e f").sentences == std::vector<std::string>{"a b;", "c d, e f"});
  // Commas too when the semicolon alone leaves a part too long.
  CHECK(cutter.cut("a, b c d e; f g").sentences == std::vector<std::string>{"a,", "b c d e;", "f g"});
  // Not inside numbers or times, nor where no space follows a Latin comma.
  CHECK(cutter.cut("um 12:30 und 3,5 kg x,y z w").sentences.size() == 1);
  // Ideographic commas need no space after them.
  const ClauseCutter characters(2, [](std::string_view text) {
    return static_cast<size_t>(std::count_if(text.begin(), text.end(), [](char c) { return (c & 0xC0) != 0x80; }));
  });
  const SplitLine chinese = characters.cut("我们、他们、你们");
  CHECK(chinese.sentences == std::vector<std::string>{"我们、", "他们、", "你们"});
  CHECK(joined_back(chinese) == "我们、他们、你们");
  // A part with no place inside stays whole and long; invalid UTF-8 is not cut.
  CHECK(cutter.cut("a b c d e f, g").sentences == std::vector<std::string>{"a b c d e f,", "g"});
  CHECK(cutter.cut("a b c, d e f, \xC3").sentences.size() == 1);
  CHECK_THROWS(ClauseCutter(0, words_in));

  // Every part within the limit when the places allow it, the sentence back byte for byte, and no
  // more parts than packing greedily would give.
  std::mt19937 random(7);
  for (int round = 0; round < 200; ++round) {
    std::string sentence;
    const int clauses = 1 + static_cast<int>(random() % 12);
    size_t total = 0;
    for (int c = 0; c < clauses; ++c) {
      const int words = 1 + static_cast<int>(random() % 4);
      for (int w = 0; w < words; ++w) sentence += std::string(sentence.empty() ? "" : " ") + "w";
      total += static_cast<size_t>(words);
      if (c + 1 < clauses) sentence += ",;:"[random() % 3];
    }
    const SplitLine parts = cutter.cut(sentence);
    INFO(sentence);
    CHECK(joined_back(parts) == sentence);
    if (total <= 4) CHECK(parts.sentences.size() == 1);
    for (const std::string& part : parts.sentences) CHECK(words_in(part) <= 4);
    CHECK(parts.sentences.size() <= (total + 3) / 4 * 2);
  }

  // A line's sentences with the long ones in parts, and which sentences are parts.
  const SplitLine line{{"a b.", "c, d e, f g h."}, {" ", " ", "\n"}};
  std::vector<size_t> origin;
  const SplitLine cut = cut_sentences(cutter, line, {2, 6}, &origin);
  CHECK(origin == std::vector<size_t>{0, 1, 1});
  CHECK(cut.sentences == std::vector<std::string>{"a b.", "c, d e,", "f g h."});
  CHECK(cut.gaps == std::vector<std::string>{" ", " ", " ", "\n"});
  CHECK(cut.cut == std::vector<size_t>{1, 2});
  CHECK(join_sentences(cut, cut.sentences) == " a b. c, d e, f g h.\n");
  // A line not split keeps its white space at the end.
  const SplitLine unsplit = cut_sentences(cutter, SplitLine{{"c, d e, f g h.  "}, {"", ""}}, {6});
  CHECK(unsplit.sentences.size() == 2);
  CHECK(join_sentences(unsplit, unsplit.sentences) == "c, d e, f g h.  ");
  std::vector<Translation> parts;
  for (size_t i = 0; i < 3; ++i) parts.push_back(sentence_translation(cut.sentences[i], 2, {5}, "x", -1.0, 0.5f));
  CHECK(join_translations(cut, std::move(parts)).cut == std::vector<size_t>{1, 2});
}

TEST_CASE("sentences: a line's translation joins its sentences' texts, tokens, scores and attention", "[text]") {
  const SplitLine split{{"One.", "Two three."}, {" ", "  ", "\n"}};
  std::vector<Translation> sentences;
  sentences.push_back(sentence_translation("One.", 2, {5, 6}, "Eins.", -1.0, 0.25f));
  sentences.push_back(sentence_translation("Two three.", 3, {7, 8, 9}, "Zwei drei.", -2.0, 0.5f));
  sentences[1].capped = {0};
  const Translation line = join_translations(split, std::move(sentences));
  REQUIRE(line.texts == std::vector<std::string>{" Eins.  Zwei drei.\n"});
  CHECK(line.sentences == std::vector<std::string>{"One.", "Two three."});
  CHECK(line.capped == std::vector<size_t>{1});
  CHECK(line.source_pieces.size() == 5);
  REQUIRE(line.hypotheses.size() == 1);
  const Hypothesis& hypothesis = line.hypotheses[0];
  CHECK(hypothesis.tokens == std::vector<int64_t>{5, 6, 7, 8, 9});
  CHECK(hypothesis.score == Approx(-3.0));
  CHECK(hypothesis.log_probability == Approx(-6.0));
  // Rows: 2 + 3 tokens and the last sentence's EOS; columns: 2 + 3 pieces and one EOS. Each
  // sentence's rows weigh only its own pieces, and its EOS weight goes to the line's EOS.
  REQUIRE(hypothesis.attention.sizes() == torch::IntArrayRef({6, 6}));
  const torch::Tensor weights = hypothesis.attention;
  CHECK(weights[0][0].item<float>() == 0.25f);
  CHECK(weights[0][2].item<float>() == 0.0f);
  CHECK(weights[0][5].item<float>() == 0.25f);
  CHECK(weights[2][0].item<float>() == 0.0f);
  CHECK(weights[2][2].item<float>() == 0.5f);
  CHECK(weights[5][4].item<float>() == 0.5f);
  CHECK(weights[5][5].item<float>() == 0.5f);
}

TEST_CASE("sentences: a model records its languages from the corpus file names or its keys", "[text]") {
  TrainConfig config;
  config.train_source = "data/train.de,data/bt.de";
  config.train_target = "data/train.en";
  TrainConfig filled = with_languages(config);
  CHECK(filled.model.source_language == "de");
  CHECK(filled.model.target_language == "en");
  config.train_source = "data/toy/train.src";  // not a language code
  config.model.target_language = "fr";         // given: kept
  filled = with_languages(config);
  CHECK(filled.model.source_language.empty());
  CHECK(filled.model.target_language == "fr");
}

TEST_CASE("cli: translate splits lines into sentences, keeps line order, and reports output caps", "[cli]") {
  const std::string model_dir = (work_directory() / "documents_model").string();
  const CommandResult trained = run_nmt(tiny_train_arguments(model_dir, 40, 40) + " --source-language en");
  INFO(trained.output);
  REQUIRE(trained.status == 0);
  const std::string first = "A frog sees the bridge .", second = "The dog eats .";
  const std::string input = (work_directory() / "documents_input.txt").string();
  write_file_atomic(input, first + "  " + second + "\n\n" + second + "\n" + first + "\n");
  const std::string output = (work_directory() / "documents_output.txt").string();
  const std::string decode = " --beam-size 2 --max-output-length 12 --quiet --threads 1 --output " + output;
  const CommandResult split = run_nmt("translate --model " + model_dir + " --input " + input + decode);
  INFO(split.output);
  REQUIRE(split.status == 0);
  const std::vector<std::string> lines = read_lines(output);
  REQUIRE(lines.size() == 4);
  CHECK(lines[1].empty());
  // The two-sentence line is its sentences' translations, each as when it stands alone, with the
  // line's two spaces between them.
  CHECK(lines[0] == lines[3] + "  " + lines[2]);

  const CommandResult whole =
      run_nmt("translate --model " + model_dir + " --input " + input + decode + " --split-sentences no");
  REQUIRE(whole.status == 0);
  REQUIRE(read_lines(output).size() == 4);
  CHECK(read_lines(output)[2] == lines[2]);

  // A cap of 2 subwords cuts every sentence: each line is named once on standard error.
  const CommandResult capped =
      run_nmt("translate --model " + model_dir + " --input " + input + " --max-output-length 2 --threads 1 --output " +
              (work_directory() / "documents_capped.txt").string());
  REQUIRE(capped.status == 0);
  CHECK_THAT(capped.output,
             Catch::Contains("documents_input.txt:1: ") && Catch::Contains("of its 2 sentences were cut"));
  CHECK_THAT(capped.output, Catch::Contains("documents_input.txt:3: its translation was cut"));
  CHECK_THAT(capped.output, Catch::Contains("--max-output-length 2"));
  CHECK_FALSE(Catch::Contains("documents_input.txt:2:").match(capped.output));
  const CommandResult quiet = run_nmt("translate --model " + model_dir + " --input " + input +
                                      " --max-output-length 2 --quiet --threads 1 --output " +
                                      (work_directory() / "documents_capped.txt").string());
  CHECK(quiet.output.empty());

  // JSON lines: the same texts, with the sentences, the words and their probabilities.
  const CommandResult jsonl =
      run_nmt("translate --model " + model_dir + " --input " + input + decode + " --output-format jsonl --alignment");
  INFO(jsonl.output);
  REQUIRE(jsonl.status == 0);
  const std::vector<std::string> records = read_lines(output);
  REQUIRE(records.size() == 4);
  for (size_t i = 0; i < records.size(); ++i) {
    const nlohmann::json record = nlohmann::json::parse(records[i]);
    INFO(records[i]);
    CHECK(record["line"] == i + 1);
    CHECK(record["text"] == lines[i]);
    CHECK(record.contains("alignment"));
    std::string words;
    for (const auto& word : record["words"]) {
      words += (words.empty() ? "" : " ") + word["word"].get<std::string>();
      CHECK(word["probability"].get<double>() > 0);
      CHECK(word["probability"].get<double>() <= 1);
    }
    if (i == 1) {
      CHECK(record["confidence"].is_null());
      CHECK(record["sentences"].empty());
      continue;
    }
    CHECK(record["confidence"].get<double>() > 0);
    CHECK(record["confidence"].get<double>() <= 1);
    // Words are the translation's, split where its subwords start a word.
    if (i == 0) {
      CHECK(record["sentences"] == nlohmann::json::array({first, second}));
      CHECK(words == lines[3] + " " + lines[2]);
    } else {
      CHECK(record["sentences"].size() == 1);
      CHECK(words == lines[i]);
    }
  }
  CHECK_THAT(
      run_nmt("translate --model " + model_dir + " --input " + input + " --output-format jsonl --with-scores").output,
      Catch::Contains("leave out --with-scores"));

  const CommandResult bad = run_nmt("translate --model " + model_dir + " --input " + input + " --source-language xx");
  CHECK(bad.status != 0);
  CHECK_THAT(bad.output, Catch::Contains("--source-language \"xx\" is not an ISO 639 language code"));
  const CommandResult bad_key = run_nmt(tiny_train_arguments(model_dir + "_bad") + " --source-language english");
  CHECK(bad_key.status != 0);
  CHECK_THAT(bad_key.output, Catch::Contains("source-language"));
}

TEST_CASE("cli: translate cuts a sentence longer than training kept at its commas, and says so", "[cli]") {
  const std::string model_dir = (work_directory() / "documents_cut_model").string();
  const CommandResult trained = run_nmt(tiny_train_arguments(model_dir, 20, 20));
  INFO(trained.output);
  REQUIRE(trained.status == 0);
  const std::string clause = "a cat likes this new merchant ,";
  const std::string line = clause + " " + clause + " " + clause + " the dog eats .";
  std::string very_long;  // far beyond the 100 subwords of training's max-length
  for (int i = 0; i < 30; ++i) very_long += clause + " ";
  very_long += "the dog eats .";
  const std::string input = (work_directory() / "cut_input.txt").string();
  write_file_atomic(input, line + "\n" + very_long + "\n" + clause + "\n");
  const std::string output = (work_directory() / "cut_output.txt").string();
  const std::string decode = " --beam-size 2 --threads 1 --output-format jsonl --output " + output;

  const CommandResult cut =
      run_nmt("translate --model " + model_dir + " --input " + input + decode + " --cut-sentences 8");
  INFO(cut.output);
  REQUIRE(cut.status == 0);
  CHECK_THAT(cut.output,
             Catch::Contains("cut_input.txt:1: ") && Catch::Contains("sentences are parts of a longer one"));
  // Line 3, one clause, is not cut (a warning of its output cap may name it).
  CHECK_FALSE(Catch::Contains("cut_input.txt:3: 1 of its").match(cut.output));
  std::vector<nlohmann::json> records;
  for (const std::string& record : read_lines(output)) records.push_back(nlohmann::json::parse(record));
  REQUIRE(records.size() == 3);
  // The first line in parts, each part a whole clause, every one of them named in "cut".
  const auto parts = records[0]["sentences"].get<std::vector<std::string>>();
  REQUIRE(parts.size() >= 2);
  std::string joined;
  for (const std::string& part : parts) joined += (joined.empty() ? "" : " ") + part;
  CHECK(joined == line);
  for (size_t i = 0; i + 1 < parts.size(); ++i) CHECK(parts[i].back() == ',');
  CHECK(records[0]["cut"].size() == parts.size());
  CHECK(records[2]["cut"].empty());
  // Each part translated as it is alone, joined with the line's spacing.
  const std::string parts_input = (work_directory() / "cut_parts.txt").string();
  std::string parts_lines;
  for (const std::string& part : parts) parts_lines += part + "\n";
  write_file_atomic(parts_input, parts_lines);
  const std::string parts_output = (work_directory() / "cut_parts_output.txt").string();
  REQUIRE(run_nmt("translate --model " + model_dir + " --input " + parts_input +
                  " --beam-size 2 --threads 1 --cut-sentences no --output " + parts_output)
              .status == 0);
  std::string expected;
  for (const std::string& text : read_lines(parts_output)) expected += (expected.empty() ? "" : " ") + text;
  CHECK(records[0]["text"] == expected);

  // auto, the default: training's max-length (100 subwords), so only the very long line is cut.
  REQUIRE(run_nmt("translate --model " + model_dir + " --input " + input + decode).status == 0);
  records.clear();
  for (const std::string& record : read_lines(output)) records.push_back(nlohmann::json::parse(record));
  REQUIRE(records.size() == 3);
  CHECK(records[0]["sentences"].size() == 1);
  CHECK(records[0]["cut"].empty());
  CHECK(records[1]["sentences"].size() >= 2);
  CHECK(records[1]["cut"].size() == records[1]["sentences"].size());

  // no: every sentence whole.
  REQUIRE(run_nmt("translate --model " + model_dir + " --input " + input + decode + " --cut-sentences no").status == 0);
  for (const std::string& record : read_lines(output)) {
    CHECK(nlohmann::json::parse(record)["cut"].empty());
    CHECK(nlohmann::json::parse(record)["sentences"].size() == 1);
  }
  for (const std::string bad : {"0", "some", "-3", "12x"}) {
    const CommandResult refused =
        run_nmt("translate --model " + model_dir + " --input " + input + " --cut-sentences " + bad);
    INFO(bad);
    CHECK(refused.status != 0);
    CHECK_THAT(refused.output, Catch::Contains("--cut-sentences '" + bad + "' is none of auto, no"));
  }
}

TEST_CASE("cli: byte fallback: a character the training text lacks encodes without <unk> and decodes back", "[cli]") {
  const std::string model_dir = (work_directory() / "bytes_model").string();
  const CommandResult trained = run_nmt(tiny_train_arguments(model_dir) + " --vocab-size 400 --byte-fallback true");
  INFO(trained.output);
  REQUIRE(trained.status == 0);
  const std::string path = model_dir + "/vocab.joint.model";
  const Vocabulary bytes = Vocabulary::from_serialized(read_file(path), path);
  const std::string unseen = "Zoë 😀 漢字 ß";  // none of these characters is in the toy corpus
  const std::vector<int64_t> ids = bytes.encode(unseen);
  CHECK(std::find(ids.begin(), ids.end(), kUnkId) == ids.end());
  CHECK(bytes.decode(ids) == unseen);

  // Without it (the models before this key), the same text has <unk> and loses its characters.
  const std::string plain_dir = (work_directory() / "no_bytes_model").string();
  REQUIRE(run_nmt(tiny_train_arguments(plain_dir) + " --vocab-size 400").status == 0);
  const Vocabulary plain =
      Vocabulary::from_serialized(read_file(plain_dir + "/vocab.joint.model"), plain_dir + "/vocab.joint.model");
  const std::vector<int64_t> plain_ids = plain.encode(unseen);
  CHECK(std::find(plain_ids.begin(), plain_ids.end(), kUnkId) != plain_ids.end());

  const CommandResult small = run_nmt(tiny_train_arguments(model_dir + "_small") + " --byte-fallback true");
  CHECK(small.status != 0);
  CHECK_THAT(small.output, Catch::Contains("byte-fallback") && Catch::Contains("vocab-size of at least 384"));
}
