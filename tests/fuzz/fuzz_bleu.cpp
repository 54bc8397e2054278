// libFuzzer target: the BLEU tokenizer and scorers. The input's lines, halved into hypotheses and
// references, are tokenized (13a) and scored with BLEU and chrF: an exception for what
// corpus_bleu refuses (an empty reference line), otherwise scores in [0, 100].
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "eval/bleu.h"
#include "eval/chrf.h"
#include "eval/tokenize_13a.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  nmt::eval::tokenize_13a(text);
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1) {
    lines.push_back(text.substr(start, end - start));
  }
  lines.push_back(text.substr(start));
  const size_t half = lines.size() / 2;
  const std::vector<std::string> hypotheses(lines.begin(), lines.begin() + static_cast<std::ptrdiff_t>(half));
  const std::vector<std::string> references(lines.begin() + static_cast<std::ptrdiff_t>(half),
                                            lines.begin() + static_cast<std::ptrdiff_t>(2 * half));
  try {
    const double bleu = nmt::eval::corpus_bleu(hypotheses, {references}).score;
    const double chrf = nmt::eval::corpus_chrf(hypotheses, {references}).score;
    if (!(bleu >= 0 && bleu <= 100.0001) || !(chrf >= 0 && chrf <= 100.0001)) __builtin_trap();
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
