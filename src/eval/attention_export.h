// Export of one sentence's cross-attention (target rows x source columns) as
// an SVG heatmap, as JSON, and as a Moses/fast_align style hard alignment.
// Needs neither LibTorch nor the model, so tools that do not link the model
// can use it.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace nmt {

struct AttentionMatrix {
  // Columns: source subwords (sentencepiece pieces, may start with U+2581
  // '▁'), then "</s>" for the source EOS.
  std::vector<std::string> source_tokens;
  // Rows: output subwords, then "</s>" if the output ended with EOS.
  std::vector<std::string> target_tokens;
  // [rows][columns]; each row is a softmax, so it sums to 1.
  std::vector<std::vector<float>> weights;
};

// Checks shapes (weights.size() == target_tokens.size(), every row has
// source_tokens.size() entries); throws std::invalid_argument naming the
// offending sizes otherwise. Every exporter below calls it first.
void check_shape(const AttentionMatrix& matrix);

// A self-contained SVG heatmap: source tokens along the top (labels rotated
// -45 degrees), target tokens down the left, one <rect class="cell"> per
// weight on a white -> dark blue scale with a "target → source: 0.123"
// <title> tooltip, a colour bar with 0 / 0.5 / 1 ticks, and an optional
// caption (one line per '\n') at the bottom. No scripts, external fonts or
// links; all text XML-escaped; the canvas is sized from the label lengths.
// Weights are clamped to [0, 1] for colouring; non-finite weights are grey.
std::string attention_svg(const AttentionMatrix& matrix, const std::string& caption = "");

// {"source_tokens": [...], "target_tokens": [...], "weights": [[...], ...]}
// with one weight row per line. Weights are rounded to six significant digits
// (printf's "%.6g") regardless of the locale; NaN and infinities (which JSON
// cannot represent) are written as null. Bytes that are not valid UTF-8 in a
// token become U+FFFD, so the file always parses.
std::string attention_json(const AttentionMatrix& matrix);

// The (source column, target row) pairs of the hard alignment, both 0-based:
// for each target row its argmax source column (the first one on ties). Rows
// whose token is "</s>" are skipped, and so are rows whose argmax is a "</s>"
// column.
std::vector<std::pair<std::size_t, std::size_t>> alignment_pairs(const AttentionMatrix& matrix);

// alignment_pairs as space-separated "i-j" pairs (source column i, target row
// j), the Moses/fast_align format. Empty string when there are no pairs.
std::string hard_alignment(const AttentionMatrix& matrix);

}  // namespace nmt
