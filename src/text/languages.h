// Target-language tokens (Johnson et al. 2017): each training corpus of a multilingual model names
// the language of its targets (train-languages), and every source sentence of the corpus starts
// with that language's token, <2xx>, which the source vocabulary reserves as a control symbol from
// the start. Translation puts the token of the language asked for (--target-language) in front of
// each source sentence; the token never reaches the output.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nmt {

class Vocabulary;

// "<2de>" for "de".
std::string language_token(const std::string& language);

// The languages of a comma-separated list ("en,en,de,", empty items skipped), each once, in order
// of first appearance.
std::vector<std::string> distinct_languages(const std::string& list);

// "de, en and fr".
std::string language_list(const std::vector<std::string>& languages);

// The source vocabulary's id of the token that asks a model trained into `known` languages for
// `requested`, or -1 when the model knows none and none is requested. An empty request picks a
// model's only language. Throws std::invalid_argument starting with `name` (the option or field
// that gave the request): a language for a model that knows none, none for a model that knows
// several, a language the model does not know (naming those it does); std::runtime_error when the
// vocabulary lacks the token of a language the model knows (a damaged model).
int64_t target_language_id(const std::vector<std::string>& known, const Vocabulary& source_vocabulary,
                           const std::string& requested, const std::string& name);

}  // namespace nmt
