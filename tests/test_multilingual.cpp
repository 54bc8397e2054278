// Multilingual models (text/languages.h): training corpora that name their target languages, dev
// sets validated one by one, and the target language chosen by translate, evaluate, score and
// serve; subword regularisation during training, never in validation. The toy corpus both ways makes a model of two
// directions: into the toy language ("eo" here) and into English.
#include <httplib.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "config/train_config.h"
#include "process_helpers.h"
#include "text/corpus.h"
#include "text/languages.h"
#include "text/vocabulary.h"
#include "util/io.h"

using namespace nmt;
using namespace nmt::testing;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// The first `count` lines of data/toy/NAME, in the work directory as multilingual_NAME.
std::string toy_head(const std::string& name, size_t count) {
  const std::vector<std::string> lines = read_lines(kToy + "/" + name);
  std::string text;
  for (size_t i = 0; i < count && i < lines.size(); ++i) text += lines[i] + "\n";
  const std::string path = (work_directory() / ("multilingual_" + name)).string();
  write_file_atomic(path, text);
  return path;
}

// The dev sets: toy into eo (dev1), and back into English (dev2).
struct DevFiles {
  std::string english = toy_head("dev.src", 60), toy = toy_head("dev.tgt", 60);
};
const DevFiles& dev_files() {
  static const DevFiles files;
  return files;
}

// One model of both directions for every test here, trained to its last validation.
const std::string& two_way_model() {
  static const std::string model_dir = [] {
    const std::string dir = (work_directory() / "multilingual_model").string();
    const std::string train_source = kToy + "/train.src," + kToy + "/train.tgt";
    const std::string train_target = kToy + "/train.tgt," + kToy + "/train.src";
    const DevFiles& dev = dev_files();
    CommandResult trained = run_nmt(
        "train --train-source " + train_source + " --train-target " + train_target +
        " --train-languages eo,en --train-temperature 2 --subword-alpha 0.2 --dev-source " + dev.english + "," +
        dev.toy + " --dev-target " + dev.toy + "," + dev.english + " --dev-languages eo,en --model-dir " + dir +
        " --vocab-size 300 --embedding-size 16 --encoder-hidden-size 8 --decoder-hidden-size 16 --attention-size 8"
        " --max-steps 20 --validate-every 10 --batch-tokens 400 --threads 1 --byte-fallback false");
    INFO(trained.output);
    REQUIRE(trained.status == 0);
    return dir;
  }();
  return model_dir;
}

// The JSON object of metrics.jsonl's last validation line.
json last_validation(const std::string& model_dir) {
  json last;
  for (const std::string& line : split_lines(read_file((fs::path(model_dir) / "metrics.jsonl").string()))) {
    const json entry = json::parse(line);
    if (entry.at("event") == "validation") last = entry;
  }
  return last;
}

// The JSON object an `evaluate --json` run printed (its last line).
json evaluation(const CommandResult& result) {
  const std::vector<std::string> lines = split_lines(result.output);
  REQUIRE_FALSE(lines.empty());
  return json::parse(lines.back());
}

}  // namespace

TEST_CASE("multilingual: dev sets are named by their files' languages, and a wrong list names its key", "[config]") {
  TrainConfig config;
  config.train_source = "a.de,b.fr";
  config.train_target = "a.en,b.en";
  config.train_languages = "en,en";
  config.dev_source = "val.de,val.fr";
  config.dev_target = "val.en,val.en";
  std::vector<DevSetSpec> sets = dev_sets(config);
  REQUIRE(sets.size() == 2);
  CHECK(sets[0].name == "de-en");
  CHECK(sets[1].name == "fr-en");
  CHECK(sets[1].language == "en");
  config.dev_source = "val.de,test.de";  // the same pair twice
  config.dev_target = "val.en,test.en";
  CHECK(dev_sets(config)[1].name == "de-en#2");
  config.dev_languages = "en";
  CHECK_THROWS_WITH(dev_sets(config), Catch::StartsWith("dev-languages: 1 for 2 dev sets"));
  config.dev_languages = "en,fr";
  CHECK_THROWS_WITH(dev_sets(config), Catch::StartsWith("dev-languages: fr (of test.en) is not among the languages"));
  config.dev_languages = "";
  config.dev_target = "val.en";
  CHECK_THROWS_WITH(dev_sets(config), Catch::StartsWith("dev-target: 1 entries but dev-source has 2"));
  config.dev_source = "val.src";
  config.dev_target = "val.tgt";
  CHECK_THROWS_WITH(dev_sets(config), Catch::StartsWith("dev-languages: val.tgt has no language code"));
  config.dev_languages = "en";
  CHECK(dev_sets(config)[0].name == "dev1");
  config.best_pair = "de-en";
  CHECK_THROWS_WITH(dev_sets(config), Catch::StartsWith("best-pair: 'de-en' is not a dev set; they are dev1"));

  // A model of one target language: no languages, none to give.
  config = TrainConfig();
  config.dev_source = "val.de";
  config.dev_target = "val.en";
  CHECK(dev_sets(config)[0].language.empty());
  config.dev_languages = "en";
  CHECK_THROWS_WITH(dev_sets(config), Catch::StartsWith("dev-languages: the training corpora name no target"));

  // The model's languages: train-languages' own; the target-language key only for one of them.
  config = TrainConfig();
  config.train_source = "a.de,b.fr";
  config.train_target = "a.en,b.en";
  config.train_languages = "en,en";
  TrainConfig filled = with_languages(config);
  CHECK(filled.model.source_language.empty());  // two source languages: neither
  CHECK(filled.model.target_language == "en");
  CHECK(filled.model.target_languages == std::vector<std::string>{"en"});
  config.train_source = "a.en,b.en";
  config.train_target = "a.de,b.fr";
  config.train_languages = "de,fr";
  filled = with_languages(config);
  CHECK(filled.model.source_language == "en");
  CHECK(filled.model.target_language.empty());
  CHECK(filled.model.target_languages == std::vector<std::string>{"de", "fr"});
}

