#include "eval/attention_export.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstddef>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

std::size_t count_occurrences(const std::string& text, const std::string& needle) {
  std::size_t count = 0;
  for (std::size_t position = text.find(needle); position != std::string::npos;
       position = text.find(needle, position + needle.size())) {
    ++count;
  }
  return count;
}

// Value of the first `name="..."` attribute at or after `from`.
double attribute_after(const std::string& text, std::size_t from, const std::string& name) {
  const std::string key = " " + name + "=\"";
  const std::size_t start = text.find(key, from);
  REQUIRE(start != std::string::npos);
  return std::stod(text.substr(start + key.size()));
}

// 2 target rows x 3 source columns; the weights are exact binary fractions
// so their printed form is known without rounding questions.
nmt::AttentionMatrix two_by_three() {
  nmt::AttentionMatrix matrix;
  matrix.source_tokens = {"▁Hallo", "▁Welt", "</s>"};
  matrix.target_tokens = {"▁Hello", "</s>"};
  matrix.weights = {{0.5f, 0.25f, 0.25f}, {0.125f, 0.125f, 0.75f}};
  return matrix;
}

}  // namespace

TEST_CASE("check_shape rejects mismatched and ragged matrices", "[attention-export]") {
  nmt::AttentionMatrix matrix = two_by_three();
  CHECK_NOTHROW(nmt::check_shape(matrix));

  SECTION("more target tokens than rows") {
    matrix.target_tokens.push_back("extra");
    CHECK_THROWS_AS(nmt::check_shape(matrix), std::invalid_argument);
    CHECK_THROWS_AS(nmt::attention_json(matrix), std::invalid_argument);
    CHECK_THROWS_AS(nmt::attention_svg(matrix), std::invalid_argument);
    CHECK_THROWS_AS(nmt::hard_alignment(matrix), std::invalid_argument);
  }
  SECTION("a ragged row") {
    matrix.weights[1].pop_back();
    CHECK_THROWS_AS(nmt::check_shape(matrix), std::invalid_argument);
    CHECK_THROWS_AS(nmt::attention_svg(matrix), std::invalid_argument);
  }
  SECTION("rows wider than the source") {
    matrix.source_tokens.pop_back();
    CHECK_THROWS_AS(nmt::check_shape(matrix), std::invalid_argument);
  }
  SECTION("an empty matrix is a valid shape") { CHECK_NOTHROW(nmt::check_shape(nmt::AttentionMatrix{})); }
}

TEST_CASE("attention_json writes the exact expected text for a 2x3 matrix", "[attention-export]") {
  const std::string expected =
      "{\"source_tokens\": [\"▁Hallo\",\"▁Welt\",\"</s>\"],\n"
      " \"target_tokens\": [\"▁Hello\",\"</s>\"],\n"
      " \"weights\": [\n"
      "  [0.5,0.25,0.25],\n"
      "  [0.125,0.125,0.75]\n"
      " ]}";
  const std::string json = nmt::attention_json(two_by_three());
  CHECK(json == expected);
  const auto parsed = nlohmann::json::parse(json);
  CHECK(parsed["weights"][1][2].get<double>() == 0.75);
  CHECK(parsed["source_tokens"][1].get<std::string>() == "▁Welt");
}

TEST_CASE("attention_json rounds to %.6g digits and writes null for non-finite weights", "[attention-export]") {
  nmt::AttentionMatrix matrix;
  matrix.source_tokens = {"a", "b", "c", "d"};
  matrix.target_tokens = {"x"};
  matrix.weights = {{0.1f, 1.0f / 3.0f, std::numeric_limits<float>::quiet_NaN(), 1e-7f}};
  CHECK(nmt::attention_json(matrix).find("[0.1,0.333333,null,1e-07]") != std::string::npos);
  CHECK(nmt::attention_json(nmt::AttentionMatrix{}) ==
        "{\"source_tokens\": [],\n \"target_tokens\": [],\n \"weights\": []}");
}

