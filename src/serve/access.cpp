#include "serve/access.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <algorithm>
#include <cctype>
#include <stdexcept>

#include "util/private_file.h"

namespace nmt::serve {

namespace {

constexpr size_t kMinimumKeyLength = 16;
constexpr size_t kKeyFileBytes = 1 << 20;

std::array<uint8_t, 32> sha256(std::string_view text) {
  std::array<uint8_t, 32> digest{};
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest.data());
  return digest;
}

std::string lowercase(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  return lower;
}

std::string_view trimmed(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r')) text.remove_suffix(1);
  return text;
}

// The token of "Bearer TOKEN" (the scheme in any case), or nullopt.
std::optional<std::string_view> bearer_token(std::string_view authorization) {
  authorization = trimmed(authorization);
  constexpr std::string_view kScheme = "bearer ";
  if (authorization.size() <= kScheme.size() || lowercase(authorization.substr(0, kScheme.size())) != kScheme) {
    return std::nullopt;
  }
  return trimmed(authorization.substr(kScheme.size()));
}

}  // namespace

ApiKeys ApiKeys::from_file(const std::string& path) {
  const std::string source = "--api-key-file " + path;
  const std::string text = read_private_file(path, source, kKeyFileBytes + 1);
  if (text.size() > kKeyFileBytes) throw std::invalid_argument(source + ": over 1 MiB; give one key a line");
  ApiKeys keys;
  size_t line_number = 0;
  for (size_t start = 0; start < text.size();) {
    const size_t end = std::min(text.find('\n', start), text.size());
    const std::string_view line = trimmed(std::string_view(text).substr(start, end - start));
    start = end + 1;
    ++line_number;
    if (line.empty() || line.front() == '#') continue;
    const std::string where = source + " line " + std::to_string(line_number);
    if (line.size() < kMinimumKeyLength) {
      throw std::invalid_argument(where + ": a key of " + std::to_string(line.size()) +
                                  " characters; give at least 16 (openssl rand -hex 32 makes one)");
    }
    if (!std::all_of(line.begin(), line.end(), [](unsigned char c) { return c > 0x20 && c < 0x7f; })) {
      throw std::invalid_argument(where + ": a key holds a space or a character other than printable ASCII");
    }
    keys.digests_.push_back(sha256(line));
  }
  if (keys.digests_.empty()) {
    throw std::invalid_argument(source + ": holds no key; write one a line (openssl rand -hex 32 makes one)");
  }
  return keys;
}

bool ApiKeys::admits(std::string_view authorization) const {
  if (digests_.empty()) return true;
  const std::optional<std::string_view> token = bearer_token(authorization);
  if (!token || token->empty()) return false;
  // Digests of equal length, every one compared: the time depends on neither the key nor the token.
  const std::array<uint8_t, 32> digest = sha256(*token);
  int matched = 0;
  for (const auto& key : digests_) matched |= CRYPTO_memcmp(key.data(), digest.data(), digest.size()) == 0;
  return matched != 0;
}

HttpAnswer unauthorized(std::string_view authorization) {
  const bool sent = !trimmed(authorization).empty();
  HttpAnswer answer{401, "application/json",
                    error_body(sent ? "the API key is not one of this server's (Authorization: Bearer KEY)"
                                    : "this server needs an API key: send the header Authorization: Bearer KEY")};
  answer.headers.emplace_back(
      "WWW-Authenticate", sent ? "Bearer realm=\"nmt serve\", error=\"invalid_token\"" : "Bearer realm=\"nmt serve\"");
  return answer;
}

AllowedOrigins::AllowedOrigins(std::vector<std::string> origins) {
  for (std::string& origin : origins) {
    if (origin == "*") {
      any_ = true;
      continue;
    }
    const std::string lower = lowercase(origin);
    const size_t scheme_end = lower.find("://");
    const bool web_scheme = scheme_end != std::string::npos &&
                            (lower.compare(0, scheme_end, "http") == 0 || lower.compare(0, scheme_end, "https") == 0);
    const std::string host = web_scheme ? lower.substr(scheme_end + 3) : "";
    if (!web_scheme || host.empty() || host.find_first_of("/?#@ ") != std::string::npos) {
      throw std::invalid_argument("--allow-origin " + origin +
                                  ": give an origin as a browser sends it, like https://example.org or "
                                  "http://localhost:3000 (no path, no trailing slash), or *");
    }
    origins_.push_back(lower);
  }
}

bool AllowedOrigins::allows(std::string_view origin) const {
  if (origin.empty()) return false;
  if (any_) return true;
  const std::string lower = lowercase(origin);
  return std::find(origins_.begin(), origins_.end(), lower) != origins_.end();
}

std::vector<std::pair<std::string, std::string>> AllowedOrigins::answer_headers(std::string_view origin) const {
  if (!allows(origin)) return {};
  // The origin itself rather than "*", and Vary, so that a cache between never hands one origin's
  // answer to another.
  return {{"Access-Control-Allow-Origin", std::string(origin)}, {"Vary", "Origin"}};
}

HttpAnswer AllowedOrigins::preflight(std::string_view origin, const std::string& method) const {
  if (!allows(origin)) {
    return {403, "application/json",
            error_body("the origin " + printable(origin) +
                       " may not call this server from a page: start it with --allow-origin ORIGIN to let it")};
  }
  HttpAnswer answer{204, "application/json", ""};
  answer.headers = answer_headers(origin);
  answer.headers.emplace_back("Access-Control-Allow-Methods", method);
  answer.headers.emplace_back("Access-Control-Allow-Headers", "Content-Type, Authorization");
  answer.headers.emplace_back("Access-Control-Max-Age", "600");
  return answer;
}

}  // namespace nmt::serve
