// Markup and protected spans: read out of a line, put back into its translation by the attention,
// well-formed whatever the alignment, each item exactly once.
#include <libxml/parser.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <random>

#include "cli_helpers.h"
#include "search/translator.h"
#include "text/frame.h"
#include "text/markup.h"
#include "text/masking.h"
#include "text/protect.h"
#include "text/special_tokens.h"
#include "text/vocabulary.h"
#include "util/io.h"

using namespace nmt;
using namespace nmt::testing;

namespace {

// Whether `text` parses as XML inside one root element (libxml2's parser, not ours).
bool well_formed_xml(const std::string& text) {
  const std::string document = "<root>" + text + "</root>";
  xmlDocPtr parsed = xmlReadMemory(document.data(), static_cast<int>(document.size()), "line.xml", "UTF-8",
                                   XML_PARSE_NOERROR | XML_PARSE_NOWARNING | XML_PARSE_NONET | XML_PARSE_HUGE);
  if (parsed == nullptr) return false;
  xmlFreeDoc(parsed);
  return true;
}

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++n;
  return n;
}

// Words of `text` as target tokens (each its own span) and as source pieces, for place_frame.
std::vector<ByteSpan> word_spans(const std::string& text) {
  std::vector<ByteSpan> spans;
  for (size_t at = 0; at < text.size();) {
    const size_t start = text.find_first_not_of(' ', at);
    if (start == std::string::npos) break;
    const size_t end = std::min(text.find(' ', start), text.size());
    spans.push_back({start, end});
    at = end;
  }
  return spans;
}

// Token t of `target` tied to source piece order[t] (the piece a token attends to most), and each
// source piece to the first token tied to it.
TokenAlignment alignment_of(const std::vector<int>& order, size_t sources) {
  TokenAlignment alignment;
  alignment.source_of_target = order;
  alignment.target_of_source.assign(sources, -1);
  for (size_t t = 0; t < order.size(); ++t) {
    if (order[t] >= 0 && alignment.target_of_source[static_cast<size_t>(order[t])] < 0) {
      alignment.target_of_source[static_cast<size_t>(order[t])] = static_cast<int>(t);
    }
  }
  return alignment;
}

// `frame` put back into `target` (words separated by single spaces) with `order`.
std::string placed(const Frame& frame, const std::string& target, const std::vector<int>& order) {
  const std::vector<ByteSpan> sources = word_spans(frame.text);
  return place_frame(frame, target, word_spans(target), sources, alignment_of(order, sources.size()));
}

}  // namespace

TEST_CASE("markup: tags, entities and what is not translated come out of the text", "[text]") {
  const Frame frame = read_markup(
      "Ein <b>gro&szlig;er</b> <a href=\"a.html?x=1&amp;y=2\" title='A &gt; B'>Hund</a>&nbsp;bellt.<br>"
      "<!-- nicht --><script>if (a < b) x();</script><span translate=\"no\">Bello <i>sagt</i></span> &#8364;5",
      Markup::kHtml);
  INFO(frame.problem);
  REQUIRE(frame.problem.empty());
  CHECK(frame.text ==
        "Ein gro\xc3\x9f"
        "er Hund\xc2\xa0"
        "bellt. \xe2\x82\xac"
        "5");
  std::vector<std::string> what;
  for (const FrameItem& item : frame.items) what.push_back(item.what);
  CHECK(what == std::vector<std::string>{"b", "a", "br", "comment", "script", "translate=no"});
  // Attribute values byte for byte, entities in them untouched; an element encloses its text.
  CHECK(frame.items[1].open == "<a href=\"a.html?x=1&amp;y=2\" title='A &gt; B'>");
  CHECK(frame.items[1].close == "</a>");
  CHECK(frame.text.substr(frame.items[1].begin, frame.items[1].end - frame.items[1].begin) == "Hund");
  CHECK(frame.items[4].open == "<script>if (a < b) x();</script>");
  CHECK(frame.items[5].open == "<span translate=\"no\">Bello <i>sagt</i></span>");
  // &nbsp; goes back as itself.
  REQUIRE(frame.entities.size() >= 1);
  CHECK(frame.entities[0].second == "&szlig;");

  // HTML reads a "<" or "&" that starts nothing as text; XML does not.
  CHECK(read_markup("3 < 5 & 7 > 2", Markup::kHtml).text == "3 < 5 & 7 > 2");
  CHECK(read_markup("3 < 5 & 7 > 2", Markup::kHtml).problem.empty());
  CHECK_THAT(read_markup("3 < 5", Markup::kXml).problem, Catch::Contains("starts no tag"));
  CHECK_THAT(read_markup("Tom & Jerry", Markup::kXml).problem, Catch::Contains("&amp;"));
  // XML is case-sensitive and has no void elements.
  CHECK_THAT(read_markup("<B>x</b>", Markup::kXml).problem, Catch::Contains("</B>"));
  CHECK(read_markup("<B>x</b>", Markup::kHtml).problem.empty());
  CHECK_THAT(read_markup("a<br>b", Markup::kXml).problem, Catch::Contains("never closed"));
  CHECK(read_markup("a<br/>b", Markup::kXml).problem.empty());
}

