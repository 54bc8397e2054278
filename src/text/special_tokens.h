// The special token ids, in one place. Every vocabulary the project trains uses these ids
// (they are passed to sentencepiece's trainer), so model code may rely on them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace nmt {

constexpr int64_t kPadId = 0;
constexpr int64_t kUnkId = 1;
constexpr int64_t kBosId = 2;
constexpr int64_t kEosId = 3;

// Placeholder tokens: a vocabulary trained with placeholder-share holds ｟1｠ ... ｟8｠ as pieces of
// their own, and training pairs with a span masked as one of them on both sides teach the model to
// copy it, so that translate can give it a protected span to place (text/protect.h).
constexpr int kPlaceholderTokens = 8;
constexpr std::string_view kPlaceholderOpen = "\uFF5F", kPlaceholderClose = "\uFF60";  // ｟ ｠
inline std::string placeholder_token(int number) {
  return std::string(kPlaceholderOpen) + std::to_string(number) + std::string(kPlaceholderClose);
}

}  // namespace nmt
