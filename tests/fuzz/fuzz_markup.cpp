// libFuzzer target: the markup reader and the frame's placement (text/markup.h, protect.h,
// frame.h). The input's first byte picks HTML or XML, protected spans taken out or given as
// placeholder tokens, and drives the alignment; the rest is a line.
// Whatever the line, framing it and putting the frame back around the words of its own text, tied
// to the source words in an order the input picks, must not fail; and when libxml2 reads the line
// as XML and our reader finds no problem, the output is well-formed XML too.
#include <libxml/parser.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "text/frame.h"
#include "text/protect.h"
#include "text/special_tokens.h"
#include "text/vocabulary.h"

namespace {

bool well_formed_xml(const std::string& text) {
  const std::string document = "<root>" + text + "</root>";
  xmlDocPtr parsed = xmlReadMemory(document.data(), static_cast<int>(document.size()), "line.xml", "UTF-8",
                                   XML_PARSE_NOERROR | XML_PARSE_NOWARNING | XML_PARSE_NONET);
  if (parsed == nullptr) return false;
  xmlFreeDoc(parsed);
  return true;
}

std::vector<nmt::ByteSpan> word_spans(const std::string& text) {
  std::vector<nmt::ByteSpan> spans;
  for (size_t at = 0; at < text.size();) {
    const size_t start = text.find_first_not_of(' ', at);
    if (start == std::string::npos) break;
    const size_t end = std::min(text.find(' ', start), text.size());
    spans.push_back({start, end});
    at = end;
  }
  return spans;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool xml = (data[0] & 1) != 0;
  const unsigned stride = data[0] >> 1;  // how the target words are tied to the source words
  const std::string line(reinterpret_cast<const char*>(data) + 1, size - 1);
  static const nmt::Framer html_framer("html", "url,email,number,printf,braces,variable", {}, nmt::Vocabulary{});
  static const nmt::Framer xml_framer = html_framer.with_markup("xml");
  const nmt::Framer& framer = xml ? xml_framer : html_framer;
  nmt::Frame frame;
  if ((data[0] & 2) != 0) {
    // The spans as placeholder tokens, as for a model trained with them; the line's own tokens,
    // if any, stand for nothing and are dropped.
    frame = nmt::read_markup(line, framer.markup());
    nmt::take_out(frame, framer.spans(frame.text), nmt::kPlaceholderTokens);
  } else {
    frame = framer.frame(line);
  }
  // The target: the frame's text with single spaces, each word tied to a source word by `stride`
  // (0: in order; else scattered, some tied to none).
  const std::vector<nmt::ByteSpan> sources = word_spans(frame.text);
  std::string target;
  std::vector<nmt::ByteSpan> targets;
  for (const nmt::ByteSpan& word : sources) {
    if (!target.empty()) target += ' ';
    targets.push_back({target.size(), target.size() + (word.end - word.begin)});
    target.append(frame.text, word.begin, word.end - word.begin);
  }
  nmt::TokenAlignment alignment;
  alignment.target_of_source.assign(sources.size(), -1);
  for (size_t t = 0; t < targets.size(); ++t) {
    const size_t pick = stride == 0 ? t : (t * stride + stride / 3) % (sources.size() + 1);
    const int source = pick < sources.size() ? static_cast<int>(pick) : -1;
    alignment.source_of_target.push_back(source);
    if (source >= 0 && alignment.target_of_source[static_cast<size_t>(source)] < 0)
      alignment.target_of_source[static_cast<size_t>(source)] = static_cast<int>(t);
  }
  const std::string out = nmt::place_frame(frame, target, targets, sources, alignment);
  if (xml && frame.problem.empty() && well_formed_xml(line) && !well_formed_xml(out)) __builtin_trap();
  return 0;
}
