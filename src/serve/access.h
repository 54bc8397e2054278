// Who may use nmt serve: API keys (--api-key-file) and the browser origins granted CORS
// (--allow-origin). Without keys anyone who reaches the port may translate; without origins no
// page on another site may read an answer.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "serve/http_server.h"

namespace nmt::serve {

class ApiKeys {
 public:
  ApiKeys() = default;  // none: every request is let in
  // The keys of `path`: one a line, at least 16 printable characters without spaces; blank lines
  // and lines beginning with '#' are skipped. The file is checked like a rendezvous secret
  // (util/private_file.h). Throws std::invalid_argument naming the file and the line.
  static ApiKeys from_file(const std::string& path);

  bool empty() const { return digests_.empty(); }
  size_t size() const { return digests_.size(); }
  // Whether `authorization` (an Authorization header: "Bearer KEY") carries one of the keys. The
  // digests of all of them are compared in constant time, so that the time an answer takes tells
  // nothing of how much of a key was right, nor which key matched.
  bool admits(std::string_view authorization) const;

 private:
  std::vector<std::array<uint8_t, 32>> digests_;  // SHA-256 of each key
};

// The 401 for a request without a key (`authorization` empty) or with a wrong one.
HttpAnswer unauthorized(std::string_view authorization);

// The origins a browser page may call from: "https://example.org" (scheme, host and port as a
// browser sends them in Origin), or "*" for any.
class AllowedOrigins {
 public:
  // Throws std::invalid_argument for an entry that is not "*" nor scheme://host[:port].
  explicit AllowedOrigins(std::vector<std::string> origins = {});

  bool allows(std::string_view origin) const;
  // The CORS fields for an answer to a request from `origin` (none when it is not allowed).
  std::vector<std::pair<std::string, std::string>> answer_headers(std::string_view origin) const;
  // The answer to a browser's preflight (OPTIONS with an Origin) for a path that takes `method`:
  // 204 with what it allows when the origin is allowed, else 403.
  HttpAnswer preflight(std::string_view origin, const std::string& method) const;

 private:
  std::vector<std::string> origins_;  // lowercased
  bool any_ = false;
};

}  // namespace nmt::serve