TEST_CASE("attention_json escapes every token so that the file parses back to the same tokens", "[attention-export]") {
  nmt::AttentionMatrix matrix;
  matrix.source_tokens = {"a\"b\\c", std::string("\n\t\x01\x1f", 4), std::string("a\0b", 3), "▁Hund → 🐕"};
  matrix.target_tokens = {"a\x80z\xe2\x82"};
  matrix.weights = {{0.25f, 0.25f, 0.25f, 0.25f}};
  const std::string json = nmt::attention_json(matrix);
  const auto parsed = nlohmann::json::parse(json);
  for (std::size_t column = 0; column < matrix.source_tokens.size(); ++column) {
    CHECK(parsed["source_tokens"][column].get<std::string>() == matrix.source_tokens[column]);
  }
  // Stray or truncated bytes are not UTF-8: each becomes U+FFFD instead of breaking the file.
  CHECK(parsed["target_tokens"][0].get<std::string>() == "a\xEF\xBF\xBDz\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST_CASE("tokens with markup characters are escaped in SVG and JSON", "[attention-export]") {
  nmt::AttentionMatrix matrix;
  matrix.source_tokens = {"a<&\"b", "it's", "</s>"};
  matrix.target_tokens = {"x>y"};
  matrix.weights = {{0.2f, 0.3f, 0.5f}};

  const std::string json = nmt::attention_json(matrix);
  CHECK(json.find("\"a<&\\\"b\"") != std::string::npos);
  CHECK(json.find("\"it's\"") != std::string::npos);

  const std::string svg = nmt::attention_svg(matrix, "caption with <tags> & \"quotes\"");
  CHECK(svg.find("a&lt;&amp;&quot;b") != std::string::npos);
  CHECK(svg.find("it&apos;s") != std::string::npos);
  CHECK(svg.find("x&gt;y") != std::string::npos);
  CHECK(svg.find("&lt;/s&gt;") != std::string::npos);
  CHECK(svg.find("caption with &lt;tags&gt; &amp; &quot;quotes&quot;") != std::string::npos);
  CHECK(svg.find("a<&") == std::string::npos);
  CHECK(svg.find("<tags>") == std::string::npos);
  CHECK(svg.find("</s>") == std::string::npos);
}

TEST_CASE("attention_svg has one titled cell per weight and nothing active", "[attention-export]") {
  const nmt::AttentionMatrix matrix = two_by_three();
  const std::string svg = nmt::attention_svg(matrix, "Hallo Welt\nHello");

  CHECK(svg.find("xmlns=\"http://www.w3.org/2000/svg\"") != std::string::npos);
  CHECK(svg.find(" viewBox=\"0 0 ") != std::string::npos);
  CHECK(count_occurrences(svg, "<rect class=\"cell\"") == 6);
  CHECK(count_occurrences(svg, "<title>") == 6);
  CHECK(count_occurrences(svg, "</title></rect>") == 6);
  CHECK(svg.find("<title>▁Hello → ▁Hallo: 0.500</title>") != std::string::npos);
  CHECK(svg.find("<title>&lt;/s&gt; → &lt;/s&gt;: 0.750</title>") != std::string::npos);
  CHECK(svg.find("<script") == std::string::npos);
  CHECK(svg.find("href") == std::string::npos);
  CHECK(svg.find("@import") == std::string::npos);
  // Colour bar ticks and both caption lines.
  CHECK(svg.find(">0.5</text>") != std::string::npos);
  CHECK(svg.find(">Hallo Welt</text>") != std::string::npos);
  CHECK(svg.find(">Hello</text>") != std::string::npos);
  // The scale runs from white (0) to dark blue (1).
  nmt::AttentionMatrix extremes;
  extremes.source_tokens = {"a", "b"};
  extremes.target_tokens = {"x"};
  extremes.weights = {{0.0f, 1.0f}};
  const std::string extremes_svg = nmt::attention_svg(extremes);
  CHECK(extremes_svg.find("fill=\"#ffffff\"><title>x → a: 0.000") != std::string::npos);
  CHECK(extremes_svg.find("fill=\"#08306b\"><title>x → b: 1.000") != std::string::npos);
}

TEST_CASE("attention_svg places every cell inside the canvas", "[attention-export]") {
  nmt::AttentionMatrix matrix = two_by_three();
  // A long label must grow the canvas rather than be cut off.
  matrix.target_tokens[0] = "▁Donaudampfschifffahrtsgesellschaftskapitän";
  const std::string svg = nmt::attention_svg(matrix);
  const double width = attribute_after(svg, svg.find("<svg"), "width");
  const double height = attribute_after(svg, svg.find("<svg"), "height");
  CHECK(width > 300);  // the label alone is ~40 characters of 12px text
  std::size_t cells = 0;
  for (std::size_t position = svg.find("<rect class=\"cell\""); position != std::string::npos;
       position = svg.find("<rect class=\"cell\"", position + 1)) {
    const double x = attribute_after(svg, position, "x");
    const double y = attribute_after(svg, position, "y");
    CHECK(x > 300);  // right of the long target label
    CHECK(y > 0);
    CHECK(x + attribute_after(svg, position, "width") <= width);
    CHECK(y + attribute_after(svg, position, "height") <= height);
    ++cells;
  }
  CHECK(cells == 6);
}

TEST_CASE("hard_alignment gives argmax source-target pairs and skips EOS", "[attention-export]") {
  nmt::AttentionMatrix matrix;
  matrix.source_tokens = {"▁Das", "▁ist", "▁gut", "</s>"};
  matrix.target_tokens = {"▁This", "▁is", "▁good", ".", "</s>"};
  matrix.weights = {
      {0.70f, 0.10f, 0.10f, 0.10f},  // row 0 -> column 0: "0-0"
      {0.10f, 0.20f, 0.60f, 0.10f},  // row 1 -> column 2: "2-1" (source first)
      {0.10f, 0.60f, 0.20f, 0.10f},  // row 2 -> column 1: "1-2"
      {0.10f, 0.10f, 0.20f, 0.60f},  // row 3 -> the EOS column: no pair
      {0.10f, 0.10f, 0.70f, 0.10f},  // row 4 is the target EOS: skipped
  };
  CHECK(nmt::hard_alignment(matrix) == "0-0 2-1 1-2");

  SECTION("ties go to the first column, like numpy.argmax") {
    matrix.weights[0] = {0.40f, 0.40f, 0.10f, 0.10f};
    matrix.weights[3] = {0.45f, 0.05f, 0.05f, 0.45f};
    CHECK(nmt::hard_alignment(matrix) == "0-0 2-1 1-2 0-3");
  }
  SECTION("nothing to align") {
    CHECK(nmt::hard_alignment(nmt::AttentionMatrix{}).empty());
    nmt::AttentionMatrix only_eos;
    only_eos.source_tokens = {"a", "</s>"};
    only_eos.target_tokens = {"b"};
    only_eos.weights = {{0.1f, 0.9f}};
    CHECK(nmt::hard_alignment(only_eos).empty());
  }
}
