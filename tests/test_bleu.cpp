// Tests for the sacreBLEU-compatible metrics in src/eval. Every expected value
// is derived by hand in the comments from sacreBLEU 2.x's definitions
// (sacrebleu/tokenizers/tokenizer_13a.py, tokenizer_re.py,
// sacrebleu/metrics/bleu.py, chrf.py), not taken from running this code.
#include <catch2/catch.hpp>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "eval/bleu.h"
#include "eval/chrf.h"
#include "eval/tokenize_13a.h"

using nmt::eval::BleuOptions;
using nmt::eval::BleuScore;
using nmt::eval::BleuTokenize;
using nmt::eval::corpus_bleu;
using nmt::eval::corpus_chrf;
using nmt::eval::tokenize_13a;

namespace {

Approx close_to(double value) { return Approx(value).epsilon(1e-12).margin(1e-12); }

}  // namespace

TEST_CASE("13a splits punctuation and symbols off words", "[bleu]") {
  // "!" is in the symbol class of the first regex; "," follows the
  // non-digit "o" so the second regex separates it.
  CHECK(tokenize_13a("Hello, world!") == "Hello , world !");
  CHECK(tokenize_13a("(a)[b]{c}") == "( a ) [ b ] { c }");
  CHECK(tokenize_13a("x/y:z;w?") == "x / y : z ; w ?");
  // Apostrophes are not in any 13a rule, so contractions stay whole.
  CHECK(tokenize_13a("don't") == "don't");
  // Each "." follows a letter: "U . S ." (the regex resumes after "U.").
  CHECK(tokenize_13a("U.S.") == "U . S .");
}

TEST_CASE("13a keeps periods and commas inside numbers", "[bleu]") {
  // In "1,000.5" the "," and "." both sit between digits, so neither the
  // "not preceded by a digit" nor the "not followed by a digit" rule fires;
  // the sentence-final "." follows "s" and is split.
  CHECK(tokenize_13a("It costs 1,000.5 dollars.") == "It costs 1,000.5 dollars .");
  // "," after a digit but before a space: split by the "not followed by a
  // digit" rule.
  CHECK(tokenize_13a("1, 2") == "1 , 2");
  // "." before a digit but after a space: split by the "not preceded by a
  // digit" rule.
  CHECK(tokenize_13a("value .5") == "value . 5");
}

TEST_CASE("13a splits a dash only after a digit", "[bleu]") {
  CHECK(tokenize_13a("pages 3-4") == "pages 3 - 4");
  CHECK(tokenize_13a("well-known") == "well-known");
  CHECK(tokenize_13a("x -5") == "x -5");
}

TEST_CASE("13a unescapes HTML entities in sacreBLEU's order", "[bleu]") {
  // &quot; -> ", &amp; -> &, &lt; -> <, &gt; -> >, then ", &, <, > are all
  // symbols that get split off.
  CHECK(tokenize_13a("&quot;Tom &amp; Jerry&quot; &lt;3 &gt;") == "\" Tom & Jerry \" < 3 >");
  // The replacements run one after another: "&amp;lt;" -> "&lt;" -> "<".
  CHECK(tokenize_13a("a &amp;lt; b") == "a < b");
  // ";" is in the ":" to "@" range of the symbol class as well.
  CHECK(tokenize_13a("&nbsp;") == "& nbsp ;");
}

TEST_CASE("13a handles <skipped>, line breaks and whitespace", "[bleu]") {
  CHECK(tokenize_13a("foo <skipped> bar") == "foo bar");
  // "-\n" is a hyphenated line break and is removed, other "\n" become spaces.
  CHECK(tokenize_13a("co-\noperate") == "cooperate");
  CHECK(tokenize_13a("line one\nline two") == "line one line two");
  CHECK(tokenize_13a("  many   spaces\there  ") == "many spaces here");
  CHECK(tokenize_13a("") == "");
  // Python's str.split() also splits on Unicode spaces such as U+00A0 and
  // U+3000, but not on U+200B (zero width space, not whitespace).
  CHECK(tokenize_13a("a\xC2\xA0"
                     "b\xE3\x80\x80"
                     "c") == "a b c");
  CHECK(tokenize_13a("a\xE2\x80\x8B"
                     "b") ==
        "a\xE2\x80\x8B"
        "b");
  // Non-ASCII letters pass through; the rules only look at ASCII.
  CHECK(tokenize_13a("Gr\xC3\xBC\xC3\x9F"
                     "e, Stra\xC3\x9F"
                     "e.") ==
        "Gr\xC3\xBC\xC3\x9F"
        "e , Stra\xC3\x9F"
        "e .");
}

