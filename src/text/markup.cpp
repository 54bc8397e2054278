#include "text/markup.h"

#include <libxml/HTMLparser.h>

#include <algorithm>
#include <cctype>
#include <optional>
#include <stdexcept>

#include "text/utf8.h"

namespace nmt {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'; }
bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':'; }
bool is_name_character(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':' || c == '-' || c == '.';
}

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

// HTML's elements without content (HTML Living Standard, "void elements").
bool is_void_element(const std::string& name) {
  static const char* const kVoid[] = {"area",  "base", "br",   "col",   "embed",  "hr",    "img",
                                      "input", "link", "meta", "param", "source", "track", "wbr"};
  return std::any_of(std::begin(kVoid), std::end(kVoid), [&](const char* v) { return name == v; });
}

// Browsers nest no deeper (Blink's HTML parser); a deeper line is read as text.
constexpr size_t kMaxDepth = 512;

// Thrown inside the reader for malformed markup; read_markup turns it into Frame::problem.
struct Malformed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Reader {
 public:
  Reader(std::string_view line, Markup markup) : line_(line), html_(markup == Markup::kHtml) { frame_.markup = true; }

  Frame read() {
    while (at_ < line_.size()) {
      const char c = line_[at_];
      if (c == '<') {
        read_tag();
      } else if (c == '&') {
        read_entity();
      } else {
        append(line_.substr(at_, 1));
        ++at_;
      }
    }
    if (!open_.empty()) {
      throw Malformed("<" + name_of(open_.back()) + "> is never closed: close it, or leave out --markup");
    }
    for (FrameItem& item : frame_.items) {
      if (item.kind != FrameItem::Kind::kPoint) continue;
      item.space_before = item.begin > 0 && is_space(frame_.text[item.begin - 1]);
      item.space_after = item.begin < frame_.text.size() && is_space(frame_.text[item.begin]);
    }
    return std::move(frame_);
  }

 private:
  // Text of the line: a space first when an empty element stood between it and the text before.
  void append(std::string_view text) {
    if (separate_ && !text.empty() && !frame_.text.empty() && !is_space(frame_.text.back()) && !is_space(text[0])) {
      frame_.text += ' ';
    }
    separate_ = false;
    frame_.text += text;
  }

  int parent() const { return open_.empty() ? -1 : static_cast<int>(open_.back()); }
  const std::string& name_of(size_t element) const { return names_[element]; }

  void add_point(size_t end, const std::string& what) {
    FrameItem item;
    item.kind = FrameItem::Kind::kPoint;
    item.open = std::string(line_.substr(at_, end - at_));
    item.begin = item.end = frame_.text.size();
    item.origin = 2 * frame_.text.size();
    item.parent = parent();
    item.what = what;
    frame_.items.push_back(std::move(item));
    names_.push_back(what);
    at_ = end;
  }

  // The end of what starts at at_ and ends with `terminator`, past it; throws naming `what`.
  size_t end_of(std::string_view terminator, size_t from, const std::string& what) const {
    const size_t found = line_.find(terminator, from);
    if (found == std::string_view::npos) {
      throw Malformed(what + " at byte " + std::to_string(at_ + 1) + " is never closed (no " + std::string(terminator) +
                      ")");
    }
    return found + terminator.size();
  }

  // The end of the tag that starts at `from` ("<name ...>"), quotes respected, or npos.
  size_t tag_end(size_t from) const {
    char quote = 0;
    for (size_t i = from + 1; i < line_.size(); ++i) {
      const char c = line_[i];
      if (quote != 0) {
        if (c == quote) quote = 0;
      } else if (c == '"' || c == '\'') {
        quote = c;
      } else if (c == '>') {
        return i + 1;
      } else if (c == '<') {
        return std::string_view::npos;
      }
    }
    return std::string_view::npos;
  }

  std::string read_name(size_t& i) const {
    const size_t start = i;
    while (i < line_.size() && is_name_character(line_[i])) ++i;
    return std::string(line_.substr(start, i - start));
  }

  bool same_name(const std::string& a, const std::string& b) const { return html_ ? lower(a) == lower(b) : a == b; }

