#include "text/frame.h"

#include <unicode/uchar.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "text/special_tokens.h"
#include "text/utf8.h"

namespace nmt {
namespace {

bool is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

bool is_word_character(char32_t c) {
  const auto type = static_cast<UCharCategory>(u_charType(static_cast<UChar32>(c)));
  return u_isalnum(static_cast<UChar32>(c)) || c == '_' || type == U_NON_SPACING_MARK ||
         type == U_COMBINING_SPACING_MARK || type == U_ENCLOSING_MARK;
}

// Punctuation that follows a word without a space: "." "," ")" "»" ...
bool closes(char32_t c) {
  const auto type = static_cast<UCharCategory>(u_charType(static_cast<UChar32>(c)));
  return type == U_END_PUNCTUATION || type == U_FINAL_PUNCTUATION || type == U_OTHER_PUNCTUATION;
}

// The length of the placeholder token (text/special_tokens.h: "｟3｠") at `at`, or 0; its number in
// *number.
size_t token_length(std::string_view text, size_t at, int* number = nullptr) {
  constexpr std::string_view open = kPlaceholderOpen, close = kPlaceholderClose;
  if (text.compare(at, open.size(), open) != 0) return 0;
  size_t end = at + open.size();
  int value = 0;
  while (end < text.size() && end - at < open.size() + 3 && text[end] >= '0' && text[end] <= '9') {
    value = value * 10 + (text[end++] - '0');
  }
  if (end == at + open.size() || text.compare(end, close.size(), close) != 0) return 0;
  if (number != nullptr) *number = value;
  return end + close.size() - at;
}

// The target's words: runs of letters, digits and marks, and every other character but white
// space alone. Tags go around whole words.
std::vector<ByteSpan> words_of(std::string_view text) {
  std::vector<ByteSpan> words;
  bool in_word = false;
  for (size_t position = 0; position < text.size();) {
    const size_t start = position;
    if (const size_t length = token_length(text, start); length > 0) {
      words.push_back({start, start + length});
      position += length;
      in_word = false;
      continue;
    }
    const char32_t c = next_code_point(text, position);
    if (c < 0x80 && is_space(static_cast<unsigned char>(c))) {
      in_word = false;
    } else if (is_word_character(c)) {
      if (in_word) {
        words.back().end = position;
      } else {
        words.push_back({start, position});
      }
      in_word = true;
    } else if (!u_isUWhiteSpace(static_cast<UChar32>(c))) {
      words.push_back({start, position});
      in_word = false;
    } else {
      in_word = false;
    }
  }
  return words;
}

// A piece's bytes without the white space it took along ("▁Haus" stands for " Haus").
ByteSpan core_of(const std::string& text, ByteSpan span) {
  while (span.begin < span.end && is_space(static_cast<unsigned char>(text[span.begin]))) ++span.begin;
  while (span.end > span.begin && is_space(static_cast<unsigned char>(text[span.end - 1]))) --span.end;
  return span;
}

std::string escaped(std::string_view text, const Frame& frame) {
  if (!frame.markup) return std::string(text);
  std::string out;
  for (size_t i = 0; i < text.size();) {
    bool named = false;
    for (const auto& [character, entity] : frame.entities) {
      if (text.compare(i, character.size(), character) == 0) {
        out += entity;
        i += character.size();
        named = true;
        break;
      }
    }
    if (named) continue;
    const char c = text[i++];
    if (c == '&') {
      out += "&amp;";
    } else if (c == '<') {
      out += "&lt;";
    } else if (c == '>') {
      out += "&gt;";
    } else {
      out += c;
    }
  }
  return out;
}

// Where each item goes in the target, and the text that results.
class Placer {
 public:
  Placer(const Frame& frame, std::string_view target, const std::vector<ByteSpan>& target_tokens,
         const std::vector<ByteSpan>& source_pieces, const TokenAlignment& alignment)
      : frame_(frame), target_(target), words_(words_of(target)), alignment_(alignment) {
    for (const ByteSpan& piece : source_pieces) pieces_.push_back(core_of(frame.text, piece));
    // The source pieces each target word's tokens attend to most.
    word_sources_.resize(words_.size());
    for (size_t t = 0; t < target_tokens.size(); ++t) {
      const int source = t < alignment.source_of_target.size() ? alignment.source_of_target[t] : -1;
      if (source < 0 || source >= static_cast<int>(pieces_.size())) continue;
      const ByteSpan token = target_tokens[t];
      for (size_t w = word_at(token.begin); w < words_.size() && words_[w].begin < token.end; ++w) {
        word_sources_[w].push_back(source);
      }
    }
    for (const ByteSpan& token : target_tokens) token_word_.push_back(word_at(token.begin));
    piece_words_.resize(pieces_.size());
    for (size_t w = 0; w < words_.size(); ++w) {
      for (const int source : word_sources_[w]) {
        auto& words = piece_words_[static_cast<size_t>(source)];
        if (words.empty() || words.back() != w) words.push_back(w);
      }
    }
    for (size_t q = 0; q < pieces_.size(); ++q) {
      if (pieces_[q].begin < pieces_[q].end) shown_.push_back(q);
    }
    // The protected spans the model was given as placeholder tokens, and those it gave back.
    for (size_t i = 0; i < frame.items.size(); ++i) {
      if (frame.items[i].token > 0) token_items_.emplace(frame.items[i].token, i);
    }
    // A frame without any has no tokens to replace: text that looks like one is text.
    tokens_ = !token_items_.empty();
    for (size_t at = 0; tokens_ && at < target_.size(); ++at) {
      int number = 0;
      if (token_length(target_, at, &number) > 0) emitted_.insert(number);
    }
    children_.resize(frame.items.size() + 1);  // the last: the line's top level
    for (size_t i = 0; i < frame.items.size(); ++i) {
      const int parent = frame.items[i].parent;
      children_[parent < 0 ? frame.items.size() : static_cast<size_t>(parent)].push_back(i);
    }
  }