TEST_CASE("BLEU clips n-gram counts and smooths zero orders with 'exp'", "[bleu]") {
  // hyp "the the the the" vs ref "the cat sat on the mat":
  //   1-grams: "the" x4, the reference has it twice -> 2 / 4
  //   2-grams: "the the" x3 -> 0 / 3; 3-grams 0 / 2; 4-grams 0 / 1
  // exp smoothing doubles a factor at every zero order:
  //   p1 = 100*2/4 = 50, p2 = 100/(2*3), p3 = 100/(4*2) = 12.5,
  //   p4 = 100/(8*1) = 12.5
  // hyp_len 4 < ref_len 6, so BP = exp(1 - 6/4) = exp(-0.5).
  const BleuScore result = corpus_bleu({"the the the the"}, {{"the cat sat on the mat"}});
  CHECK(result.matches == std::array<long long, 4>{2, 0, 0, 0});
  CHECK(result.totals == std::array<long long, 4>{4, 3, 2, 1});
  CHECK(result.precisions[0] == close_to(50.0));
  CHECK(result.precisions[1] == close_to(100.0 / 6.0));
  CHECK(result.precisions[2] == close_to(12.5));
  CHECK(result.precisions[3] == close_to(12.5));
  CHECK(result.hyp_length == 4);
  CHECK(result.ref_length == 6);
  CHECK(result.brevity_penalty == close_to(std::exp(-0.5)));
  const double expected = std::exp(-0.5) * std::pow(50.0 * (100.0 / 6.0) * 12.5 * 12.5, 0.25);
  CHECK(result.score == close_to(expected));  // about 11.52
}

TEST_CASE("BLEU exp smoothing only counts the orders without matches", "[bleu]") {
  // hyp "a cat sat b" vs ref "the cat sat on the mat":
  //   1-grams a, cat, sat, b -> 2 / 4;   2-grams "cat sat" -> 1 / 3
  //   3-grams 0 / 2 -> 100/(2*2) = 25;   4-grams 0 / 1 -> 100/(4*1) = 25
  // BP = exp(1 - 6/4).
  const BleuScore result = corpus_bleu({"a cat sat b"}, {{"the cat sat on the mat"}});
  CHECK(result.matches == std::array<long long, 4>{2, 1, 0, 0});
  CHECK(result.precisions[0] == close_to(50.0));
  CHECK(result.precisions[1] == close_to(100.0 / 3.0));
  CHECK(result.precisions[2] == close_to(25.0));
  CHECK(result.precisions[3] == close_to(25.0));
  const double expected = std::exp(-0.5) * std::pow(50.0 * (100.0 / 3.0) * 25.0 * 25.0, 0.25);
  CHECK(result.score == close_to(expected));
}

TEST_CASE("BLEU of a perfect match is 100", "[bleu]") {
  // Every precision is c/c = 100%, BP = 1, so BLEU = exp(4 log 100 / 4) = 100.
  const BleuScore result = corpus_bleu({"The cat sat on the mat.", "Hello world again , friends"},
                                       {{"The cat sat on the mat.", "Hello world again , friends"}});
  CHECK(result.score == close_to(100.0));
  CHECK(result.brevity_penalty == 1.0);
  // 13a makes the first sentence 7 tokens; the second has 5.
  CHECK(result.hyp_length == 12);
  CHECK(result.ref_length == 12);
  CHECK(result.format() ==
        "BLEU = 100.00 100.0/100.0/100.0/100.0 (BP = 1.000 ratio = 1.000 hyp_len = 12 "
        "ref_len = 12)");
  CHECK(result.signature == "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:nmt-1.0");
}

