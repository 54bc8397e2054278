// The JSON of `nmt serve`: a POST /translate body read into a TranslateRequest (every field
// checked, with a RequestError naming it), and the answer written from the translations. No
// sockets here, so that the suite and the fuzz target (tests/fuzz/fuzz_request.cpp) call it as the
// server does.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "config/translate_options.h"
#include "inference/outputs.h"
#include "search/translator.h"
#include "text/vocabulary.h"

namespace nmt::serve {

// What one request may ask for; over a limit is a 413 answer naming it.
struct RequestLimits {
  size_t max_body_bytes = 1 << 20;             // the whole body (the server refuses longer ones before storing them)
  size_t max_sentences = 256;                  // entries of "text"
  size_t max_sentence_bytes = 4096;            // one entry of "text", in bytes
  int max_beam_size = 16;                      // "beam_size" from 1 to this
  size_t max_answer_bytes = size_t{32} << 20;  // the answer's bound (answer_bytes_bound), before the search
};

// A request the server cannot take: the HTTP status (4xx) and a one-line message naming the field.
class RequestError : public std::runtime_error {
 public:
  RequestError(int status, const std::string& message) : std::runtime_error(message), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

struct TranslateRequest {
  std::vector<std::string> text;         // the sentences, in order
  std::vector<std::string> prefix;       // target prefixes, one per sentence, or none (search/translator.h)
  std::vector<std::string> constraints;  // one line of tab-separated phrases per sentence, or none (ditto)
  SearchOptions search;                  // the server's defaults with the request's beam_size and n_best
  bool attention = false;                // add each sentence's attention matrix to the answer
  bool alignment = false;                // add each sentence's hard alignment ("i-j" pairs)
  bool confidence = false;               // add each text's confidence and words (inference/outputs.h)
  std::string markup;                    // none | html | xml; "": the server's --markup
  std::string target_language;           // a multilingual model's (text/languages.h); "": the server's
  // Tokens in front of each sentence's subwords (the target-language token: 1 for a multilingual
  // model), which the output caps count; set by the server once it knows the model.
  size_t source_tags = 0;
};

// {"text": "..." | ["...", ...], "prefix": as text, "constraints": [phrase, ...] | [[phrase, ...], ...],
//  "beam_size": int, "n_best": int, "attention": bool, "alignment": bool, "confidence": bool,
//  "markup": "none" | "html" | "xml", "target_language": "de"}; only
// "text" is required,
// and any other field is refused by name. "prefix" gives each sentence the start of its translation
// ("" for none); "constraints" the phrases its translation contains: a list for a string text, a
// list of lists (one per sentence, [] for none) for a list.
// Throws RequestError (400 for malformed JSON, a missing field, a wrong type, a value out of
// range, invalid UTF-8 or an unknown field; 413 over `limits`).
TranslateRequest parse_translate_request(std::string_view body, const SearchOptions& defaults,
                                         const RequestLimits& limits);

// A prefix or constraints that reach their sentence's output limit (max_output_length), and
// constraints for a server that samples, are refused (400, naming them). source_subwords: each
// sentence's ids (Vocabulary::encode); `backwards`: the model writes right to left.
void check_guides(const TranslateRequest& request, const std::vector<std::vector<int64_t>>& source_subwords,
                  const Vocabulary& target_vocabulary, bool backwards);

// The longest of a vocabulary's pieces as a JSON string, quotes and escapes included: what one
// token of an answer can cost.
size_t longest_piece_json(const Vocabulary& vocabulary);

// An upper bound on the bytes of the answer to `request` (translations_json), from each sentence's
// source length and its output cap (max_output_length): checked against limits.max_answer_bytes
// before the request joins a batch, so that no answer (attention rows above all) can grow without
// bound. `plan`: the request's texts as sentences (search/translator.h), with their subwords; the
// longest pieces: longest_piece_json.
size_t answer_bytes_bound(const TranslateRequest& request, const SentencePlan& plan, size_t longest_source_piece,
                          size_t longest_target_piece);

// {"translations": [{"text", "score", "sentences", "capped", "cut", "alignment"?, "attention"?,
// "n_best"?, "confidence"?, "words"?}, ...]}, one entry per text of the request, in its order:
// "sentences" what it was translated as, "capped" the indices of those whose search stopped at an
// output cap, "cut" of those that are parts of a longer sentence (--cut-sentences); with request.confidence,
// `log_probabilities` (one per text: best_token_log_probabilities) give "confidence" and "words" ([{"word",
// "probability"}, ...]).
nlohmann::json translations_json(const TranslateRequest& request, const std::vector<Translation>& translations,
                                 const Vocabulary& target_vocabulary,
                                 const std::vector<TokenLogProbabilities>& log_probabilities = {});

}  // namespace nmt::serve