  std::string text() {
    render(children_.back(), 0, words_.size());
    std::string out;
    size_t copied = 0;
    for (const auto& [offset, markup] : inserts_) {
      append_target(out, copied, offset);
      out += markup;
      copied = offset;
    }
    append_target(out, copied, target_.size());
    return out;
  }

 private:
  // The target's bytes [from, to), escaped, with each placeholder token the model gave back
  // replaced by its span the first time it comes, and dropped (with a space beside it) after that
  // or when it stands for nothing.
  void append_target(std::string& out, size_t from, size_t to) {
    if (!tokens_) {
      out += escaped(target_.substr(from, to - from), frame_);
      return;
    }
    size_t copied = from;
    for (size_t at = from; at < to;) {
      int number = 0;
      const size_t length = token_length(target_, at, &number);
      if (length == 0) {
        ++at;  // the token's first byte never continues a character
        continue;
      }
      out += escaped(target_.substr(copied, at - copied), frame_);
      at += length;
      copied = at;
      const auto item = token_items_.find(number);
      if (item != token_items_.end()) {
        out += escaped(frame_.items[item->second].open, frame_);
        token_items_.erase(item);
        continue;
      }
      // Dropped, with the space before it when a space, punctuation or the end follows.
      size_t next = at;
      if (!out.empty() && out.back() == ' ' &&
          (at == target_.size() || is_space(static_cast<unsigned char>(target_[at])) ||
           closes(next_code_point(target_, next)))) {
        out.pop_back();
      } else if (out.empty() && at < to && target_[at] == ' ') {
        copied = ++at;
      }
    }
    out += escaped(target_.substr(copied, to - copied), frame_);
  }

  // The first word that ends after `offset` (words_.size() when none does).
  size_t word_at(size_t offset) const {
    return static_cast<size_t>(
        std::upper_bound(words_.begin(), words_.end(), offset, [](size_t o, const ByteSpan& w) { return o < w.end; }) -
        words_.begin());
  }

  // The target words [first, last) tied to the source text [begin, end): from the first to the
  // last word that attends to a piece inside it; first == last when none does.
  std::pair<size_t, size_t> words_within(size_t begin, size_t end) const {
    size_t first = words_.size(), last = 0;
    // Pieces are in text order: those within start at the first that ends after `begin`.
    auto q = std::lower_bound(shown_.begin(), shown_.end(), begin,
                              [&](size_t piece, size_t offset) { return pieces_[piece].end <= offset; });
    for (; q != shown_.end() && pieces_[*q].begin < end; ++q) {
      for (const size_t w : piece_words_[*q]) {
        first = std::min(first, w);
        last = std::max(last, w + 1);
      }
    }
    if (first >= last) return {boundary_at(begin), boundary_at(begin)};
    return {first, last};
  }