TEST_CASE("BLEU brevity penalty for a short hypothesis", "[bleu]") {
  // hyp "the cat sat on" is a prefix of the 6-token reference: all its
  // n-grams match (4/4, 3/3, 2/2, 1/1), BP = exp(1 - 6/4) = exp(-0.5),
  // so BLEU = 100 * exp(-0.5) = 60.65...
  const BleuScore result = corpus_bleu({"the cat sat on"}, {{"the cat sat on the mat"}});
  CHECK(result.brevity_penalty == close_to(std::exp(-0.5)));
  CHECK(result.score == close_to(100.0 * std::exp(-0.5)));
  CHECK(result.format() ==
        "BLEU = 60.65 100.0/100.0/100.0/100.0 (BP = 0.607 ratio = 0.667 hyp_len = 4 "
        "ref_len = 6)");
}

TEST_CASE("BLEU with no matching n-gram is 0", "[bleu]") {
  // sacreBLEU stops early when no order has a match: score 0, all
  // precisions reported as 0 (smoothing is never applied).
  const BleuScore result = corpus_bleu({"a b c d"}, {{"w x y z"}});
  CHECK(result.score == 0.0);
  CHECK(result.precisions == std::array<double, 4>{0.0, 0.0, 0.0, 0.0});
  CHECK(result.totals == std::array<long long, 4>{4, 3, 2, 1});
  CHECK(result.brevity_penalty == 1.0);
}

TEST_CASE("BLEU is 0 when a hypothesis order has no n-grams at all", "[bleu]") {
  // "the cat" has no 3- or 4-grams: total[2] == 0 stops the precision loop,
  // p3 = p4 = 0 and log(0) is floored to -9999999999, so BLEU = 0 even
  // though the sentence matches its reference exactly.
  const BleuScore result = corpus_bleu({"the cat"}, {{"the cat"}});
  CHECK(result.matches == std::array<long long, 4>{2, 1, 0, 0});
  CHECK(result.precisions[0] == close_to(100.0));
  CHECK(result.precisions[2] == 0.0);
  CHECK(result.score == 0.0);
}

TEST_CASE("BLEU of an empty hypothesis", "[bleu]") {
  // hyp_len 0 < ref_len 2 gives BP = 0 (sacreBLEU's sys_len == 0 case),
  // and no n-gram matches gives score 0; ratio = 0/2.
  const BleuScore result = corpus_bleu({""}, {{"the cat"}});
  CHECK(result.score == 0.0);
  CHECK(result.brevity_penalty == 0.0);
  CHECK(result.hyp_length == 0);
  CHECK(result.ref_length == 2);
  CHECK(result.format() == "BLEU = 0.00 0.0/0.0/0.0/0.0 (BP = 0.000 ratio = 0.000 hyp_len = 0 ref_len = 2)");
}

TEST_CASE("BLEU with multiple references", "[bleu]") {
  SECTION("clipping uses the maximum count over references") {
    // hyp "the the cat sat"; ref A "the cat sat"; ref B "the the dog barked loudly".
    //   1-grams: "the" x2 clipped by max(1, 2) = 2, cat, sat -> 4 / 4
    //   2-grams: "the the" (B), "the cat", "cat sat" (A) -> 3 / 3
    //   3-grams: "the cat sat" (A) only -> 1 / 2
    //   4-grams: 0 / 1 -> smoothed 100 / (2 * 1) = 50
    // Lengths: hyp 4, refs 3 and 5 are equally close -> the shorter, 3,
    // so BP = 1. BLEU = (100 * 100 * 50 * 50)^(1/4) = 50 * sqrt(2).
    const BleuScore result = corpus_bleu({"the the cat sat"}, {{"the cat sat"}, {"the the dog barked loudly"}});
    CHECK(result.matches == std::array<long long, 4>{4, 3, 1, 0});
    CHECK(result.totals == std::array<long long, 4>{4, 3, 2, 1});
    CHECK(result.ref_length == 3);
    CHECK(result.brevity_penalty == 1.0);
    CHECK(result.score == close_to(50.0 * std::sqrt(2.0)));
    CHECK(result.signature == "nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:nmt-1.0");
  }
  SECTION("the closest reference length wins") {
    // hyp has 4 tokens; references have 2 (|4-2| = 2) and 5 (|4-5| = 1).
    const BleuScore result = corpus_bleu({"a b c d"}, {{"a b"}, {"a b c d e"}});
    CHECK(result.ref_length == 5);
  }
  SECTION("empty reference lines mean fewer references for that sentence") {
    // Sentence 0 has two references, sentence 1 only one: nrefs "var".
    const BleuScore result = corpus_bleu({"a b c d", "e f g h"}, {{"a b c d", "e f g h"}, {"a b c d", ""}});
    CHECK(result.score == close_to(100.0));
    CHECK(result.signature == "nrefs:var|case:mixed|eff:no|tok:13a|smooth:exp|version:nmt-1.0");
    CHECK_THROWS_AS(corpus_bleu({"a"}, {{""}, {""}}), std::invalid_argument);
  }
}

