// What a line holds besides the text the model translates: inline markup (text/markup.h) and
// protected spans (text/protect.h), taken out before translation and put back around and between
// the target words that the attention ties to the source words they were around or between, in
// the manner of Bergamot's HTML translation.
//
// Placement keeps the markup well-formed whatever the alignment: an element's target words are
// clipped to its parent's and kept apart from its siblings', so every tag opened is closed in
// nesting order, and every item comes back exactly once.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "text/vocabulary.h"

namespace nmt {

struct FrameItem {
  enum class Kind {
    kElement,  // a start tag and its end tag, around text
    kPoint,    // something at one place: an empty element, a comment, a protected span
  };
  Kind kind = Kind::kPoint;
  std::string open;   // an element's start tag, or a point's text, as written (byte for byte)
  std::string close;  // an element's end tag as written
  // An element's content in Frame::text; a point: where it was, begin == end.
  size_t begin = 0;
  size_t end = 0;
  // Its place in the text when it was read (twice the offset, plus one for a protected span,
  // which follows markup at its start): with the item's index, the order of items at one place.
  size_t origin = 0;
  int parent = -1;  // the innermost element around it (an index into Frame::items), or -1
  // A point that is text (a protected span), escaped as text when markup goes back; else markup.
  bool text = false;
  // A point: whether white space separated it from the text before it, and whether anything but
  // a letter or digit (white space, punctuation) followed it.
  bool space_before = false;
  bool space_after = false;
  std::string what;  // what it is, for messages and tests: "b", "br", "comment", "url", "number", ...
  // A protected span the model is given as placeholder token number `token` (text/special_tokens.h;
  // [begin, end) is the token in Frame::text) to copy: it goes where the token comes out, or by
  // the attention when the token does not. 0: taken out of the text.
  int token = 0;
};

struct Frame {
  std::string text;  // what the model translates
  std::vector<FrameItem> items;
  bool markup = false;  // the text goes back into markup: & < > escaped (markup.h, escape_text)
  // Characters that came as named entities ("\u00a0" from "&nbsp;"): written back as them.
  std::vector<std::pair<std::string, std::string>> entities;
  std::string problem;  // why the line's markup was read as text ("" when it was not)

  // Whether translating the text is all there is to it.
  bool plain() const { return items.empty() && !markup; }
};

// A span of Frame::text to take out, and what it is ("url", "number", ...).
struct TextSpan {
  size_t begin = 0;
  size_t end = 0;
  std::string what;
};

// Takes `spans` (in text order, none overlapping) out of frame.text as point items that are text:
// the first `tokens` each replaced by a placeholder token, ｟1｠, ｟2｠, ... (FrameItem::token), the
// others each with the white space around it: one space kept when it stood between spaces (or at
// either end), one made when it stood between two other characters. A span that an item's start
// or end falls inside is left in the text. Returns how many were taken.
size_t take_out(Frame& frame, const std::vector<TextSpan>& spans, int tokens = 0);

// How a translation's tokens tie to the source's: for each target token, the source piece it
// attends to most (or -1); for each source piece, the target token that attends to it most (or -1).
struct TokenAlignment {
  std::vector<int> source_of_target;
  std::vector<int> target_of_source;
};

// The translation `target` (a detokenized text whose tokens came from `target_tokens`, its bytes)
// with `frame`'s items put back; `source_pieces`: the bytes of frame.text each source piece came
// from. A placeholder token in `target` becomes its span the first time it comes and is dropped
// after that, or when the frame has no such span.
std::string place_frame(const Frame& frame, std::string_view target, const std::vector<ByteSpan>& target_tokens,
                        const std::vector<ByteSpan>& source_pieces, const TokenAlignment& alignment);

}  // namespace nmt