TEST_CASE("multilingual: a request for a language names the ones the model knows", "[text]") {
  const std::vector<std::string> lines = {"a dog runs", "the cat sleeps", "ein Hund läuft"};
  VocabularyTrainingOptions options{VocabType::kUnigram, 60, 1, 1, false, {"<2de>", "<2en>"}};
  const Vocabulary vocabulary = Vocabulary::from_serialized(train_vocabulary({&lines}, options), "languages");
  const int64_t de = vocabulary.tag_id("<2de>");
  REQUIRE(de >= 0);
  CHECK(target_language_id({"de", "en"}, vocabulary, "de", "--target-language") == de);
  CHECK(target_language_id({"de"}, vocabulary, "", "--target-language") == de);  // the only one
  CHECK(target_language_id({}, vocabulary, "", "--target-language") == -1);
  CHECK_THROWS_WITH(target_language_id({"de", "en"}, vocabulary, "", "--target-language"),
                    "--target-language: this model translates into de and en; say which with --target-language");
  CHECK_THROWS_WITH(target_language_id({"de", "en"}, vocabulary, "fr", "target_language"),
                    "target_language: 'fr' is not a target language of this model; it translates into de and en");
  CHECK_THROWS_WITH(target_language_id({}, vocabulary, "de", "--target-language"),
                    Catch::StartsWith("--target-language: this model was trained without target languages"));
  CHECK_THROWS_WITH(target_language_id({"fr"}, vocabulary, "fr", "--target-language"), Catch::Contains("lacks <2fr>"));
  CHECK(distinct_languages("en,de,,en") == std::vector<std::string>{"en", "de"});
}