TEST_CASE("BLEU lowercase option", "[bleu]") {
  // Case-sensitive: no token of "The Cat Sat Down" is in "the cat sat down"
  // -> score 0. Lowercased: identical 4-token sentences -> 100.
  const std::vector<std::string> hyps = {"The Cat Sat Down"};
  const std::vector<std::vector<std::string>> refs = {{"the cat sat down"}};
  CHECK(corpus_bleu(hyps, refs).score == 0.0);
  BleuOptions lowercase;
  lowercase.lowercase = true;
  const BleuScore result = corpus_bleu(hyps, refs, lowercase);
  CHECK(result.score == close_to(100.0));
  CHECK(result.signature == "nrefs:1|case:lc|eff:no|tok:13a|smooth:exp|version:nmt-1.0");

  // Python's str.lower() is Unicode aware: "ÉCOLE" -> "école", and a
  // capital sigma at the end of a word becomes final sigma "ς", so
  // "ΟΔΟΣ" -> "οδος".
  const BleuScore greek = corpus_bleu({"\xC3\x89"
                                       "COLE \xCE\x9F\xCE\x94\xCE\x9F\xCE\xA3 \xC3\x89"
                                       "COLE \xCE\x9F\xCE\x94\xCE\x9F\xCE\xA3"},
                                      {{"\xC3\xA9"
                                        "cole \xCE\xBF\xCE\xB4\xCE\xBF\xCF\x82 \xC3\xA9"
                                        "cole \xCE\xBF\xCE\xB4\xCE\xBF\xCF\x82"}},
                                      lowercase);
  CHECK(greek.score == close_to(100.0));
}

TEST_CASE("BLEU tokenize none splits on whitespace only", "[bleu]") {
  // 13a splits "mat." into "mat ." so both sides are identical -> 100.
  const std::vector<std::string> hyps = {"the cat sat on the mat."};
  const std::vector<std::vector<std::string>> refs = {{"the cat sat on the mat ."}};
  CHECK(corpus_bleu(hyps, refs).score == close_to(100.0));

  // Without tokenization the hypothesis has 6 tokens ending in "mat.",
  // the reference 7 tokens: matches 5/6, 4/5, 3/4, 2/3 (every n-gram
  // except the ones containing "mat."), BP = exp(1 - 7/6), so
  // BLEU = exp(-1/6) * 100 * (5/6 * 4/5 * 3/4 * 2/3)^(1/4)
  //      = exp(-1/6) * 100 * (1/3)^(1/4).
  BleuOptions none;
  none.tokenize = BleuTokenize::kNone;
  const BleuScore result = corpus_bleu(hyps, refs, none);
  CHECK(result.matches == std::array<long long, 4>{5, 4, 3, 2});
  CHECK(result.totals == std::array<long long, 4>{6, 5, 4, 3});
  CHECK(result.ref_length == 7);
  CHECK(result.score == close_to(std::exp(1.0 - 7.0 / 6.0) * 100.0 * std::pow(1.0 / 3.0, 0.25)));
  CHECK(result.signature == "nrefs:1|case:mixed|eff:no|tok:none|smooth:exp|version:nmt-1.0");
}

