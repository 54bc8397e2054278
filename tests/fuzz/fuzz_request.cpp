// libFuzzer target: the request reader of nmt serve. Any bytes as a POST /translate body: they may
// be refused with a RequestError (a 4xx answer), never crash, and a request that is accepted obeys
// the limits and writes an answer that is valid JSON.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "serve/request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  nmt::serve::RequestLimits limits;
  limits.max_sentences = 8;
  limits.max_sentence_bytes = 64;
  limits.max_body_bytes = size_t{4} << 20;  // scripts/fuzz.sh gives inputs of up to 2 MiB: all are parsed
  try {
    const nmt::serve::TranslateRequest request =
        nmt::serve::parse_translate_request(body, nmt::SearchOptions{}, limits);
    if (request.text.size() > limits.max_sentences || request.search.beam_size < 1 ||
        request.search.beam_size > limits.max_beam_size || request.search.n_best > request.search.beam_size) {
      std::abort();  // accepted, yet over a limit
    }
    for (const auto& sentence : request.text) {
      if (sentence.size() > limits.max_sentence_bytes) std::abort();
    }
    // The answer for empty translations of every sentence must serialize.
    const std::vector<nmt::Translation> translations(request.text.size());
    const std::string answer = nmt::serve::translations_json(request, translations, nmt::Vocabulary{}).dump();
    if (!nlohmann::json::accept(answer)) std::abort();
  } catch (const nmt::serve::RequestError& error) {
    if (error.status() < 400 || error.status() > 499) std::abort();
  }
  return 0;
}