TEST_CASE("cli: a two-way model translates into the language asked, validates each pair as evaluate scores it",
          "[cli]") {
  const std::string model = two_way_model();
  const DevFiles& dev = dev_files();
  const std::string log = read_file((fs::path(model) / "train.log").string());
  CHECK_THAT(log, Catch::Contains("(weight ") && Catch::Contains(", into eo)") && Catch::Contains(", into en)"));
  CHECK_THAT(log, Catch::Contains("  dev1: loss ") && Catch::Contains("  dev2: loss "));
  CHECK_THAT(log, Catch::Contains("epoch 1: segmentations drawn anew (subword-alpha 0.2) in "));

  // The last validation's numbers per dev set are evaluate's of the same checkpoint and search:
  // the dev sets keep their one best segmentation while training samples its own.
  const json validation = last_validation(model);
  INFO(validation.dump());
  REQUIRE(validation.at("step") == 20);
  const json& sets = validation.at("dev_sets");
  REQUIRE(sets.size() == 2);
  CHECK(validation.at("dev_bleu").get<double>() ==
        Approx((sets.at("dev1").at("bleu").get<double>() + sets.at("dev2").at("bleu").get<double>()) / 2));
  const std::string greedy =
      " --checkpoint last --beam-size 1 --max-length-ratio 2 --split-sentences no --placeholders none"
      " --cut-sentences no --threads 1 --quiet --json";
  for (const auto& [name, source, reference, language] :
       {std::tuple{"dev1", dev.english, dev.toy, "eo"}, std::tuple{"dev2", dev.toy, dev.english, "en"}}) {
    INFO(name);
    const CommandResult evaluated = run_nmt("evaluate --model " + model + " --src " + source + " --ref " + reference +
                                            " --target-language " + language + greedy);
    INFO(evaluated.output);
    REQUIRE(evaluated.status == 0);
    const json scores = evaluation(evaluated);
    CHECK(scores.at("bleu").get<double>() == Approx(sets.at(name).at("bleu").get<double>()).margin(1e-6));
    CHECK(scores.at("chrf").get<double>() == Approx(sets.at(name).at("chrf").get<double>()).margin(1e-6));
  }

  // The languages are listed; a model of two must be told which, and one it lacks is named.
  const CommandResult listed = run_nmt("translate --model " + model + " --list-languages");
  REQUIRE(listed.status == 0);
  CHECK(listed.output == "eo\nen\n");
  const std::string input = toy_head("test.src", 5);
  const CommandResult unchosen = run_nmt("translate --model " + model + " --input " + input + " --quiet");
  CHECK(unchosen.status != 0);
  CHECK_THAT(
      unchosen.output,
      Catch::Contains("--target-language: this model translates into eo and en; say which with --target-language"));
  const CommandResult unknown =
      run_nmt("translate --model " + model + " --input " + input + " --target-language fr --quiet");
  CHECK(unknown.status != 0);
  CHECK_THAT(unknown.output,
             Catch::Contains("'fr' is not a target language of this model; it translates into eo and en"));

  // The token is in front of the source (below: it changes the scores), never among the output's
  // tokens, and out of the attention's columns.
  const std::string attention_dir = (work_directory() / "multilingual_attention").string();
  const CommandResult translated =
      run_nmt("translate --model " + model + " --input " + input + " --target-language eo --max-output-length 12" +
              " --attention-dir " + attention_dir + " --quiet --threads 1");
  INFO(translated.output);
  REQUIRE(translated.status == 0);
  for (int line = 1; line <= 5; ++line) {
    char name[64];
    std::snprintf(name, sizeof(name), "multilingual_test.src.%05d.json", line);
    const json matrix = json::parse(read_file((fs::path(attention_dir) / name).string()));
    INFO(matrix.dump());
    for (const json& token : matrix.at("target_tokens")) CHECK(token.get<std::string>().rfind("<2", 0) != 0);
    for (const json& row : matrix.at("weights")) CHECK(row.size() == matrix.at("source_tokens").size());
  }

  // score takes the language too: the same pair scores otherwise with the other token.
  const std::string target = toy_head("test.tgt", 5);
  const CommandResult into_eo =
      run_nmt("score --model " + model + " --src " + input + " --tgt " + target + " --target-language eo --threads 1");
  const CommandResult into_en =
      run_nmt("score --model " + model + " --src " + input + " --tgt " + target + " --target-language en --threads 1");
  REQUIRE(into_eo.status == 0);
  REQUIRE(into_en.status == 0);
  CHECK(into_eo.output != into_en.output);
}

TEST_CASE("serve: a request names its target language, a wrong one gets 400 naming the model's", "[serve]") {
  const std::string model = two_way_model();
  ServerProcess server({"--model", model, "--max-length", "8", "--threads", "1"}, "serve_multilingual");
  REQUIRE(server.port > 0);
  httplib::Client client("127.0.0.1", server.port);
  client.set_read_timeout(60);
  const json health = json::parse(client.Get("/health")->body);
  CHECK(health.at("target_languages") == json::array({"eo", "en"}));

  const auto post = [&client](const json& body, int status) {
    httplib::Result result = client.Post("/translate", body.dump(), "application/json");
    REQUIRE(result);
    INFO(result->body);
    CHECK(result->status == status);
    return json::parse(result->body);
  };
  const std::string sentence = read_lines(kToy + "/test.src").front();
  const json unchosen = post({{"text", sentence}}, 400);
  CHECK_THAT(unchosen.at("error").get<std::string>(),
             Catch::Contains("target_language: this model translates into eo and en"));
  const json unknown = post({{"text", sentence}, {"target_language", "fr"}}, 400);
  CHECK_THAT(unknown.at("error").get<std::string>(), Catch::Contains("'fr' is not a target language"));
  CHECK(
      post({{"text", sentence}, {"target_language", 7}}, 400).at("error").get<std::string>().find("target_language") !=
      std::string::npos);

  // Into each language what translate gives, with its token.
  const std::string input = (work_directory() / "multilingual_serve_input.txt").string();
  write_file_atomic(input, sentence + "\n");
  for (const char* language : {"eo", "en"}) {
    INFO(language);
    const json answer = post({{"text", sentence}, {"target_language", language}}, 200);
    const CommandResult translated = run_nmt("translate --model " + model + " --input " + input +
                                             " --target-language " + language + " --max-length 8 --quiet --threads 1");
    REQUIRE(translated.status == 0);
    CHECK(answer.at("translations").at(0).at("text").get<std::string>() + "\n" == translated.output);
  }
  CHECK(server.stop() == 0);

  // A server started with a language it lacks does not start.
  ServerProcess wrong({"--model", model, "--target-language", "fr", "--threads", "1"}, "serve_multilingual_wrong");
  CHECK(wrong.port == 0);
  CHECK(wrong.exit_status() != 0);
  CHECK_THAT(wrong.log(), Catch::Contains("--target-language: 'fr' is not a target language"));
}