TEST_CASE("markup: malformed markup is read as text, with the reason", "[text]") {
  std::string deep;
  for (int i = 0; i < 600; ++i) deep += "<i>";
  deep += "x";
  for (int i = 0; i < 600; ++i) deep += "</i>";
  const std::vector<std::pair<std::string, std::string>> malformed = {
      {"Ein <b>Hund", "<b> is never closed"},
      {"Ein Hund</b>", "closes no open element"},
      {"<b><i>x</b></i>", "where </i> was due"},
      {"Ein <b Hund", "has no \">\""},
      {"&bogus; Hund", "&bogus; at byte 1 is no HTML entity"},
      {"&#0; Hund", "is no character"},
      {"&#xD800; Hund", "is no character"},
      {"Ein <!-- Hund", "a comment at byte 5 is never closed"},
      {"<script>x", "never closed"},
      {deep, "nested deeper than 512"},
  };
  for (const auto& [line, problem] : malformed) {
    INFO(line);
    const Frame frame = read_markup(line, Markup::kHtml);
    CHECK_THAT(frame.problem, Catch::Contains(problem));
    CHECK(frame.text == line);  // nothing dropped
    CHECK(frame.items.empty());
    CHECK_FALSE(frame.markup);
  }
}

TEST_CASE("markup: tags go around the target words tied to the words they enclosed", "[text]") {
  // "ein rotes Haus" -> "a red house", in order.
  const Frame frame = read_markup("ein <b>rotes</b> <i>Haus</i>", Markup::kHtml);
  REQUIRE(frame.text == "ein rotes Haus");
  CHECK(placed(frame, "a red house", {0, 1, 2}) == "a <b>red</b> <i>house</i>");
  // Reordered ("Haus rot" style): each tag follows its word.
  CHECK(placed(frame, "house red a", {2, 1, 0}) == "<i>house</i> <b>red</b> a");
  // Two target words tied to one source word: the tag spans both.
  CHECK(placed(frame, "a very red house", {0, 1, 1, 2}) == "a <b>very red</b> <i>house</i>");
  // Entities and markup characters of the translation are written back as markup.
  const Frame entities = read_markup("Tom &amp; <b>Jerry</b> rennt", Markup::kHtml);
  CHECK(placed(entities, "Tom & Jerry runs", {0, 1, 2, 3}) == "Tom &amp; <b>Jerry</b> runs");
  const Frame named = read_markup("a&nbsp;b &lt; c", Markup::kHtml);
  CHECK(placed(named,
               "a\xc2\xa0"
               "b < c",
               {0, 1, 2}) == "a&nbsp;b &lt; c");
  // An empty element stays where the attention puts the word after it; a comment at the start, at the start.
  const Frame points = read_markup("<!-- c -->Er lacht.<br/>Sie weint.", Markup::kHtml);
  REQUIRE(points.text == "Er lacht. Sie weint.");
  CHECK(placed(points, "He laughs. She cries.", {0, 1, 2, 3}) == "<!-- c -->He laughs.<br/> She cries.");
  // A line of markup only comes back as it is.
  const Frame only = read_markup("<br/><img src=\"a.png\"><!-- x -->", Markup::kHtml);
  CHECK(only.text.empty());
  CHECK(place_frame(only, "", {}, {}, {}) == "<br/><img src=\"a.png\"><!-- x -->");
}