  // Whether the start tag `tag` says translate="no".
  static bool says_translate_no(std::string_view tag) {
    const std::string lowered = lower(tag);
    for (size_t found = lowered.find("translate"); found != std::string::npos;
         found = lowered.find("translate", found + 1)) {
      size_t i = found + 9;
      if (found > 0 && is_name_character(lowered[found - 1])) continue;
      while (i < lowered.size() && is_space(lowered[i])) ++i;
      if (i >= lowered.size() || lowered[i] != '=') continue;
      ++i;
      while (i < lowered.size() && is_space(lowered[i])) ++i;
      if (i < lowered.size() && (lowered[i] == '"' || lowered[i] == '\'')) ++i;
      if (lowered.compare(i, 2, "no") == 0 && (i + 2 == lowered.size() || !is_name_character(lowered[i + 2])))
        return true;
    }
    return false;
  }

  // The end of the element named `name` whose start tag ends at `from`: past its matching end
  // tag, nested elements of the same name counted.
  size_t element_end(const std::string& name, size_t from) const {
    int depth = 1;
    for (size_t i = line_.find('<', from); i != std::string_view::npos; i = line_.find('<', i + 1)) {
      size_t j = i + 1;
      const bool closing = j < line_.size() && line_[j] == '/';
      if (closing) ++j;
      if (!same_name(read_name(j), name)) continue;
      const size_t end = tag_end(i);
      if (end == std::string_view::npos) break;
      if (closing) {
        if (--depth == 0) return end;
      } else if (line_[end - 2] != '/') {
        ++depth;
      }
    }
    throw Malformed("<" + name + "> at byte " + std::to_string(at_ + 1) + " is never closed");
  }

  void read_tag() {
    const std::string_view rest = line_.substr(at_);
    if (rest.rfind("<!--", 0) == 0) return add_point(end_of("-->", at_ + 4, "a comment"), "comment");
    if (rest.rfind("<![CDATA[", 0) == 0) return add_point(end_of("]]>", at_ + 9, "a CDATA section"), "cdata");
    if (rest.rfind("<!", 0) == 0 || rest.rfind("<?", 0) == 0) {
      return add_point(end_of(">", at_ + 2, "a declaration"), "declaration");
    }
    size_t i = at_ + 1;
    const bool closing = i < line_.size() && line_[i] == '/';
    if (closing) ++i;
    if (i >= line_.size() || !is_name_start(line_[i])) {
      if (html_ && !closing) {  // "3 < 5": text, as browsers read it
        append("<");
        ++at_;
        return;
      }
      throw Malformed("a \"<\" at byte " + std::to_string(at_ + 1) +
                      " starts no tag: write &lt; for the character, or leave out --markup");
    }
    const std::string name = read_name(i);
    const size_t end = tag_end(at_);
    if (end == std::string_view::npos) {
      throw Malformed("the tag <" + std::string(closing ? "/" : "") + name + " at byte " + std::to_string(at_ + 1) +
                      " has no \">\"");
    }
    if (closing) {
      if (open_.empty() || !same_name(name_of(open_.back()), name)) {
        throw Malformed(
            "</" + name + "> at byte " + std::to_string(at_ + 1) +
            (open_.empty() ? " closes no open element" : " where </" + name_of(open_.back()) + "> was due"));
      }
      FrameItem& element = frame_.items[open_.back()];
      element.close = std::string(line_.substr(at_, end - at_));
      element.end = frame_.text.size();
      open_.pop_back();
      at_ = end;
      return;
    }
    const std::string key = html_ ? lower(name) : name;
    const std::string_view tag = line_.substr(at_, end - at_);
    const bool empty = tag.size() >= 2 && tag[tag.size() - 2] == '/';
    if (!empty && html_ && (key == "script" || key == "style")) return add_point(element_end(name, end), key);
    if (!empty && says_translate_no(tag)) return add_point(element_end(name, end), "translate=no");
    if (empty || (html_ && is_void_element(key))) {
      add_point(end, key);
      separate_ = true;
      return;
    }
    if (open_.size() >= kMaxDepth) {
      throw Malformed("elements nested deeper than " + std::to_string(kMaxDepth) + " at byte " +
                      std::to_string(at_ + 1));
    }
    FrameItem element;
    element.kind = FrameItem::Kind::kElement;
    element.open = std::string(tag);
    element.begin = element.end = frame_.text.size();
    element.origin = 2 * frame_.text.size();
    element.parent = parent();
    element.what = key;
    open_.push_back(frame_.items.size());
    frame_.items.push_back(std::move(element));
    names_.push_back(name);
    at_ = end;
  }