TEST_CASE("chrF on a tiny hand-computed case", "[bleu]") {
  // hyp "ab", ref "abc" (character n-grams, orders 1..6):
  //   order 1: hyp a,b (2)  ref a,b,c (3)  matches 2
  //   order 2: hyp ab (1)   ref ab,bc (2)  matches 1
  //   order 3: hyp none     ref abc (1)    -> not an effective order
  //   orders 4-6: nothing on either side
  // Averaged over the 2 effective orders: precision (2/2 + 1/1)/2 = 1,
  // recall (2/3 + 1/2)/2 = 7/12.
  // F2 = (1 + 4) * P * R / (4 * P + R) = (35/12) / (55/12) = 7/11.
  const double expected = 100.0 * 7.0 / 11.0;  // 63.6363...
  const nmt::eval::ChrfScore result = corpus_chrf({"ab"}, {{"abc"}});
  CHECK(result.score == close_to(expected));
  CHECK(result.format() == "chrF2 = 63.64");
  CHECK(result.signature == "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:nmt-1.0");

  // Whitespace is removed before extracting n-grams: same statistics.
  CHECK(corpus_chrf({"a b"}, {{"ab c"}}).score == close_to(expected));
  // Characters are code points, not bytes: "é" counts as one character.
  CHECK(corpus_chrf({"\xC3\xA9"
                     "a"},
                    {{"\xC3\xA9"
                      "ab"}})
            .score == close_to(expected));
}

TEST_CASE("chrF sums statistics over the corpus before scoring", "[bleu]") {
  // Sentence 1, "ab" vs "abc": order 1 (2, 3, 2), order 2 (1, 2, 1),
  //   order 3 (0, 1, 0).
  // Sentence 2, "a" vs "a": order 1 (1, 1, 1); the reference has no
  //   bigrams so its hypothesis bigrams are not counted either.
  // Sums: order 1 (3, 4, 3), order 2 (1, 2, 1), order 3 (0, 1, 0).
  // P = (3/3 + 1/1)/2 = 1, R = (3/4 + 1/2)/2 = 5/8,
  // F2 = 5 * 5/8 / (4 + 5/8) = 25/37.
  CHECK(corpus_chrf({"ab", "a"}, {{"abc", "a"}}).score == close_to(100.0 * 25.0 / 37.0));
}

TEST_CASE("chrF uses the best reference of each sentence", "[bleu]") {
  // Against "xyz" nothing matches (F = 0); against "abc" F = 7/11 as above.
  CHECK(corpus_chrf({"ab"}, {{"xyz"}, {"abc"}}).score == close_to(100.0 * 7.0 / 11.0));
}

TEST_CASE("chrF of identical strings is 100", "[bleu]") {
  // Every effective order has precision = recall = 1, so F2 = 5/5 = 1.
  const nmt::eval::ChrfScore result =
      corpus_chrf({"the cat sat on the mat", "Grüße"}, {{"the cat sat on the mat", "Grüße"}});
  CHECK(result.score == close_to(100.0));
  CHECK(result.format() == "chrF2 = 100.00");
}

TEST_CASE("Mismatched line counts are rejected", "[bleu]") {
  const std::vector<std::string> hyps(7, "a b c d");
  const std::vector<std::vector<std::string>> refs = {std::vector<std::string>(4, "a b c d")};
  // The message names both counts.
  CHECK_THROWS_AS(corpus_bleu(hyps, refs), std::invalid_argument);
  CHECK_THROWS_WITH(corpus_bleu(hyps, refs), Catch::Contains("7 hypothesis lines") && Catch::Contains("has 4 lines"));
  CHECK_THROWS_AS(corpus_chrf(hyps, refs), std::invalid_argument);
  CHECK_THROWS_WITH(corpus_chrf(hyps, refs), Catch::Contains("7 hypothesis lines") && Catch::Contains("has 4 lines"));
  // A missing reference stream is a user mistake too.
  CHECK_THROWS_AS(corpus_bleu(hyps, {}), std::invalid_argument);
}
