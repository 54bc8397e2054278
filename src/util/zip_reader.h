// A zip file held in memory, checked whole before any entry is read: what the converter of older
// checkpoints (inference/legacy_checkpoint.h) reads LibTorch archives with. The checks are bounded
// by the file: every entry is read once, stored entries lie in the file in order without sharing a
// byte, and inflation (allowed only where the caller allows it) stops at a small budget.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace nmt {

struct ZipEntry {
  std::string name;
  uint64_t data = 0;        // where its bytes begin in the file
  uint64_t compressed = 0;  // how many bytes it takes in the file
  uint64_t size = 0;        // how many it holds
  bool deflated = false;
};

struct ZipLimits {
  // Entries that may be deflated (LibTorch deflates its code records); any other compressed entry
  // is refused.
  std::function<bool(const std::string& name)> may_deflate;
  uint64_t max_inflated_entry = uint64_t{1} << 20;   // bytes, for one deflated entry
  uint64_t max_inflated_total = uint64_t{16} << 20;  // bytes, for all of them together
};

// Checks the zip file `bytes` and lists its entries in file order. Throws std::runtime_error
// saying what is wrong: no directory, a record outside the file, two entries of one name, entries
// that overlap or lie out of order, a local header that disagrees with the directory, encryption,
// a compression not allowed, an inflated size over the limits, a checksum mismatch. Zip64 included.
std::vector<ZipEntry> read_zip_directory(const std::string& bytes, const ZipLimits& limits);

// The bytes an entry of `bytes` holds (inflated when deflated; read_zip_directory checked it).
std::string zip_entry_bytes(const std::string& bytes, const ZipEntry& entry);

}  // namespace nmt
