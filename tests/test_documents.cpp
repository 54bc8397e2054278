// Real text in, real text out: lines cut into sentences and joined again, the output caps
// reported, and the language keys a model records.
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

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
