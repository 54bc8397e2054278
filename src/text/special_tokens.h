// The special token ids, in one place. Every vocabulary the project trains uses these ids
// (they are passed to sentencepiece's trainer), so model code may rely on them.
#pragma once

#include <cstdint>

namespace nmt {

constexpr int64_t kPadId = 0;
constexpr int64_t kUnkId = 1;
constexpr int64_t kBosId = 2;
constexpr int64_t kEosId = 3;

}  // namespace nmt
