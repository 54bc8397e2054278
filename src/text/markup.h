// Inline HTML and XML markup read out of a line (text/frame.h): tags become elements around the
// text they enclose or points where they stand, entities become the characters they name, and
// what is not to be translated (comments, <script>, <style>, CDATA, elements marked
// translate="no") becomes a point, byte for byte.
//
// HTML is read as browsers read inline markup: end tags match start tags without regard to case,
// void elements (<br>, <img ...>) need no end tag, and a "<" or "&" that starts no tag or entity
// is text. XML is strict: a stray "<" or "&" is malformed. Malformed markup (an unclosed or
// crossed tag, an unknown entity, elements nested deeper than 512) gives a Frame whose text is
// the line as it is and whose problem says why.
#pragma once

#include <string>
#include <string_view>

#include "text/frame.h"
#include "util/enum_names.h"

namespace nmt {

enum class Markup { kNone, kHtml, kXml };

const EnumNames<Markup>& markup_names();  // none, html, xml
std::string to_string(Markup value);

// `line` with its markup taken out; with Markup::kNone, the line as plain text.
Frame read_markup(std::string_view line, Markup markup);

}  // namespace nmt
