#include "serve/request.h"

#include <algorithm>
#include <cmath>

#include "eval/attention_export.h"
#include "inference/outputs.h"
#include "text/utf8.h"
#include "util/format.h"

namespace nmt::serve {

namespace {

using nlohmann::json;

constexpr const char* kFields =
    "text, prefix, constraints, beam_size, n_best, attention, alignment, confidence, markup, target_language";

[[noreturn]] void refuse(const std::string& message, int status = 400) { throw RequestError(status, message); }

// The byte offset of the first malformed UTF-8 sequence, or npos.
size_t first_invalid_utf8(std::string_view text) {
  for (size_t position = 0; position < text.size();) {
    const size_t start = position;
    bool valid = true;
    next_code_point(text, position, &valid);
    if (!valid) return start;
  }
  return std::string_view::npos;
}

// nlohmann's messages start with "[json.exception.parse_error.101] ": the rest is for users, with
// the token it last read ("...; last read: '\"aaaa'") cut, since that may be the whole body.
std::string without_prefix(const std::string& message) {
  const size_t end = message.find("] ");
  std::string rest =
      message.rfind("[json.exception.", 0) == 0 && end != std::string::npos ? message.substr(end + 2) : message;
  const std::string last_read = "last read: '";
  if (const size_t at = rest.find(last_read); at != std::string::npos) {
    const size_t token = at + last_read.size();
    const size_t close = rest.rfind('\'');
    const std::string read = rest.substr(token, close > token ? close - token : std::string::npos);
    rest = rest.substr(0, token) + format_excerpt(read) + "'";
  }
  return rest;
}

// What a message says of a value it refuses: a number or a boolean as written (a few bytes), any
// other value by its type alone. A message never serialises a string, an array or an object: they
// may be a megabyte long or nested a hundred thousand deep.
std::string described(const json& value) {
  return value.is_number() || value.is_boolean() ? value.dump() : std::string(value.type_name());
}

// A field's name for a message: at most 40 bytes of it, as a JSON string.
std::string quoted_name(const std::string& name) {
  constexpr size_t kShown = 40;
  return name.size() <= kShown ? json(name).dump(-1, ' ', false, json::error_handler_t::replace)
                               : json(name.substr(0, kShown)).dump(-1, ' ', false, json::error_handler_t::replace) +
                                     " (cut at " + std::to_string(kShown) + " bytes)";
}

int integer_field(const json& value, const std::string& name, int low, int high) {
  if (!value.is_number_integer() || value.get<long long>() < low || value.get<long long>() > high) {
    refuse(name + " must be an integer from " + std::to_string(low) + " to " + std::to_string(high) + ", got " +
           described(value));
  }
  return static_cast<int>(value.get<long long>());
}

bool boolean_field(const json& value, const std::string& name) {
  if (!value.is_boolean()) refuse(name + " must be true or false, got " + described(value));
  return value.get<bool>();
}

// Parses `body`, refusing (400) a document nested deeper than kMaxDepth or with more values than
// any request within `limits` has, while it is read: the values past the bound are never built.
json parse_bounded(std::string_view body, const RequestLimits& limits) {
  // {"constraints": [[phrase, ...], ...]} is the deepest a request goes: 3 levels.
  constexpr int kMaxDepth = 8;
  // text, prefix and constraints with limits.max_sentences entries each, and the scalars.
  const size_t max_values = limits.max_sentences * (kMaxConstraintPhrases + 4) + 32;
  size_t values = 0;
  const json::parser_callback_t bound = [&](int depth, json::parse_event_t event, json&) {
    if (depth > kMaxDepth) {
      refuse("the JSON nests deeper than " + std::to_string(kMaxDepth) + " levels; a request needs at most 3");
    }
    if ((event == json::parse_event_t::value || event == json::parse_event_t::object_start ||
         event == json::parse_event_t::array_start) &&
        ++values > max_values) {
      refuse("the JSON has more than " + std::to_string(max_values) + " values; a request of at most " +
             std::to_string(limits.max_sentences) + " sentences (nmt serve --max-sentences) needs fewer");
    }
    return true;
  };
  try {
    return json::parse(body, bound);
  } catch (const json::exception& error) {  // parse_error, or out_of_range for a number like 1e400
    refuse("malformed JSON: " + without_prefix(error.what()));
  }
}

std::string sentence_field(const json& value, const std::string& name, const RequestLimits& limits) {
  if (!value.is_string()) refuse(name + " must be a string, got " + std::string(value.type_name()));
  const std::string& text = value.get_ref<const std::string&>();
  if (text.size() > limits.max_sentence_bytes) {
    refuse(name + " has " + std::to_string(text.size()) + " bytes; the limit is " +
               std::to_string(limits.max_sentence_bytes) + " (nmt serve --max-sentence-bytes)",
           413);
  }
  return text;
}

// A string, or a list of at most limits.max_sentences strings.
std::vector<std::string> sentences_field(const json& value, const std::string& name, const RequestLimits& limits) {
  std::vector<std::string> sentences;
  if (value.is_string()) {
    sentences.push_back(sentence_field(value, name, limits));
  } else if (value.is_array()) {
    if (value.size() > limits.max_sentences) {
      refuse(name + " has " + std::to_string(value.size()) + " sentences; the limit is " +
                 std::to_string(limits.max_sentences) + " (nmt serve --max-sentences)",
             413);
    }
    for (size_t i = 0; i < value.size(); ++i) {
      sentences.push_back(sentence_field(value[i], name + "[" + std::to_string(i) + "]", limits));
    }
  } else {
    refuse(name + " must be a string or a list of strings, got " + std::string(value.type_name()));
  }
  return sentences;
}

// One sentence's constraint phrases (a list of strings) as one line, phrases separated by tabs.
std::string phrases_field(const json& value, const std::string& name, const RequestLimits& limits) {
  if (!value.is_array()) refuse(name + " must be a list of phrases (strings), got " + std::string(value.type_name()));
  if (value.size() > kMaxConstraintPhrases) {
    refuse(name + " has " + std::to_string(value.size()) + " phrases; at most " +
           std::to_string(kMaxConstraintPhrases) + " per sentence");
  }
  std::string line;
  for (size_t i = 0; i < value.size(); ++i) {
    const std::string item = name + "[" + std::to_string(i) + "]";
    const std::string phrase = sentence_field(value[i], item, limits);
    if (phrase.find('\t') != std::string::npos) refuse(item + " contains a tab: give each phrase as its own string");
    line += (i > 0 ? "\t" : "") + phrase;
  }
  return line;
}

// "constraints": for a string text, one list of phrases; for a list, one list per sentence.
std::vector<std::string> constraints_field(const json& value, const json& text, const RequestLimits& limits) {
  if (text.is_string()) return {phrases_field(value, "constraints", limits)};
  if (!value.is_array() || value.size() != text.size()) {
    refuse("constraints must be a list of phrase lists, one per sentence of text ([] for none)");
  }
  std::vector<std::string> lines;
  for (size_t i = 0; i < value.size(); ++i) {
    lines.push_back(phrases_field(value[i], "constraints[" + std::to_string(i) + "]", limits));
  }
  return lines;
}

// Weights rounded to 1e-4: the shortest decimal that JSON writes for them stays short.
json rounded(const std::vector<float>& row) {
  json values = json::array();
  for (float weight : row) values.push_back(std::isfinite(weight) ? std::round(weight * 1e4) / 1e4 : 0.0);
  return values;
}

}  // namespace

TranslateRequest parse_translate_request(std::string_view body, const SearchOptions& defaults,
                                         const RequestLimits& limits) {
  if (body.size() > limits.max_body_bytes) {
    refuse("the body has " + std::to_string(body.size()) + " bytes; the limit is " +
               std::to_string(limits.max_body_bytes) + " (nmt serve --max-body-bytes)",
           413);
  }
  if (const size_t position = first_invalid_utf8(body); position != std::string_view::npos) {
    refuse("the body is not valid UTF-8 (byte " + std::to_string(position) + "); send text as UTF-8");
  }
  const json document = parse_bounded(body, limits);
  if (!document.is_object()) {
    refuse("the body must be a JSON object like {\"text\": [\"...\"]}, got " + std::string(document.type_name()));
  }
  TranslateRequest request;
  request.search = defaults;
  request.search.n_best = 1;
  const auto text = document.find("text");
  if (text == document.end()) refuse("missing field \"text\" (a string or a list of strings)");
  request.text = sentences_field(*text, "text", limits);
  if (const auto prefix = document.find("prefix"); prefix != document.end()) {
    request.prefix = sentences_field(*prefix, "prefix", limits);
    if (request.prefix.size() != request.text.size() || prefix->is_string() != text->is_string()) {
      refuse("prefix must be like text: " + std::string(text->is_string() ? "a string" : "a list of strings") +
             " (one per sentence, \"\" for none)");
    }
  }
  if (const auto constraints = document.find("constraints"); constraints != document.end()) {
    request.constraints = constraints_field(*constraints, *text, limits);
  }
  for (const auto& [name, value] : document.items()) {
    if (name == "text" || name == "prefix" || name == "constraints") continue;
    if (name == "beam_size") {
      request.search.beam_size = integer_field(value, name, 1, limits.max_beam_size);
    } else if (name == "n_best") {
      request.search.n_best = integer_field(value, name, 1, limits.max_beam_size);
    } else if (name == "attention") {
      request.attention = boolean_field(value, name);
    } else if (name == "alignment") {
      request.alignment = boolean_field(value, name);
    } else if (name == "confidence") {
      request.confidence = boolean_field(value, name);
    } else if (name == "markup") {
      if (!value.is_string() || (value != "none" && value != "html" && value != "xml")) {
        refuse("markup must be \"none\", \"html\" or \"xml\"");
      }
      request.markup = value.get<std::string>();
    } else if (name == "target_language") {
      if (!value.is_string() || value.get<std::string>().size() > 32) {
        refuse("target_language must be a language code such as \"de\" (the model's languages: GET /health)");
      }
      request.target_language = value.get<std::string>();
    } else {
      refuse("unknown field " + quoted_name(name) + " (the fields are " + kFields + ")");
    }
  }
  if (request.search.n_best > request.search.beam_size) {
    refuse("n_best (" + std::to_string(request.search.n_best) + ") must not exceed beam_size (" +
           std::to_string(request.search.beam_size) + ")");
  }
  request.search.return_attention = request.attention || request.alignment;
  return request;
}

void check_guides(const TranslateRequest& request, const std::vector<std::vector<int64_t>>& source_subwords,
                  const Vocabulary& target_vocabulary, bool backwards) {
  const auto limit = [&](size_t i) {
    const auto source_length =
        static_cast<int64_t>(source_subwords[i].size() + request.source_tags) + 1;  // the tag and EOS
    return max_output_length(source_length, request.search);
  };
  const auto prefix_length = [&](size_t i) {
    return i < request.prefix.size() ? static_cast<int64_t>(target_vocabulary.encode(request.prefix[i]).size()) : 0;
  };
  for (size_t i = 0; i < request.prefix.size(); ++i) {
    if (prefix_length(i) > 0 && prefix_length(i) >= limit(i)) {
      refuse("prefix[" + std::to_string(i) + "] has " + std::to_string(prefix_length(i)) +
             " subwords but the translation of text[" + std::to_string(i) + "] ends at " + std::to_string(limit(i)) +
             ": shorten it");
    }
  }
  const bool constrained = std::any_of(request.constraints.begin(), request.constraints.end(),
                                       [](const auto& line) { return !line.empty(); });
  if (constrained && request.search.samples()) {
    refuse("constraints: this server samples its translations; constraints need beam search");
  }
  for (size_t i = 0; i < request.constraints.size() && constrained; ++i) {
    try {
      encode_constraints(request.constraints[i], target_vocabulary, backwards, prefix_length(i), limit(i),
                         "constraints[" + std::to_string(i) + "]");
    } catch (const std::invalid_argument& error) {
      refuse(error.what());
    }
  }
}

size_t longest_piece_json(const Vocabulary& vocabulary) {
  size_t longest = 0;
  for (int64_t id = 0; id < vocabulary.size(); ++id) {
    longest = std::max(longest, json(vocabulary.piece(id)).dump(-1, ' ', false, json::error_handler_t::replace).size());
  }
  return std::max<size_t>(longest, 7);  // "</s>" and the like
}

size_t answer_bytes_bound(const TranslateRequest& request, const SentencePlan& plan, size_t longest_source_piece,
                          size_t longest_target_piece) {
  // A weight rounded to 1e-4 is at most "0.1234" and its comma; an "i-j" pair of alignment and its
  // space at most two 10-digit numbers and 2 bytes; a score at most 24 bytes; an entry's field
  // names and punctuation less than 128; a byte of text at most 6 in JSON ("\u001f"); an index of
  // "capped" or "cut" at most 11.
  constexpr size_t kWeight = 8, kPair = 22, kScore = 24, kEntry = 128, kTextByte = 6, kIndex = 11;
  size_t bound = 32;
  for (size_t line = 0; line + 1 < plan.first.size(); ++line) {
    // A line's attention spans all its sentences' pieces (and one EOS), and its rows their caps.
    size_t columns = 1, rows = 1, sentence_bytes = 0;
    for (size_t sentence = plan.first[line]; sentence < plan.first[line + 1]; ++sentence) {
      const auto length = static_cast<int64_t>(plan.subwords[sentence].size() + request.source_tags) + 1;  // EOS
      columns += plan.subwords[sentence].size();
      rows += static_cast<size_t>(max_output_length(length, request.search));
      sentence_bytes += plan.sentences[sentence].size() * kTextByte + 3 + 2 * kIndex;
    }
    size_t text = rows * longest_target_piece + 2;
    for (const std::string& gap : plan.splits[line].gaps) text += gap.size() * kTextByte;
    if (!plan.frames.empty()) {  // markup escaped (a byte at most "&amp;"), the items and a space each back
      const Frame& frame = plan.frames[line];
      if (frame.markup) text *= 5;
      for (const FrameItem& item : frame.items) text += (item.open.size() * 5 + item.close.size() + 2) * kTextByte;
      text += frame.problem.size() * kTextByte + kEntry;
    }
    bound += kEntry + text + kScore + sentence_bytes;
    if (request.search.n_best > 1) bound += static_cast<size_t>(request.search.n_best) * (kEntry + text + kScore);
    if (request.alignment) bound += rows * kPair;
    // A word per output subword at most: its text, its probability and its braces and names.
    if (request.confidence) bound += kScore + rows * (longest_target_piece + kScore + 32);
    if (request.attention) {
      bound += kEntry + columns * (longest_source_piece + 1) + rows * (longest_target_piece + 1) +
               rows * (columns * kWeight + 2);
    }
  }
  return bound;
}

nlohmann::json translations_json(const TranslateRequest& request, const std::vector<Translation>& translations,
                                 const Vocabulary& target_vocabulary,
                                 const std::vector<TokenLogProbabilities>& log_probabilities) {
  json entries = json::array();
  for (size_t i = 0; i < translations.size(); ++i) {
    const Translation& translation = translations[i];
    const bool empty = translation.hypotheses.empty();
    json entry = {{"text", empty ? "" : translation.texts[0]},
                  {"score", empty ? 0.0 : translation.hypotheses[0].score},
                  {"sentences", translation.sentences},
                  {"capped", translation.capped},
                  {"cut", translation.cut}};
    if (!translation.markup_problem.empty()) entry["markup_problem"] = translation.markup_problem;
    if (request.attention || request.alignment) {
      AttentionMatrix matrix;
      if (!empty) matrix = attention_matrix(translation, translation.hypotheses[0], target_vocabulary);
      if (request.alignment) entry["alignment"] = hard_alignment(matrix);
      if (request.attention) {
        json weights = json::array();
        for (const auto& row : matrix.weights) weights.push_back(rounded(row));
        entry["attention"] = {
            {"source", matrix.source_tokens}, {"target", matrix.target_tokens}, {"weights", std::move(weights)}};
      }
    }
    if (request.search.n_best > 1) {
      json hypotheses = json::array();
      for (size_t k = 0; k < translation.hypotheses.size(); ++k) {
        hypotheses.push_back({{"text", translation.texts[k]}, {"score", translation.hypotheses[k].score}});
      }
      entry["n_best"] = std::move(hypotheses);
    }
    if (request.confidence && i < log_probabilities.size()) {
      const LineConfidence confidence = line_confidence(translation, log_probabilities[i], target_vocabulary);
      entry["confidence"] = confidence.defined() ? json(confidence.confidence) : json(nullptr);
      json words = json::array();
      for (const auto& [word, probability] : confidence.words)
        words.push_back({{"word", word}, {"probability", probability}});
      entry["words"] = std::move(words);
    }
    entries.push_back(std::move(entry));
  }
  return {{"translations", std::move(entries)}};
}

}  // namespace nmt::serve
