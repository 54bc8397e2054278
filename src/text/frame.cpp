#include "text/frame.h"

#include <unicode/uchar.h>

#include <algorithm>
#include <functional>

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

// The target's words: runs of letters, digits and marks, and every other character but white
// space alone. Tags go around whole words.
std::vector<ByteSpan> words_of(std::string_view text) {
  std::vector<ByteSpan> words;
  bool in_word = false;
  for (size_t position = 0; position < text.size();) {
    const size_t start = position;
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
      out += escaped(target_.substr(copied, offset - copied), frame_);
      out += markup;
      copied = offset;
    }
    out += escaped(target_.substr(copied), frame_);
    return out;
  }

 private:
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
};

}  // namespace

bool take_out(Frame& frame, size_t begin, size_t end, bool text, const std::string& what) {
  for (const FrameItem& item : frame.items) {
    const bool starts_inside = begin < item.begin && item.begin < end;
    const bool ends_inside = begin < item.end && item.end < end;
    if (starts_inside || ends_inside) return false;
  }
  std::string& line = frame.text;
  const bool space_before = begin == 0 || is_space(static_cast<unsigned char>(line[begin - 1]));
  const bool space_after = end == line.size() || is_space(static_cast<unsigned char>(line[end]));
  // Kept apart from the word after it when white space or punctuation followed it ("%s.").
  size_t after = end;
  const bool word_after = end < line.size() && is_word_character(next_code_point(line, after));
  FrameItem item;
  item.kind = FrameItem::Kind::kPoint;
  item.open = line.substr(begin, end - begin);
  item.text = text;
  item.what = what;
  item.origin = 2 * begin + 1;
  item.space_before = space_before && begin > 0;
  item.space_after = end < line.size() && !word_after;
  size_t size = 0;  // the innermost element around it
  for (size_t i = 0; i < frame.items.size(); ++i) {
    const FrameItem& outer = frame.items[i];
    if (outer.kind != FrameItem::Kind::kElement || outer.begin > begin || end > outer.end) continue;
    if (item.parent < 0 || outer.end - outer.begin <= size) {
      item.parent = static_cast<int>(i);
      size = outer.end - outer.begin;
    }
  }
  size_t from = begin, to = end;
  std::string replacement;
  if (space_before && space_after) {
    if (end < line.size()) {
      to = end + 1;
    } else if (begin > 0) {
      from = begin - 1;
    }
  } else if (!space_before && !space_after) {
    replacement = " ";
  }
  line.replace(from, to - from, replacement);
  const auto moved = [&](size_t offset) {
    if (offset <= from) return offset;
    if (offset >= to) return offset - (to - from) + replacement.size();
    return from;
  };
  for (FrameItem& other : frame.items) {
    other.begin = moved(other.begin);
    other.end = moved(other.end);
  }
  item.begin = item.end = from;
  frame.items.push_back(std::move(item));
  return true;
}

std::string place_frame(const Frame& frame, std::string_view target, const std::vector<ByteSpan>& target_tokens,
                        const std::vector<ByteSpan>& source_pieces, const TokenAlignment& alignment) {
  return Placer(frame, target, target_tokens, source_pieces, alignment).text();
}

}  // namespace nmt
