#include "eval/attention_export.h"

#include "text/utf8.h"
#include "util/format.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <iomanip>
#include <locale>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <utility>

namespace nmt {
namespace {

const char* const kEndOfSentence = "</s>";

// Escapes text for XML character data and attribute values. XML 1.0 cannot
// carry most C0 controls or U+FFFE/U+FFFF even as character references, so
// those (and invalid UTF-8) become U+FFFD rather than making the file
// unparseable.
std::string xml_escape(const std::string& text) {
  std::string output;
  output.reserve(text.size());
  std::size_t position = 0;
  while (position < text.size()) {
    bool valid = true;
    const char32_t code_point = next_code_point(text, position, &valid);
    switch (code_point) {
      case '&':
        output += "&amp;";
        break;
      case '<':
        output += "&lt;";
        break;
      case '>':
        output += "&gt;";
        break;
      case '"':
        output += "&quot;";
        break;
      case '\'':
        output += "&apos;";
        break;
      default: {
        const bool forbidden_control =
            code_point < 0x20 && code_point != '\t' && code_point != '\n' && code_point != '\r';
        const bool noncharacter = code_point == 0xFFFE || code_point == 0xFFFF;
        append_utf8(output, forbidden_control || noncharacter || !valid ? kReplacementCharacter : code_point);
      }
    }
  }
  return output;
}

// SVG coordinates: one decimal is plenty and keeps the file small.
std::string coordinate(double value) {
  std::string text = format_fixed(value, 1);
  if (text.size() > 2 && text.compare(text.size() - 2, 2, ".0") == 0) text.resize(text.size() - 2);
  if (text == "-0") text = "0";
  return text;
}

// The SVG does not embed fonts, so label widths are estimated from the code
// points with factors (in em) that err on the wide side for DejaVu Sans /
// Verdana / Arial; overestimating only costs a little whitespace, while
// underestimating would clip labels.
bool is_wide(char32_t code_point) {
  return (code_point >= 0x1100 && code_point <= 0x115F) ||  // Hangul Jamo
         (code_point >= 0x2E80 && code_point <= 0xA4CF) ||  // CJK, Kana, Yi
         (code_point >= 0xAC00 && code_point <= 0xD7A3) ||  // Hangul syllables
         (code_point >= 0xF900 && code_point <= 0xFAFF) ||  // CJK compatibility
         (code_point >= 0xFE30 && code_point <= 0xFE4F) ||
         (code_point >= 0xFF00 && code_point <= 0xFF60) ||  // fullwidth forms
         (code_point >= 0xFFE0 && code_point <= 0xFFE6) || (code_point >= 0x1F300 && code_point <= 0x1FAFF) ||  // emoji
         (code_point >= 0x20000 && code_point <= 0x3FFFD);
}

double estimated_text_width(const std::string& text, double font_size) {
  double width_in_em = 0;
  std::size_t position = 0;
  while (position < text.size()) {
    const char32_t code_point = next_code_point(text, position);
    if (code_point >= 0x0300 && code_point <= 0x036F) continue;  // combining marks
    if (is_wide(code_point)) {
      width_in_em += 1.0;
    } else if (code_point == 'W' || code_point == 'M' || code_point == 'm' || code_point == 'w' || code_point == '@') {
      width_in_em += 0.95;
    } else if (code_point >= 'A' && code_point <= 'Z') {
      width_in_em += 0.76;
    } else if (code_point == ' ' || code_point == 'i' || code_point == 'l' || code_point == 'j' || code_point == '.' ||
               code_point == ',' || code_point == '\'' || code_point == '|' || code_point == ':') {
      width_in_em += 0.38;
    } else {
      width_in_em += 0.66;
    }
  }
  return width_in_em * font_size;
}

struct Rgb {
  int red, green, blue;
};

// Colorbrewer "Blues" (as in matplotlib) with the lightest stop pushed to
// pure white, so zero attention reads as "nothing" and the scale is
// sequential and perceptually ordered.
const std::array<Rgb, 9> kBlues = {{{255, 255, 255},
                                    {222, 235, 247},
                                    {198, 219, 239},
                                    {158, 202, 225},
                                    {107, 174, 214},
                                    {66, 146, 198},
                                    {33, 113, 181},
                                    {8, 81, 156},
                                    {8, 48, 107}}};

std::string hex_colour(const Rgb& colour) {
  static const char* const kDigits = "0123456789abcdef";
  std::string text = "#";
  for (const int channel : {colour.red, colour.green, colour.blue}) {
    text += kDigits[(channel >> 4) & 0xF];
    text += kDigits[channel & 0xF];
  }
  return text;
}

std::string weight_colour(float weight) {
  if (!std::isfinite(weight)) return "#bdbdbd";  // visibly "not a probability"
  const double clamped = std::clamp(static_cast<double>(weight), 0.0, 1.0);
  const double scaled = clamped * static_cast<double>(kBlues.size() - 1);
  const std::size_t lower = std::min(static_cast<std::size_t>(scaled), kBlues.size() - 2);
  const double fraction = scaled - static_cast<double>(lower);
  const auto mix = [fraction](int from, int to) {
    return static_cast<int>(std::lround(from + (to - from) * fraction));
  };
  const Rgb& from = kBlues[lower];
  const Rgb& to = kBlues[lower + 1];
  return hex_colour({mix(from.red, to.red), mix(from.green, to.green), mix(from.blue, to.blue)});
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  if (text.empty()) return lines;
  std::size_t start = 0;
  while (true) {
    const std::size_t end = text.find('\n', start);
    std::string line = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();  // tolerate CRLF captions
    lines.push_back(std::move(line));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return lines;
}

// `value` rounded to six significant digits, the precision of printf("%.6g"),
// parsed back without the C locale's help.
double six_significant_digits(double value) {
  const std::string text = format_significant(value);
  double rounded = value;
  std::from_chars(text.data(), text.data() + text.size(), rounded);
  return rounded;
}

// The heatmap's geometry: label sizes, then the grid, the colour bar and the caption below.
constexpr double kLabelFontSize = 12;
constexpr double kCaptionFontSize = 13;
constexpr double kCellSize = 24;
constexpr double kMargin = 12;
constexpr double kLabelGap = 6;
// Rotated source labels: -45 degrees keeps long subwords readable without
// the tall top margin that vertical labels would need.
constexpr double kLabelAngleDegrees = -45;
constexpr double kColourBarGap = 24;
constexpr double kColourBarWidth = 14;
constexpr double kTickLength = 4;
constexpr double kMinimumColourBarHeight = 96;  // room for three readable ticks
constexpr double kMaximumColourBarHeight = 400;

// Where everything goes, computed before anything is written: the canvas is sized from the
// label lengths.
struct SvgLayout {
  std::size_t rows = 0, columns = 0;
  double grid_width = 0, grid_height = 0, grid_left = 0, grid_top = 0;
  double source_anchor_y = 0;
  double colour_bar_left = 0, colour_bar_height = 0, tick_label_left = 0;
  std::vector<std::string> caption_lines;
  double caption_line_height = 0;
  double body_bottom = 0;
  std::string width, height;  // of the canvas

  // Source label anchors sit just above each column; the small shift to the
  // right centres the tilted glyphs (not their baseline) on the column.
  double source_anchor_x(std::size_t column) const {
    return grid_left + kCellSize * (static_cast<double>(column) + 0.5) + kLabelFontSize * 0.3;
  }
};

SvgLayout svg_layout(const AttentionMatrix& matrix, const std::string& caption) {
  const double angle = std::abs(kLabelAngleDegrees) * 3.14159265358979323846 / 180.0;
  const double cosine = std::cos(angle);
  const double sine = std::sin(angle);
  SvgLayout layout;
  layout.rows = matrix.target_tokens.size();
  layout.columns = matrix.source_tokens.size();
  layout.grid_width = kCellSize * static_cast<double>(layout.columns);
  layout.grid_height = kCellSize * static_cast<double>(layout.rows);

  double target_label_width = 0;
  for (const std::string& token : matrix.target_tokens) {
    target_label_width = std::max(target_label_width, estimated_text_width(token, kLabelFontSize));
  }
  // A rotated label of width w rises w*sin above its anchor, plus the glyph
  // height tilted by the same angle.
  double source_label_rise = 0;
  for (const std::string& token : matrix.source_tokens) {
    const double width = estimated_text_width(token, kLabelFontSize);
    source_label_rise = std::max(source_label_rise, width * sine + kLabelFontSize * cosine);
  }

  layout.grid_left = kMargin + target_label_width + kLabelGap;
  layout.grid_top = kMargin + source_label_rise + kLabelGap;
  const double grid_right = layout.grid_left + layout.grid_width;

  layout.source_anchor_y = layout.grid_top - kLabelGap / 2;
  double content_right = grid_right;
  for (std::size_t column = 0; column < layout.columns; ++column) {
    const double width = estimated_text_width(matrix.source_tokens[column], kLabelFontSize);
    // Descenders of the tilted text poke out a little to the lower right.
    content_right =
        std::max(content_right, layout.source_anchor_x(column) + width * cosine + kLabelFontSize * 0.3 * sine);
  }

  layout.colour_bar_left = grid_right + kColourBarGap;
  layout.colour_bar_height = std::clamp(layout.grid_height, kMinimumColourBarHeight, kMaximumColourBarHeight);
  layout.tick_label_left = layout.colour_bar_left + kColourBarWidth + kTickLength + 3;
  content_right = std::max(content_right, layout.tick_label_left + estimated_text_width("0.5", kLabelFontSize));

  layout.caption_lines = split_lines(caption);
  layout.caption_line_height = kCaptionFontSize * 1.4;
  for (const std::string& line : layout.caption_lines) {
    content_right = std::max(content_right, kMargin + estimated_text_width(line, kCaptionFontSize));
  }
  layout.body_bottom = layout.grid_top + std::max(layout.grid_height, layout.colour_bar_height);
  double content_bottom = layout.body_bottom;
  if (!layout.caption_lines.empty()) {
    content_bottom += kMargin + layout.caption_line_height * static_cast<double>(layout.caption_lines.size());
  }

  layout.width = coordinate(std::ceil(content_right + kMargin));
  layout.height = coordinate(std::ceil(content_bottom + kMargin));
  return layout;
}

void write_svg_start(std::ostream& svg, const SvgLayout& layout) {
  const std::string& width = layout.width;
  const std::string& height = layout.height;
  svg << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
      << "\" viewBox=\"0 0 " << width << ' ' << height << "\""
      << " font-family=\"DejaVu Sans, Verdana, Arial, sans-serif\" font-size=\"" << coordinate(kLabelFontSize)
      << "\">\n";
  // An explicit white background so PNG renders and dark-mode viewers still
  // show dark text on light paper.
  svg << "<rect x=\"0\" y=\"0\" width=\"" << width << "\" height=\"" << height << "\" fill=\"#ffffff\"/>\n";
}

void write_source_labels(std::ostream& svg, const AttentionMatrix& matrix, const SvgLayout& layout) {
  svg << "<g class=\"source-labels\" fill=\"#222222\">\n";
  for (std::size_t column = 0; column < layout.columns; ++column) {
    const std::string x = coordinate(layout.source_anchor_x(column));
    const std::string y = coordinate(layout.source_anchor_y);
    svg << "<text x=\"" << x << "\" y=\"" << y << "\" transform=\"rotate(" << coordinate(kLabelAngleDegrees) << ' ' << x
        << ' ' << y << ")\">" << xml_escape(matrix.source_tokens[column]) << "</text>\n";
  }
  svg << "</g>\n";
}

void write_target_labels(std::ostream& svg, const AttentionMatrix& matrix, const SvgLayout& layout) {
  svg << "<g class=\"target-labels\" fill=\"#222222\" text-anchor=\"end\">\n";
  for (std::size_t row = 0; row < layout.rows; ++row) {
    // 0.35 em below the row centre puts the x-height in the middle of the cell.
    svg << "<text x=\"" << coordinate(layout.grid_left - kLabelGap) << "\" y=\""
        << coordinate(layout.grid_top + kCellSize * (static_cast<double>(row) + 0.5) + kLabelFontSize * 0.35) << "\">"
        << xml_escape(matrix.target_tokens[row]) << "</text>\n";
  }
  svg << "</g>\n";
}

// One cell per weight, with a tooltip, and a frame around the grid.
void write_cells(std::ostream& svg, const AttentionMatrix& matrix, const SvgLayout& layout) {
  // A faint stroke keeps near-white cells distinguishable from each other.
  svg << "<g class=\"cells\" stroke=\"#e6e6e6\" stroke-width=\"0.5\">\n";
  for (std::size_t row = 0; row < layout.rows; ++row) {
    for (std::size_t column = 0; column < layout.columns; ++column) {
      const float weight = matrix.weights[row][column];
      svg << "<rect class=\"cell\" x=\"" << coordinate(layout.grid_left + kCellSize * static_cast<double>(column))
          << "\" y=\"" << coordinate(layout.grid_top + kCellSize * static_cast<double>(row)) << "\" width=\""
          << coordinate(kCellSize) << "\" height=\"" << coordinate(kCellSize) << "\" fill=\"" << weight_colour(weight)
          << "\"><title>" << xml_escape(matrix.target_tokens[row]) << " \u2192 "
          << xml_escape(matrix.source_tokens[column]) << ": "
          << (std::isfinite(weight) ? format_fixed(weight, 3) : format_significant(weight)) << "</title></rect>\n";
    }
  }
  svg << "</g>\n";
  if (layout.rows > 0 && layout.columns > 0) {
    svg << "<rect x=\"" << coordinate(layout.grid_left) << "\" y=\"" << coordinate(layout.grid_top) << "\" width=\""
        << coordinate(layout.grid_width) << "\" height=\"" << coordinate(layout.grid_height)
        << "\" fill=\"none\" stroke=\"#9e9e9e\" stroke-width=\"0.75\"/>\n";
  }
}

void write_colour_bar(std::ostream& svg, const SvgLayout& layout) {
  // Colour bar: the gradient uses the same stops as the cells, 1 at the top.
  // The id is fixed; several inline copies in one HTML page would define the
  // identical gradient, so whichever one a browser resolves looks the same.
  svg << "<defs><linearGradient id=\"nmt-attention-scale\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">";
  for (std::size_t stop = 0; stop < kBlues.size(); ++stop) {
    svg << "<stop offset=\"" << format_significant(static_cast<double>(stop) / static_cast<double>(kBlues.size() - 1))
        << "\" stop-color=\"" << hex_colour(kBlues[stop]) << "\"/>";
  }
  svg << "</linearGradient></defs>\n";
  svg << "<g class=\"colour-bar\">\n";
  svg << "<rect x=\"" << coordinate(layout.colour_bar_left) << "\" y=\"" << coordinate(layout.grid_top) << "\" width=\""
      << coordinate(kColourBarWidth) << "\" height=\"" << coordinate(layout.colour_bar_height)
      << "\" fill=\"url(#nmt-attention-scale)\" stroke=\"#9e9e9e\" stroke-width=\"0.75\"/>\n";
  for (const double tick : {1.0, 0.5, 0.0}) {
    const double y = layout.grid_top + layout.colour_bar_height * (1.0 - tick);
    const double tick_right = layout.colour_bar_left + kColourBarWidth + kTickLength;
    svg << "<line x1=\"" << coordinate(layout.colour_bar_left + kColourBarWidth) << "\" y1=\"" << coordinate(y)
        << "\" x2=\"" << coordinate(tick_right) << "\" y2=\"" << coordinate(y)
        << "\" stroke=\"#444444\" stroke-width=\"1\"/>\n";
    svg << "<text x=\"" << coordinate(layout.tick_label_left) << "\" y=\"" << coordinate(y + kLabelFontSize * 0.35)
        << "\" fill=\"#222222\">" << format_significant(tick) << "</text>\n";
  }
  svg << "</g>\n";
}

void write_caption(std::ostream& svg, const SvgLayout& layout) {
  if (layout.caption_lines.empty()) return;
  svg << "<g class=\"caption\" fill=\"#222222\" font-size=\"" << coordinate(kCaptionFontSize) << "\">\n";
  for (std::size_t line = 0; line < layout.caption_lines.size(); ++line) {
    // Baseline sits ~0.3 em above the bottom of each line box to leave room for descenders.
    const double baseline = layout.body_bottom + kMargin +
                            layout.caption_line_height * (static_cast<double>(line) + 1) - kCaptionFontSize * 0.3;
    svg << "<text x=\"" << coordinate(kMargin) << "\" y=\"" << coordinate(baseline) << "\">"
        << xml_escape(layout.caption_lines[line]) << "</text>\n";
  }
  svg << "</g>\n";
}

}  // namespace

void check_shape(const AttentionMatrix& matrix) {
  if (matrix.weights.size() != matrix.target_tokens.size()) {
    throw std::invalid_argument("attention matrix has " + std::to_string(matrix.weights.size()) + " rows but " +
                                std::to_string(matrix.target_tokens.size()) + " target tokens");
  }
  for (std::size_t row = 0; row < matrix.weights.size(); ++row) {
    if (matrix.weights[row].size() != matrix.source_tokens.size()) {
      throw std::invalid_argument("attention matrix row " + std::to_string(row) + " has " +
                                  std::to_string(matrix.weights[row].size()) + " entries but there are " +
                                  std::to_string(matrix.source_tokens.size()) + " source tokens");
    }
  }
}

std::string attention_json(const AttentionMatrix& matrix) {
  check_shape(matrix);
  // nlohmann-json does the escaping and the numbers (non-finite ones become
  // null); the layout, one weight row per line, is ours.
  const auto dump = [](const nlohmann::json& value) { return value.dump(); };
  // Each byte that is not valid UTF-8 becomes U+FFFD first, as in the SVG's
  // labels, so the file always parses.
  const auto tokens = [](const std::vector<std::string>& texts) {
    nlohmann::json list = nlohmann::json::array();
    for (const std::string& text : texts) {
      std::string valid;
      for (std::size_t position = 0; position < text.size();) append_utf8(valid, next_code_point(text, position));
      list.push_back(valid);
    }
    return list;
  };
  std::string output = "{\"source_tokens\": " + dump(tokens(matrix.source_tokens)) + ",\n";
  output += " \"target_tokens\": " + dump(tokens(matrix.target_tokens)) + ",\n";
  output += " \"weights\": [";
  for (std::size_t row = 0; row < matrix.weights.size(); ++row) {
    nlohmann::json weights = nlohmann::json::array();
    for (const float weight : matrix.weights[row]) {
      // Six significant digits, like printf("%.6g"): enough for a heatmap.
      weights.push_back(std::isfinite(weight) ? nlohmann::json(six_significant_digits(weight))
                                              : nlohmann::json(nullptr));
    }
    output += (row == 0 ? "\n  " : ",\n  ") + dump(weights);
  }
  output += matrix.weights.empty() ? "]}" : "\n ]}";
  return output;
}

std::vector<std::pair<std::size_t, std::size_t>> alignment_pairs(const AttentionMatrix& matrix) {
  check_shape(matrix);
  std::vector<std::pair<std::size_t, std::size_t>> pairs;
  for (std::size_t row = 0; row < matrix.weights.size(); ++row) {
    if (matrix.target_tokens[row] == kEndOfSentence) continue;
    // Strict '>' keeps the first maximum on ties, like numpy.argmax; NaNs
    // are ignored rather than allowed to poison the comparison.
    const std::size_t no_column = matrix.source_tokens.size();
    std::size_t best_column = no_column;
    for (std::size_t column = 0; column < matrix.weights[row].size(); ++column) {
      const float weight = matrix.weights[row][column];
      if (std::isnan(weight)) continue;
      if (best_column == no_column || weight > matrix.weights[row][best_column]) best_column = column;
    }
    if (best_column == no_column) continue;  // no columns, or all NaN
    if (matrix.source_tokens[best_column] == kEndOfSentence) continue;
    pairs.emplace_back(best_column, row);
  }
  return pairs;
}

std::string hard_alignment(const AttentionMatrix& matrix) {
  std::string output;
  for (const auto& [column, row] : alignment_pairs(matrix)) {
    if (!output.empty()) output += ' ';
    output += std::to_string(column) + "-" + std::to_string(row);
  }
  return output;
}

std::string attention_svg(const AttentionMatrix& matrix, const std::string& caption) {
  check_shape(matrix);
  const SvgLayout layout = svg_layout(matrix, caption);
  std::ostringstream svg;
  svg.imbue(std::locale::classic());
  write_svg_start(svg, layout);
  write_source_labels(svg, matrix, layout);
  write_target_labels(svg, matrix, layout);
  write_cells(svg, matrix, layout);
  write_colour_bar(svg, layout);
  write_caption(svg, layout);
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace nmt
