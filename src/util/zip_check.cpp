#include "util/zip_check.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <stdexcept>

namespace nmt {
namespace {

// The zip format's little-endian fields (PKWARE APPNOTE 6.3), read bounds-checked.
class Bytes {
 public:
  Bytes(const unsigned char* data, uint64_t size) : data_(data), size_(size) {}
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

uint32_t checksum(uint32_t crc, const unsigned char* bytes, uint64_t size) {
  for (uint64_t done = 0; done < size;) {  // zlib takes at most 4 GB a call
    const auto chunk = static_cast<uInt>(std::min<uint64_t>(size - done, uint64_t{1} << 30));
    crc = static_cast<uint32_t>(crc32(crc, bytes + done, chunk));
    done += chunk;
  }
  return crc;
}

// The CRC-32 of a deflated entry's `size` bytes once inflated.
uint32_t inflated_checksum(const unsigned char* bytes, uint64_t compressed, uint64_t size, const std::string& name) {
  z_stream stream{};
  if (inflateInit2(&stream, -MAX_WBITS) != Z_OK) throw std::runtime_error("zlib cannot start");
  unsigned char buffer[1 << 16];
  uint32_t crc = 0;
  uint64_t produced = 0;
  stream.next_in = const_cast<unsigned char*>(bytes);
  stream.avail_in = static_cast<uInt>(std::min<uint64_t>(compressed, uint64_t{1} << 30));
  int result = Z_OK;
  while (result == Z_OK) {
    stream.next_out = buffer;
    stream.avail_out = sizeof(buffer);
    result = inflate(&stream, Z_NO_FLUSH);
    const uint64_t count = sizeof(buffer) - stream.avail_out;
    crc = checksum(crc, buffer, count);
    produced += count;
    if (produced > size) break;
  }
  inflateEnd(&stream);
  if (result != Z_STREAM_END || produced != size) throw std::runtime_error("entry " + name + " does not inflate");
  return crc;
}

void check_entries(const Bytes& file) {
  // The end-of-directory record: in the last 22 + 65535 bytes (after it, at most a comment).
  if (file.size() < 22) throw std::runtime_error("too short for a zip file");
  uint64_t end = file.size() - 22;
  const uint64_t lowest = file.size() > 22 + 65535 ? file.size() - 22 - 65535 : 0;
  while (file.read(end, 4) != kEndOfDirectory) {
    if (end == lowest) throw std::runtime_error("no zip directory at the end (truncated?)");
    --end;
  }
  uint64_t entries = file.read(end + 10, 2), directory = file.read(end + 16, 4);
  if (entries == 0xFFFF || directory == 0xFFFFFFFF) {  // zip64: the real values are in its own record
    if (end < 20 || file.read(end - 20, 4) != kZip64Locator) throw std::runtime_error("a zip64 record is missing");
    const uint64_t record = file.read(end - 20 + 8, 8);
    if (file.read(record, 4) != kZip64EndOfDirectory) throw std::runtime_error("a zip64 record is damaged");
    entries = file.read(record + 32, 8);
    directory = file.read(record + 48, 8);
  }
  if (entries == 0) throw std::runtime_error("an empty zip file");
  uint64_t position = directory;
  for (uint64_t entry = 0; entry < entries; ++entry) {
    if (file.read(position, 4) != kDirectoryEntry) throw std::runtime_error("the zip directory is damaged");
    const uint64_t method = file.read(position + 10, 2);
    const auto expected = static_cast<uint32_t>(file.read(position + 16, 4));
    uint64_t compressed = file.read(position + 20, 4), size = file.read(position + 24, 4);
    const uint64_t name_length = file.read(position + 28, 2), extra_length = file.read(position + 30, 2);
    const uint64_t comment_length = file.read(position + 32, 2);
    uint64_t local = file.read(position + 42, 4);
    const std::string name(reinterpret_cast<const char*>(file.at(position + 46, name_length)), name_length);
    // Zip64 sizes and offset, in this order, for the fields that hold 0xFFFFFFFF.
    for (uint64_t extra = position + 46 + name_length; extra + 4 <= position + 46 + name_length + extra_length;) {
      const uint64_t id = file.read(extra, 2), length = file.read(extra + 2, 2);
      if (id == 0x0001) {
        uint64_t field = extra + 4;
        for (uint64_t* value : {&size, &compressed, &local}) {
          if (*value == 0xFFFFFFFF) *value = file.read(field, 8), field += 8;
        }
      }
      extra += 4 + length;
    }
    if (file.read(local, 4) != kLocalHeader) throw std::runtime_error("entry " + name + " has no local header");
    const uint64_t data = local + 30 + file.read(local + 26, 2) + file.read(local + 28, 2);
    uint32_t crc = 0;
    if (method == 0 && compressed == size) {
      crc = checksum(0, file.at(data, size), size);
    } else if (method == 8) {  // LibTorch deflates its small code records
      crc = inflated_checksum(file.at(data, compressed), compressed, size, name);
    } else {
      throw std::runtime_error("entry " + name + " uses an unknown compression");
    }
    if (crc != expected) throw std::runtime_error("entry " + name + " fails its checksum");
    position += 46 + name_length + extra_length + comment_length;
  }
}

}  // namespace

void check_zip_file(const std::string& path) {
  const int descriptor = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (descriptor < 0) throw std::runtime_error(std::string("cannot open (") + std::strerror(errno) + ")");
  struct stat status {};
  if (::fstat(descriptor, &status) != 0 || status.st_size <= 0) {
    ::close(descriptor);
    throw std::runtime_error("an empty file");
  }
  const auto size = static_cast<uint64_t>(status.st_size);
  void* mapping = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, descriptor, 0);
  ::close(descriptor);
  if (mapping == MAP_FAILED) throw std::runtime_error(std::string("cannot map (") + std::strerror(errno) + ")");
  try {
    check_entries(Bytes(static_cast<const unsigned char*>(mapping), size));
  } catch (...) {
    ::munmap(mapping, size);
    throw;
  }
  ::munmap(mapping, size);
}

void check_zip_bytes(const std::string& bytes) {
  check_entries(Bytes(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size()));
}

}  // namespace nmt
