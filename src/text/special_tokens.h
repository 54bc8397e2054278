// The special token ids, in one place. Every vocabulary the project trains uses these ids
// (they are passed to sentencepiece's trainer), so model code may rely on them.
#pragma once

#include <cstdint>
#include <string>

namespace nmt {

constexpr int64_t kPadId = 0;
constexpr int64_t kUnkId = 1;
constexpr int64_t kBosId = 2;
constexpr int64_t kEosId = 3;

// Placeholder tokens: a vocabulary trained with placeholder-share holds ｟1｠ ... ｟8｠ as pieces of
// their own, and training pairs with a span masked as one of them on both sides teach the model to
// copy it, so that translate can give it a protected span to place (text/protect.h).
constexpr int kPlaceholderTokens = 8;
inline std::string placeholder_token(int number) { return "\uFF5F" + std::to_string(number) + "\uFF60"; }

}  // namespace nmt