TEST_CASE("markup: the output is well-formed and has every tag once, whatever the alignment", "[text]") {
  // Nested tags, tags across a sentence boundary, empty elements and an empty element pair.
  const std::string line =
      "<p>Ein <b>Hund <i>und</i> eine</b> Katze. <a href=\"x\">Sie <b>spielen</b> im</a> Garten.<br/><u></u> "
      "Dann <em>schlafen <s>sie</s></em>.</p>";
  const Frame frame = read_markup(line, Markup::kXml);
  REQUIRE(frame.problem.empty());
  const std::string target = "A dog and a cat . They play in the garden . Then they sleep .";
  const size_t targets = word_spans(target).size(), sources = word_spans(frame.text).size();
  std::mt19937 random(7);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<int> order(targets);
    for (int& source : order) {
      source = static_cast<int>(random() % (sources + 1)) - 1;  // -1: tied to nothing
    }
    const std::string out = placed(frame, target, order);
    INFO(out);
    REQUIRE(well_formed_xml(out));
    for (const std::string tag :
         {"<p>", "</p>", "<b>", "</b>", "<i>", "<a href=\"x\">", "<br/>", "<u>", "<em>", "<s>"}) {
      CHECK(count(out, tag) == count(line, tag));
    }
    // The words of the translation, in order, once each.
    const Frame back = read_markup(out, Markup::kXml);
    std::string words;
    for (const ByteSpan& word : word_spans(back.text))
      words += (words.empty() ? "" : " ") + back.text.substr(word.begin, word.end - word.begin);
    CHECK(words == target);
  }
}

