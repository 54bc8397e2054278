#include "util/zip_reader.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <stdexcept>

#include "util/format.h"

namespace nmt {
namespace {

// The zip format's little-endian fields (PKWARE APPNOTE 6.3), read bounds-checked.
class Bytes {
 public:
  explicit Bytes(const std::string& bytes)
      : data_(reinterpret_cast<const unsigned char*>(bytes.data())), size_(bytes.size()) {}
  uint64_t size() const { return size_; }
  const unsigned char* at(uint64_t offset, uint64_t count) const {
    if (offset > size_ || count > size_ - offset)
      throw std::runtime_error("a zip record runs past the end of the file");
    return data_ + offset;
  }
  uint64_t read(uint64_t offset, int width) const {
    const unsigned char* p = at(offset, static_cast<uint64_t>(width));
    uint64_t value = 0;
    for (int i = width - 1; i >= 0; --i) value = value << 8 | p[i];
    return value;
  }

 private:
  const unsigned char* data_;
  uint64_t size_;
};

constexpr uint32_t kEndOfDirectory = 0x06054b50, kZip64EndOfDirectory = 0x06064b50, kZip64Locator = 0x07064b50;
constexpr uint32_t kDirectoryEntry = 0x02014b50, kLocalHeader = 0x04034b50;
constexpr uint64_t kDirectoryEntrySize = 46, kLocalHeaderSize = 30;

uint32_t checksum(uint32_t crc, const unsigned char* bytes, uint64_t size) {
  for (uint64_t done = 0; done < size;) {  // zlib takes at most 4 GB a call
    const auto chunk = static_cast<uInt>(std::min<uint64_t>(size - done, uint64_t{1} << 30));
    crc = static_cast<uint32_t>(crc32(crc, bytes + done, chunk));
    done += chunk;
  }
  return crc;
}

// Inflates exactly `size` bytes from `compressed` ones, never producing more.
std::string inflate_entry(const unsigned char* bytes, uint64_t compressed, uint64_t size, const std::string& name) {
  std::string out(size, '\0');
  z_stream stream{};
  if (inflateInit2(&stream, -MAX_WBITS) != Z_OK) throw std::runtime_error("zlib cannot start");
  stream.next_in = const_cast<unsigned char*>(bytes);
  stream.avail_in = static_cast<uInt>(compressed);  // at most the entry limit, far below 4 GB
  stream.next_out = reinterpret_cast<unsigned char*>(out.data());
  stream.avail_out = static_cast<uInt>(size);
  const int result = inflate(&stream, Z_FINISH);
  const bool whole = result == Z_STREAM_END && stream.total_out == size;
  inflateEnd(&stream);
  if (!whole) throw std::runtime_error("entry " + format_excerpt(name) + " does not inflate to its stated size");
  return out;
}

struct EndOfDirectory {
  uint64_t entries, offset, size;
};

EndOfDirectory find_directory(const Bytes& file) {
  // The end-of-directory record: in the last 22 + 65535 bytes (after it, at most a comment).
  if (file.size() < 22) throw std::runtime_error("too short for a zip file");
  uint64_t end = file.size() - 22;
  const uint64_t lowest = file.size() > 22 + 65535 ? file.size() - 22 - 65535 : 0;
  while (file.read(end, 4) != kEndOfDirectory) {
    if (end == lowest) throw std::runtime_error("no zip directory at the end (truncated?)");
    --end;
  }
  EndOfDirectory directory{file.read(end + 10, 2), file.read(end + 16, 4), file.read(end + 12, 4)};
  if (directory.entries == 0xFFFF || directory.offset == 0xFFFFFFFF || directory.size == 0xFFFFFFFF) {
    // zip64: the real values are in its own record
    if (end < 20 || file.read(end - 20, 4) != kZip64Locator) throw std::runtime_error("a zip64 record is missing");
    const uint64_t record = file.read(end - 20 + 8, 8);
    if (file.read(record, 4) != kZip64EndOfDirectory) throw std::runtime_error("a zip64 record is damaged");
    directory = {file.read(record + 32, 8), file.read(record + 48, 8), file.read(record + 40, 8)};
  }
  if (directory.entries == 0) throw std::runtime_error("an empty zip file");
  file.at(directory.offset, directory.size);
  if (directory.entries > directory.size / kDirectoryEntrySize) {
    throw std::runtime_error("the zip directory claims more entries than it has room for");
  }
  return directory;
}

}  // namespace

std::vector<ZipEntry> read_zip_directory(const std::string& bytes, const ZipLimits& limits) {
  const Bytes file(bytes);
  const EndOfDirectory directory = find_directory(file);
  std::vector<ZipEntry> entries;
  std::set<std::string> names;
  uint64_t position = directory.offset, file_order = 0, inflated = 0;
  for (uint64_t index = 0; index < directory.entries; ++index) {
    if (position + kDirectoryEntrySize > directory.offset + directory.size ||
        file.read(position, 4) != kDirectoryEntry) {
      throw std::runtime_error("the zip directory is damaged");
    }
    const uint64_t flags = file.read(position + 8, 2), method = file.read(position + 10, 2);
    const auto expected = static_cast<uint32_t>(file.read(position + 16, 4));
    uint64_t compressed = file.read(position + 20, 4), size = file.read(position + 24, 4);
    const uint64_t name_length = file.read(position + 28, 2), extra_length = file.read(position + 30, 2);
    const uint64_t comment_length = file.read(position + 32, 2);
    uint64_t local = file.read(position + 42, 4);
    ZipEntry entry;
    entry.name.assign(reinterpret_cast<const char*>(file.at(position + kDirectoryEntrySize, name_length)), name_length);
    if (!names.insert(entry.name).second)
      throw std::runtime_error("two zip entries are named " + format_excerpt(entry.name));
    if (flags & 1) throw std::runtime_error("entry " + format_excerpt(entry.name) + " is encrypted");
    // Zip64 sizes and offset, in this order, for the fields that hold 0xFFFFFFFF.
    const uint64_t extra_end = position + kDirectoryEntrySize + name_length + extra_length;
    for (uint64_t extra = position + kDirectoryEntrySize + name_length; extra + 4 <= extra_end;) {
      const uint64_t id = file.read(extra, 2), length = file.read(extra + 2, 2);
      if (id == 0x0001) {
        uint64_t field = extra + 4;
        for (uint64_t* value : {&size, &compressed, &local}) {
          if (*value == 0xFFFFFFFF) {
            if (field + 8 > extra + 4 + length) throw std::runtime_error("a zip64 field is missing");
            *value = file.read(field, 8), field += 8;
          }
        }
      }
      extra += 4 + length;
    }
    // Each entry's local header and bytes lie after the one before's and before the directory:
    // no byte is checked twice, and no two entries share one.
    if (local < file_order) {
      throw std::runtime_error("entry " + format_excerpt(entry.name) + " overlaps or precedes the entry before it");
    }
    if (file.read(local, 4) != kLocalHeader)
      throw std::runtime_error("entry " + format_excerpt(entry.name) + " has no local header");
    const uint64_t local_name = file.read(local + 26, 2), local_extra = file.read(local + 28, 2);
    if (local_name != name_length ||
        std::memcmp(file.at(local + kLocalHeaderSize, local_name), entry.name.data(), name_length) != 0) {
      throw std::runtime_error("entry " + format_excerpt(entry.name) + "'s local header names another file");
    }
    entry.data = local + kLocalHeaderSize + local_name + local_extra;
    entry.compressed = compressed;
    entry.size = size;
    if (entry.data > directory.offset || compressed > directory.offset - entry.data) {
      throw std::runtime_error("entry " + format_excerpt(entry.name) + " runs into the zip directory");
    }
    file_order = entry.data + compressed;
    const unsigned char* data = file.at(entry.data, compressed);
    uint32_t crc = 0;
    if (method == 0 && compressed == size) {
      crc = checksum(0, data, size);
    } else if (method == 8 && limits.may_deflate && limits.may_deflate(entry.name)) {
      if (size > limits.max_inflated_entry || size > limits.max_inflated_total - inflated) {
        throw std::runtime_error("entry " + format_excerpt(entry.name) + " inflates to more than this file may hold");
      }
      inflated += size;
      entry.deflated = true;
      const std::string out = inflate_entry(data, compressed, size, entry.name);
      crc = checksum(0, reinterpret_cast<const unsigned char*>(out.data()), size);
    } else {
      throw std::runtime_error("entry " + format_excerpt(entry.name) + " is compressed, which this file may not be");
    }
    if (crc != expected) throw std::runtime_error("entry " + format_excerpt(entry.name) + " fails its checksum");
    entries.push_back(std::move(entry));
    position = extra_end + comment_length;
  }
  return entries;
}

std::string zip_entry_bytes(const std::string& bytes, const ZipEntry& entry) {
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data()) + entry.data;
  if (!entry.deflated) return std::string(reinterpret_cast<const char*>(data), entry.size);
  return inflate_entry(data, entry.compressed, entry.size, entry.name);
}

}  // namespace nmt