  // The place between target words (0 .. words) of the source place `offset`: before the word
  // that attends most to the source piece after it; the start and the end stay the start and
  // the end.
  size_t boundary_at(size_t offset) const {
    const auto after = std::lower_bound(shown_.begin(), shown_.end(), offset,
                                        [&](size_t piece, size_t o) { return pieces_[piece].begin < o; });
    if (words_.empty() || after == shown_.end()) return words_.size();
    if (after == shown_.begin()) return 0;
    const size_t next = *after;
    const int token = next < alignment_.target_of_source.size() ? alignment_.target_of_source[next] : -1;
    if (token < 0) return std::min(words_.size(), next * words_.size() / pieces_.size());
    return static_cast<size_t>(token) < token_word_.size() ? token_word_[static_cast<size_t>(token)] : words_.size();
  }

  size_t begin_offset(size_t word) const { return word < words_.size() ? words_[word].begin : target_.size(); }
  size_t end_offset(size_t word) const { return word > 0 ? words_[word - 1].end : 0; }

  void insert(size_t offset, std::string markup) {
    if (!inserts_.empty()) offset = std::max(offset, inserts_.back().first);  // in the order rendered
    inserts_.emplace_back(offset, std::move(markup));
  }

  // A point at word boundary `at`: glued to the word before when it was glued to the text before,
  // else before the next word; with a space where it had one and the target has none.
  void insert_point(const FrameItem& item, size_t at) {
    std::string markup = item.text ? escaped(item.open, frame_) : item.open;
    const bool after_word = !item.space_before && at > 0;
    const size_t offset = at == 0 ? 0 : after_word ? end_offset(at) : begin_offset(at);
    const size_t last = inserts_.empty() ? 0 : inserts_.back().first;
    const size_t placed = std::max(offset, last);
    if (item.space_before && placed > 0 && !is_space(static_cast<unsigned char>(target_[placed - 1]))) {
      markup = " " + markup;
    }
    if (item.space_after && placed < target_.size() && !is_space(static_cast<unsigned char>(target_[placed]))) {
      size_t position = placed;
      if (!closes(next_code_point(target_, position))) markup += " ";
    }
    insert(offset, std::move(markup));
  }

  // Items `items` (siblings) within the target words [first, last).
  void render(const std::vector<size_t>& items, size_t first, size_t last) {
    struct Placed {
      size_t item, begin, end;
    };
    std::vector<Placed> placed;
    for (const size_t i : items) {
      const FrameItem& item = frame_.items[i];
      const auto [begin, end] = item.kind == FrameItem::Kind::kElement && item.begin < item.end
                                    ? words_within(item.begin, item.end)
                                    : std::pair{boundary_at(item.begin), boundary_at(item.begin)};
      placed.push_back({i, begin, end});
    }
    std::stable_sort(placed.begin(), placed.end(), [&](const Placed& a, const Placed& b) {
      if (a.begin != b.begin) return a.begin < b.begin;
      return frame_.items[a.item].origin < frame_.items[b.item].origin;
    });
    size_t cursor = first;
    for (const Placed& p : placed) {
      const FrameItem& item = frame_.items[p.item];
      const size_t begin = std::clamp(p.begin, cursor, last);
      if (item.kind == FrameItem::Kind::kPoint) {
        if (item.token > 0 && emitted_.count(item.token) > 0) continue;  // where the model put its token
        insert_point(item, begin);
        render(children_[p.item], begin, begin);
        cursor = begin;
        continue;
      }
      const size_t end = std::clamp(p.end, begin, last);
      insert(begin_offset(begin), item.open);  // an element without words: at its place, empty
      render(children_[p.item], begin, end);
      insert(begin < end ? end_offset(end) : begin_offset(begin), item.close);
      cursor = end;
    }
  }

