#include "text/languages.h"

#include <algorithm>
#include <stdexcept>

#include "text/corpus_mix.h"
#include "text/vocabulary.h"

namespace nmt {

std::string language_token(const std::string& language) { return "<2" + language + ">"; }

std::vector<std::string> distinct_languages(const std::string& list) {
  std::vector<std::string> languages;
  if (list.empty()) return languages;
  for (const std::string& language : split_commas(list)) {
    if (!language.empty() && std::find(languages.begin(), languages.end(), language) == languages.end()) {
      languages.push_back(language);
    }
  }
  return languages;
}

std::string language_list(const std::vector<std::string>& languages) {
  std::string text;
  for (size_t i = 0; i < languages.size(); ++i) {
    text += (i == 0 ? "" : i + 1 == languages.size() ? " and " : ", ") + languages[i];
  }
  return text;
}

int64_t target_language_id(const std::vector<std::string>& known, const Vocabulary& source_vocabulary,
                           const std::string& requested, const std::string& name) {
  if (known.empty()) {
    if (requested.empty()) return -1;
    throw std::invalid_argument(name +
                                ": this model was trained without target languages (train-languages), so it "
                                "translates into its one target language: leave " +
                                name + " out");
  }
  std::string language = requested;
  if (language.empty()) {
    if (known.size() > 1) {
      throw std::invalid_argument(name + ": this model translates into " + language_list(known) + "; say which with " +
                                  name);
    }
    language = known.front();
  }
  if (std::find(known.begin(), known.end(), language) == known.end()) {
    throw std::invalid_argument(name + ": '" + language +
                                "' is not a target language of this model; it translates "
                                "into " +
                                language_list(known));
  }
  const int64_t id = source_vocabulary.tag_id(language_token(language));
  if (id < 0) {
    throw std::runtime_error("the model's source vocabulary lacks " + language_token(language) + ", the token of " +
                             language + ", one of its target languages: the model is damaged; train it again");
  }
  return id;
}

}  // namespace nmt