TEST_CASE("placeholders: URLs, addresses, numbers, printf, braces and variables come back once each", "[text]") {
  const Framer framer("none", "url,email,number,printf,braces,variable", {"ID-[0-9]+"}, Vocabulary{});
  const std::string line =
      "Siehe https://example.com/a?b=1&c=2, schreibe an max.muster@example.org: 3,5 kg für $5 und 12 % "
      "von %1$d oder %.2f, {name} und {0}, ${HOME} und ID-42.";
  const Frame frame = framer.frame(line);
  std::vector<std::string> spans;
  for (const FrameItem& item : frame.items) spans.push_back(item.what + ":" + item.open);
  std::sort(spans.begin(), spans.end());
  CHECK(spans == std::vector<std::string>{"braces:{0}", "braces:{name}", "email:max.muster@example.org", "number:$5",
                                          "number:12 %", "number:3,5 kg", "printf:%.2f", "printf:%1$d", "protect:ID-42",
                                          "url:https://example.com/a?b=1&c=2", "variable:${HOME}"});
  CHECK(frame.text == "Siehe , schreibe an : für und von oder , und , und .");
  // Put back into a translation, each once, in the places the alignment gives.
  const std::vector<ByteSpan> sources = word_spans(frame.text);
  std::vector<int> order(sources.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  const std::string out = place_frame(frame, frame.text, sources, sources, alignment_of(order, sources.size()));
  CHECK(out == line);
  // Thousands of spans in one line, each back in its place.
  std::string numbers;
  for (int i = 0; i < 20000; ++i) numbers += (i > 0 ? " " : "") + std::to_string(i) + " x";
  const Frame many = framer.frame(numbers);
  CHECK(many.items.size() == 20000);
  const std::vector<ByteSpan> words = word_spans(many.text);
  std::vector<int> identity(words.size());
  for (size_t i = 0; i < identity.size(); ++i) identity[i] = static_cast<int>(i);
  CHECK(place_frame(many, many.text, words, words, alignment_of(identity, words.size())) == numbers);
  // Words and numbers inside words are not numbers; a span inside markup is kept apart from it.
  CHECK(framer.frame("A4-Blatt und Mp3 und x2").items.empty());
  const Frame marked =
      Framer("html", "all", {}, Vocabulary{}).frame("Um <b>10 Uhr</b> auf <a href=\"https://x.org\">https://x.org</a>");
  REQUIRE(marked.items.size() == 4);
  CHECK(marked.items[2].what == "number");
  CHECK(marked.items[2].parent == 0);
  CHECK(marked.items[3].what == "url");
  CHECK(marked.items[3].parent == 1);

  CHECK_THROWS_WITH(Framer("none", "url,dates", {}, Vocabulary{}), Catch::Contains("'dates' is no kind"));
  CHECK_THROWS_WITH(Framer("none", "none", {"a(b"}, Vocabulary{}),
                    Catch::Contains("--protect 'a(b' is no regular expression"));
  CHECK_THROWS_WITH(Framer("yaml", "none", {}, Vocabulary{}), Catch::Contains("--markup"));
  CHECK(Framer("none", "none", {}, Vocabulary{}).frame("Um 10 Uhr").items.empty());
}

TEST_CASE("cli: translate --markup and placeholders: tags, spans and characters the model lacks come back", "[cli]") {
  const std::string model_dir = (work_directory() / "markup_model").string();
  const CommandResult trained = run_nmt(tiny_train_arguments(model_dir, 30, 30));
  INFO(trained.output);
  REQUIRE(trained.status == 0);
  std::string long_line;  // 100,000 characters of markup and sentences
  while (long_line.size() < 100000) long_line += "<b>The dog eats</b> <i>a</i> frog . ";
  std::string many;  // 1,000 sentences, a tag across each boundary
  for (int i = 0; i < 1000; ++i) many += "<b>The dog eats . <i>A</i></b> frog . ";
  const std::vector<std::string> lines = {
      "<b>A frog</b> sees <a href=\"https://x.org/?a=1&amp;b=2\">the bridge</a> .",
      "The dog <b>eats .</b> A frog <i>sees</i> the bridge .",
      "<br/><!-- only markup -->",
      "",
      "The <b>dog eats .",
      "The dog & eats < 3 .",
      "The dog eats {name} and %s at https://example.com/x , 3,5 kg .",
      "The dog Dvo\xc5\x99\xc3\xa1k eats \xf0\x9f\x90\x95 .",
      long_line,
      many,
  };
  const std::string input = (work_directory() / "markup_input.txt").string();
  std::string text;
  for (const std::string& line : lines) text += line + "\n";
  write_file_atomic(input, text);
  const std::string output = (work_directory() / "markup_output.txt").string();
  const std::string decode = " --beam-size 1 --max-output-length 12 --threads 1 --output " + output;
  const CommandResult result =
      run_nmt("translate --model " + model_dir + " --input " + input + " --markup html" + decode);
  INFO(result.output);
  REQUIRE(result.status == 0);
  const std::vector<std::string> out = read_lines(output);
  REQUIRE(out.size() == lines.size());
  for (size_t i : {0, 1, 2, 8, 9}) {
    INFO(out[i].substr(0, 300));
    CHECK(well_formed_xml(out[i]));
    for (const std::string tag :
         {"<b>", "</b>", "<i>", "</i>", "<br/>", "<!-- only markup -->", "<a href=\"https://x.org/?a=1&amp;b=2\">"}) {
      CHECK(count(out[i], tag) == count(lines[i], tag));
    }
  }
  CHECK(out[2] == lines[2]);
  CHECK(out[3].empty());
  // Malformed: translated as text, with a warning naming the line.
  CHECK_THAT(result.output, Catch::Contains("markup_input.txt:5: its markup was translated as text: <b> is never "
                                            "closed"));
  CHECK_FALSE(Catch::Contains("markup_input.txt:6: its markup").match(result.output));
  CHECK(count(out[5], "&amp;") == 1);  // HTML's lone "&" is text, written back as markup
  for (const std::string span : {"{name}", "%s", "https://example.com/x", "3,5 kg"}) CHECK(count(out[6], span) == 1);
  // Characters the vocabulary lacks (no byte fallback: <unk>) are copied, with their word.
  CHECK(count(out[7], "Dvo\xc5\x99\xc3\xa1k") == 1);
  CHECK(count(out[7], "\xf0\x9f\x90\x95") == 1);

  // Without --placeholders nothing is protected, and the model cannot write what it lacks.
  const CommandResult plain =
      run_nmt("translate --model " + model_dir + " --input " + input + " --placeholders none --quiet" + decode);
  REQUIRE(plain.status == 0);
  CHECK(count(read_lines(output)[7], "\xf0\x9f\x90\x95") == 0);

  // JSON lines say which line's markup was read as text.
  const CommandResult jsonl = run_nmt("translate --model " + model_dir + " --input " + input +
                                      " --markup xml --output-format jsonl --quiet" + decode);
  REQUIRE(jsonl.status == 0);
  const std::vector<std::string> records = read_lines(output);
  REQUIRE(records.size() == lines.size());
  CHECK_THAT(nlohmann::json::parse(records[5])["markup_problem"].get<std::string>(), Catch::Contains("&amp;"));
  CHECK_FALSE(nlohmann::json::parse(records[0]).contains("markup_problem"));

  // A bad option names itself; invalid UTF-8 is an error naming the line.
  const CommandResult bad = run_nmt("translate --model " + model_dir + " --input " + input + " --protect '('" + decode);
  CHECK(bad.status != 0);
  CHECK_THAT(bad.output, Catch::Contains("--protect '(' is no regular expression"));
  write_file_atomic(input, "<b>A frog</b>\nThe \xff dog\n");
  const CommandResult invalid =
      run_nmt("translate --model " + model_dir + " --input " + input + " --markup html" + decode);
  CHECK(invalid.status != 0);
  CHECK_THAT(invalid.output, Catch::Contains("markup_input.txt:2: invalid UTF-8"));
}

namespace {

// The placeholder tokens of `text`, in order.
std::vector<std::string> tokens_in(const std::string& text) {
  std::vector<std::string> tokens;
  for (int number = 1; number <= kPlaceholderTokens; ++number) {
    for (size_t i = 0; i < count(text, placeholder_token(number)); ++i) tokens.push_back(placeholder_token(number));
  }
  std::sort(tokens.begin(), tokens.end());
  return tokens;
}

}  // namespace

TEST_CASE("placeholders: a vocabulary trained with placeholder tokens has them as pieces, text encodes to them",
          "[text]") {
  const std::vector<std::string> sentences = {"a man rides a bike.", "ein Mann fährt Rad, rufe an",
                                              "two dogs play in the snow", "zwei Hunde spielen im Schnee",
                                              "a woman sings on a stage"};
  const Vocabulary with = Vocabulary::from_serialized(
      train_vocabulary({&sentences}, {VocabType::kBpe, 120, 1, 1, false, {}, kPlaceholderTokens}), "with");
  const Vocabulary without =
      Vocabulary::from_serialized(train_vocabulary({&sentences}, {VocabType::kBpe, 120, 1, 1, false, {}}), "without");
  CHECK(with.placeholder_tokens() == kPlaceholderTokens);
  CHECK(without.placeholder_tokens() == 0);
  std::vector<ByteSpan> spans;
  const std::vector<int64_t> ids = with.encode("ein Mann " + placeholder_token(3) + " fährt", &spans);
  CHECK(std::count_if(ids.begin(), ids.end(), [&](int64_t id) { return with.piece(id) == placeholder_token(3); }) == 1);
  CHECK(with.decode(ids) == "ein Mann " + placeholder_token(3) + " fährt");

  // The Framer gives the model tokens with such a vocabulary, and none without or when told not to.
  const std::string line = "Ruf %s an, {name}.";
  const Frame masked = Framer("none", "all", {}, with).frame(line);
  CHECK(masked.text == "Ruf " + placeholder_token(1) + " an, " + placeholder_token(2) + ".");
  REQUIRE(masked.items.size() == 2);
  CHECK(masked.items[0].token == 1);
  CHECK(masked.text.substr(masked.items[0].begin, masked.items[0].end - masked.items[0].begin) == placeholder_token(1));
  CHECK(Framer("none", "all", {}, without).frame(line).text == "Ruf an, .");
  CHECK(Framer("none", "all", {}, with, false).frame(line).text == "Ruf an, .");
  // A line with a token's characters of its own is given none: its text could not be told apart.
  const std::string own = "Ruf %s an " + placeholder_token(1);
  const Frame own_frame = Framer("none", "all", {}, with).frame(own);
  CHECK_FALSE(own_frame.items.empty());
  for (const FrameItem& item : own_frame.items) CHECK(item.token == 0);
}

TEST_CASE("placeholders: a span given as a token goes where the model writes it, once", "[text]") {
  Frame frame = read_markup("Ruf <b>{name}</b> an und %s.", Markup::kHtml);
  take_out(frame,
           {{frame.text.find("{name}"), frame.text.find("{name}") + 6, "braces"},
            {frame.text.find("%s"), frame.text.find("%s") + 2, "printf"}},
           kPlaceholderTokens);
  const std::string one = placeholder_token(1), two = placeholder_token(2);
  REQUIRE(frame.text == "Ruf " + one + " an und " + two + ".");
  const std::vector<ByteSpan> sources = word_spans(frame.text);
  // The model wrote both tokens, in another order: each span where its token is, the tag around it.
  const std::string target = "Call " + two + " and " + one + " now .";
  std::vector<int> order = {0, 4, 3, 1, 2, 4};  // target token t attends to source piece order[t]
  CHECK(place_frame(frame, target, word_spans(target), sources, alignment_of(order, sources.size())) ==
        "Call %s and <b>{name}</b> now .");
  // A token written twice, and one standing for nothing, are dropped with their space.
  const std::string repeated = "Call " + one + " " + two + " now " + one + " " + placeholder_token(7) + " .";
  order = {0, 1, 4, 2, 3, 4, 4};
  CHECK(place_frame(frame, repeated, word_spans(repeated), sources, alignment_of(order, sources.size())) ==
        "Call <b>{name}</b> %s now .");
  // A token the model did not write: its span by the attention, still once.
  const std::string lost = "Call " + one + " and now .";
  order = {0, 1, 2, 3, 4};
  const std::string out = place_frame(frame, lost, word_spans(lost), sources, alignment_of(order, sources.size()));
  CHECK(count(out, "%s") == 1);
  CHECK(count(out, "<b>{name}</b>") == 1);
  CHECK(tokens_in(out).empty());
  // A frame that gave the model no tokens leaves text that looks like one as it is.
  Frame plain = read_markup("Ruf <b>an</b>", Markup::kHtml);
  const std::string looks = "Call " + placeholder_token(1) + " now";
  CHECK(place_frame(plain, looks, word_spans(looks), word_spans(plain.text), alignment_of({0, 0, 1}, 2)) ==
        "Call " + placeholder_token(1) + " <b>now</b>");
  // Spans beyond the tokens a line has are taken out as before.
  Frame many = read_markup("1 2 3 4 5 6 7 8 9 10", Markup::kNone);
  std::vector<TextSpan> numbers;
  for (size_t at = 0; at < many.text.size();) {
    const size_t end = std::min(many.text.find(' ', at), many.text.size());
    numbers.push_back({at, end, "number"});
    at = end + 1;
  }
  CHECK(take_out(many, numbers, kPlaceholderTokens) == 10);
  CHECK(tokens_in(many.text).size() == static_cast<size_t>(kPlaceholderTokens));
  CHECK(count(many.text, "9") == 0);
}

TEST_CASE("placeholders: training pairs masked with the same token on both sides, the share asked for", "[text]") {
  const PairMasker all(1.0, 1);
  std::string source = "Ein als Spiderman verkleidetes Kind klingelt 2 mal an https://example.com/a.";
  std::string target = "A child dressed as Spiderman rings https://example.com/a 2 times.";
  REQUIRE(all.mask(source, target, 7));
  INFO(source << " / " << target);
  CHECK(tokens_in(source).size() == 3);
  CHECK(tokens_in(source) == tokens_in(target));
  for (const std::string span : {"Spiderman", "https://example.com/a", " 2 "}) {
    CHECK(count(source, span) == 0);
    CHECK(count(target, span) == 0);
  }
  // The same span gets the same token on both sides: the URL's token follows "an" and "rings".
  const size_t url = source.find(" an ") + 4;
  const std::string token = source.substr(url, placeholder_token(1).size());
  CHECK(count(target, "rings " + token) == 1);
  // The first word and words without a capital or digit are no names.
  std::string a = "Spiderman und ein Kind.", b = "Spiderman and a child.";
  REQUIRE(all.mask(a, b, 3));
  CHECK(count(a, "Spiderman") == 1);
  // Without a shared span, one token at the start of both sides or before their final stop.
  for (uint64_t index = 0; index < 20; ++index) {
    std::string s = "Ein Hund rennt.", t = "A dog runs.";
    REQUIRE(all.mask(s, t, index));
    const auto tokens = tokens_in(s);
    REQUIRE(tokens.size() == 1);
    CHECK(tokens == tokens_in(t));
    CHECK(((s == tokens[0] + " Ein Hund rennt." && t == tokens[0] + " A dog runs.") ||
           (s == "Ein Hund rennt " + tokens[0] + "." && t == "A dog runs " + tokens[0] + ".")));
  }
  // The share, the same pairs for the same seed and index, none at 0.
  const PairMasker some(0.3, 5);
  int masked = 0;
  for (uint64_t index = 0; index < 2000; ++index) {
    std::string s = "Ein Hund rennt.", t = "A dog runs.";
    std::string s2 = s, t2 = t;
    const bool taken = some.mask(s, t, index);
    CHECK(some.mask(s2, t2, index) == taken);
    CHECK(s2 == s);
    masked += taken;
  }
  CHECK(masked > 500);
  CHECK(masked < 700);
  std::string s = "Ein Hund 2.", t = "A dog 2.";
  CHECK_FALSE(PairMasker(0.0, 1).mask(s, t, 1));
  CHECK(s == "Ein Hund 2.");
}

TEST_CASE("cli: a model trained with placeholder-share is given spans as tokens, each back once", "[cli]") {
  const std::string model_dir = (work_directory() / "placeholder_model").string();
  const CommandResult trained = run_nmt(tiny_train_arguments(model_dir, 20, 20) + " --placeholder-share 0.5");
  INFO(trained.output);
  REQUIRE(trained.status == 0);
  CHECK_THAT(trained.output, Catch::Contains("placeholder tokens in"));
  const std::string input = (work_directory() / "placeholder_input.txt").string();
  write_file_atomic(input, "The dog eats {name} and %s at https://example.com/x .\nThe dog eats .\n");
  const std::string output = (work_directory() / "placeholder_output.jsonl").string();
  const std::string decode =
      " --beam-size 1 --max-output-length 12 --threads 1 --output-format jsonl --quiet --output " + output;
  for (const std::string tokens : {"auto", "no"}) {
    INFO("--placeholder-tokens " << tokens);
    const CommandResult result =
        run_nmt("translate --model " + model_dir + " --input " + input + " --placeholder-tokens " + tokens + decode);
    INFO(result.output);
    REQUIRE(result.status == 0);
    const std::vector<std::string> records = read_lines(output);
    REQUIRE(records.size() == 2);
    const auto record = nlohmann::json::parse(records[0]);
    const std::string sentence = record["sentences"][0].get<std::string>();
    // The model sees the tokens (or nothing of the spans); each span comes back once, no token does.
    CHECK(count(sentence, placeholder_token(1)) == (tokens == "auto" ? 1 : 0));
    CHECK(count(sentence, "{name}") == 0);
    const std::string text = record["text"].get<std::string>();
    for (const std::string span : {"{name}", "%s", "https://example.com/x"}) CHECK(count(text, span) == 1);
    CHECK(tokens_in(text).empty());
  }
  // A bad value names the option.
  const CommandResult bad =
      run_nmt("translate --model " + model_dir + " --input " + input + " --placeholder-tokens maybe" + decode);
  CHECK(bad.status != 0);
  CHECK_THAT(bad.output, Catch::Contains("--placeholder-tokens"));
  // A vocabulary without tokens cannot be given masked pairs: fine-tuning from one says so.
  const std::string plain_dir = (work_directory() / "placeholder_plain").string();
  REQUIRE(run_nmt(tiny_train_arguments(plain_dir, 2, 2)).status == 0);
  const CommandResult from_plain = run_nmt(tiny_train_arguments(model_dir + "_tuned", 2, 2) + " --init-from " +
                                           plain_dir + " --placeholder-share 0.5");
  CHECK(from_plain.status != 0);
  CHECK_THAT(from_plain.output, Catch::Contains("placeholder-share: the vocabularies hold no placeholder tokens"));
  const CommandResult share = run_nmt(tiny_train_arguments(plain_dir, 2, 2) + " --placeholder-share 2");
  CHECK(share.status != 0);
  CHECK_THAT(share.output, Catch::Contains("placeholder-share"));
}