  const Frame& frame_;
  std::string_view target_;
  std::vector<ByteSpan> words_;
  const TokenAlignment& alignment_;
  std::vector<ByteSpan> pieces_;                  // source pieces without their white space
  std::vector<std::vector<int>> word_sources_;    // per target word
  std::vector<std::vector<size_t>> piece_words_;  // per source piece: the target words tied to it
  std::vector<size_t> shown_;                     // the source pieces with text, in text order
  std::vector<size_t> token_word_;                // per target token: its first word
  std::vector<std::vector<size_t>> children_;     // per item, and the top level last
  std::vector<std::pair<size_t, std::string>> inserts_;
  std::map<int, size_t> token_items_;  // placeholder token number -> item, until it is put back
  std::set<int> emitted_;              // the placeholder tokens the target holds
  bool tokens_ = false;                // whether the frame gave the model any
};

}  // namespace

size_t take_out(Frame& frame, const std::vector<TextSpan>& spans, int tokens) {
  const std::string& line = frame.text;
  // Where items are: a span with one strictly inside is not contiguous text.
  std::vector<size_t> marks;
  for (const FrameItem& item : frame.items) {
    marks.push_back(item.begin);
    marks.push_back(item.end);
  }
  std::sort(marks.begin(), marks.end());
  // The elements, outer first at one place, for the innermost around each span.
  std::vector<size_t> elements;
  for (size_t i = 0; i < frame.items.size(); ++i) {
    if (frame.items[i].kind == FrameItem::Kind::kElement) elements.push_back(i);
  }
  std::stable_sort(elements.begin(), elements.end(), [&](size_t a, size_t b) {
    const FrameItem &x = frame.items[a], &y = frame.items[b];
    return x.begin != y.begin ? x.begin < y.begin : x.end > y.end;
  });
  size_t next_element = 0;
  std::vector<size_t> open;  // elements around the place reached, innermost last

  // The text rebuilt without the spans: its pieces kept [from, from + length) of the old text at
  // `at` in the new one.
  struct Kept {
    size_t from, at, length;
  };
  std::vector<Kept> kept;
  std::string out;
  std::vector<FrameItem> points;
  size_t cursor = 0;
  for (const TextSpan& span : spans) {
    const size_t begin = span.begin, end = span.end;
    if (begin < cursor || end <= begin || end > line.size()) continue;
    const auto inside = std::upper_bound(marks.begin(), marks.end(), begin);
    if (inside != marks.end() && *inside < end) continue;
    kept.push_back({cursor, out.size(), begin - cursor});
    out.append(line, cursor, begin - cursor);
    const bool space_before = out.empty() || is_space(static_cast<unsigned char>(out.back()));
    const bool space_after = end == line.size() || is_space(static_cast<unsigned char>(line[end]));
    size_t after = end;
    const bool word_after = end < line.size() && is_word_character(next_code_point(line, after));
    FrameItem item;
    item.kind = FrameItem::Kind::kPoint;
    item.open = line.substr(begin, end - begin);
    item.text = true;
    item.what = span.what;
    item.origin = 2 * begin + 1;
    item.space_before = space_before && !out.empty();
    item.space_after = end < line.size() && !word_after;
    cursor = end;
    if (static_cast<int>(points.size()) < tokens) {
      // In its place, a placeholder token for the model to copy.
      item.token = static_cast<int>(points.size()) + 1;
      item.begin = out.size();
      out += placeholder_token(item.token);
      item.end = out.size();
    } else if (space_before && space_after) {
      // Its white space: one space kept where it stood between spaces (or at either end), one
      // made where it stood between two other characters.
      if (end < line.size()) {
        cursor = end + 1;
      } else if (!out.empty()) {
        out.pop_back();
        --kept.back().length;
      }
    }
    if (item.token == 0) {
      item.begin = item.end = out.size();
      if (!space_before && !space_after) out += ' ';
    }
    // The innermost element around it.
    while (next_element < elements.size() && frame.items[elements[next_element]].begin <= begin) {
      open.push_back(elements[next_element++]);
    }
    // Elements nest, so those that ended before the span are above those still around it.
    while (!open.empty() && frame.items[open.back()].end < end) open.pop_back();
    item.parent = open.empty() ? -1 : static_cast<int>(open.back());
    points.push_back(std::move(item));
  }
  if (points.empty()) return 0;
  kept.push_back({cursor, out.size(), line.size() - cursor});
  out.append(line, cursor, line.size() - cursor);
  const auto moved = [&](size_t offset) {
    auto piece = std::upper_bound(kept.begin(), kept.end(), offset, [](size_t o, const Kept& k) { return o < k.from; });
    --piece;  // the first starts at 0
    return piece->at + std::min(offset - piece->from, piece->length);
  };
  for (FrameItem& item : frame.items) {
    item.begin = moved(item.begin);
    item.end = moved(item.end);
  }
  frame.text = std::move(out);
  const size_t taken = points.size();
  for (FrameItem& point : points) frame.items.push_back(std::move(point));
  return taken;
}

std::string place_frame(const Frame& frame, std::string_view target, const std::vector<ByteSpan>& target_tokens,
                        const std::vector<ByteSpan>& source_pieces, const TokenAlignment& alignment) {
  return Placer(frame, target, target_tokens, source_pieces, alignment).text();
}

}  // namespace nmt