  // The character a named entity stands for, or nullopt when there is no such entity.
  std::optional<std::string> named(const std::string& name) const {
    static const std::pair<const char*, const char*> kXml[] = {
        {"amp", "&"}, {"lt", "<"}, {"gt", ">"}, {"quot", "\""}, {"apos", "'"}};
    for (const auto& [entity, character] : kXml) {
      if (name == entity) return std::string(character);
    }
    if (!html_) return std::nullopt;
    const htmlEntityDesc* entity = htmlEntityLookup(reinterpret_cast<const xmlChar*>(name.c_str()));
    if (entity == nullptr) return std::nullopt;
    std::string character;
    append_utf8(character, entity->value);
    return character;
  }

  void read_entity() {
    const size_t semicolon = line_.find(';', at_ + 1);
    const std::string_view body = line_.substr(at_ + 1, semicolon == std::string_view::npos ? 0 : semicolon - at_ - 1);
    const bool numeric = !body.empty() && body[0] == '#';
    const bool shaped = semicolon != std::string_view::npos && !body.empty() && body.size() <= 32 &&
                        std::all_of(body.begin() + (numeric ? 1 : 0), body.end(),
                                    [](char c) { return std::isalnum(static_cast<unsigned char>(c)); });
    if (!shaped) {
      if (html_) {  // "Tom & Jerry": text, as browsers read it
        append("&");
        ++at_;
        return;
      }
      throw Malformed("a \"&\" at byte " + std::to_string(at_ + 1) +
                      " starts no entity: write &amp; for the character, or leave out --markup");
    }
    const std::string name(body);
    std::string character;
    if (numeric) {
      const bool hex = name.size() > 1 && (name[1] == 'x' || name[1] == 'X');
      const std::string digits = name.substr(hex ? 2 : 1);
      const bool valid =
          !digits.empty() && digits.size() <= 8 && std::all_of(digits.begin(), digits.end(), [&](char c) {
            return hex ? std::isxdigit(static_cast<unsigned char>(c)) != 0
                       : std::isdigit(static_cast<unsigned char>(c)) != 0;
          });
      const unsigned long value = valid ? std::stoul(digits, nullptr, hex ? 16 : 10) : 0;
      if (value == 0 || value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF)) {
        throw Malformed("&" + name + "; at byte " + std::to_string(at_ + 1) + " is no character");
      }
      append_utf8(character, static_cast<char32_t>(value));
    } else {
      const std::optional<std::string> value = named(name);
      if (!value) {
        throw Malformed("&" + name + "; at byte " + std::to_string(at_ + 1) + " is no " + (html_ ? "HTML" : "XML") +
                        " entity: write &amp;" + name + "; for the text");
      }
      character = *value;
      const bool escaped_anyway = character == "&" || character == "<" || character == ">";
      const bool known = std::any_of(frame_.entities.begin(), frame_.entities.end(),
                                     [&](const auto& entry) { return entry.first == character; });
      if (!escaped_anyway && !known) frame_.entities.emplace_back(character, "&" + name + ";");
    }
    append(character);
    at_ = semicolon + 1;
  }

  std::string_view line_;
  bool html_;
  Frame frame_;
  size_t at_ = 0;
  std::vector<size_t> open_;        // the elements open here, innermost last
  std::vector<std::string> names_;  // per item: its name as written
  bool separate_ = false;           // an empty element was last: a space if it stood between words
};

}  // namespace

const EnumNames<Markup>& markup_names() {
  static const EnumNames<Markup> names = {{"none", Markup::kNone}, {"html", Markup::kHtml}, {"xml", Markup::kXml}};
  return names;
}

std::string to_string(Markup value) { return name_of(markup_names(), value); }

Frame read_markup(std::string_view line, Markup markup) {
  if (markup == Markup::kNone) return Frame{std::string(line)};
  try {
    return Reader(line, markup).read();
  } catch (const Malformed& error) {
    Frame plain{std::string(line)};
    plain.problem = error.what();
    return plain;
  }
}

}  // namespace nmt
