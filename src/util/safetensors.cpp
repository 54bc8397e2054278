#include "util/safetensors.h"

#include <torch/torch.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <vector>

#include "util/format.h"

namespace nmt {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors data is little-endian, as this host must be");

using json = nlohmann::json;

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the reference reader's limit
constexpr const char* kMetadataKey = "__metadata__";
// The data's CRC-32, which safetensors itself does not have: a changed byte on a disk or in transit
// is refused rather than loaded as a changed weight.
constexpr const char* kChecksumKey = "data_crc32";

uint32_t checksum(uint32_t crc, const char* bytes, uint64_t size) {
  for (uint64_t done = 0; done < size;) {  // zlib takes at most 4 GB a call
    const auto chunk = static_cast<uInt>(std::min<uint64_t>(size - done, uint64_t{1} << 30));
    crc = static_cast<uint32_t>(crc32(crc, reinterpret_cast<const Bytef*>(bytes) + done, chunk));
    done += chunk;
  }
  return crc;
}

std::string hex32(uint32_t value) {
  char text[9];
  std::snprintf(text, sizeof(text), "%08x", value);
  return text;
}

struct DType {
  const char* name;
  torch::ScalarType type;
};

// The element types this program reads and writes; safetensors has a few more (BOOL, the unsigned
// wider ones, float8), which no checkpoint of ours holds.
constexpr DType kDTypes[] = {
    {"F64", torch::kDouble},    {"F32", torch::kFloat}, {"F16", torch::kHalf},
    {"BF16", torch::kBFloat16}, {"I64", torch::kLong},  {"I32", torch::kInt},
    {"I16", torch::kShort},     {"I8", torch::kChar},   {"U8", torch::kByte},
};

const char* dtype_name(torch::ScalarType type) {
  for (const DType& dtype : kDTypes) {
    if (dtype.type == type) return dtype.name;
  }
  throw std::invalid_argument(std::string("safetensors: no dtype for tensors of type ") + c10::toString(type));
}

torch::ScalarType dtype_of(const std::string& name, const std::string& tensor) {
  for (const DType& dtype : kDTypes) {
    if (name == dtype.name) return dtype.type;
  }
  throw std::runtime_error("tensor " + tensor + " has dtype '" + name.substr(0, 16) +
                           "', which this build does not read");
}

uint64_t read_le64(const std::string& bytes) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = value << 8 | static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
  return value;
}

// Parses the header, refusing a key that appears twice in one object (a JSON parser keeps the
// last, so two entries could name different bytes for one tensor) and nesting beyond the format's
// three levels (the top object, a tensor's entry, its shape).
json parse_header(const char* begin, const char* end) {
  std::vector<std::set<std::string>> keys;
  const json::parser_callback_t check = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth > 3) throw std::runtime_error("the header nests deeper than the format does");
    if (event == json::parse_event_t::object_start) keys.emplace_back();
    if (event == json::parse_event_t::object_end) keys.pop_back();
    if (event == json::parse_event_t::key && !keys.back().insert(parsed.get<std::string>()).second) {
      throw std::runtime_error("the header names " + format_excerpt(parsed.get<std::string>()) + " twice");
    }
    return true;
  };
  try {
    return json::parse(begin, end, check);
  } catch (const json::exception& error) {
    throw std::runtime_error(std::string("the header is not valid JSON (") + error.what() + ")");
  }
}

uint64_t unsigned_value(const json& value, const std::string& what) {
  if (!value.is_number_unsigned() && !(value.is_number_integer() && value.get<int64_t>() >= 0)) {
    throw std::runtime_error(what + " is not a non-negative integer");
  }
  return value.get<uint64_t>();
}

struct Entry {
  std::string name;
  torch::ScalarType type;
  std::vector<int64_t> shape;
  uint64_t begin, end;
};

Entry read_entry(const std::string& name, const json& value, uint64_t data_size) {
  if (!value.is_object() || value.size() != 3 || !value.contains("dtype") || !value.contains("shape") ||
      !value.contains("data_offsets")) {
    throw std::runtime_error("tensor " + format_excerpt(name) +
                             ": an entry must hold exactly dtype, shape and data_offsets");
  }
  const json& dtype = value["dtype"];
  const json& shape = value["shape"];
  const json& offsets = value["data_offsets"];
  if (!dtype.is_string()) throw std::runtime_error("tensor " + format_excerpt(name) + ": its dtype is not a string");
  if (!shape.is_array() || shape.size() > 8)
    throw std::runtime_error("tensor " + format_excerpt(name) + ": its shape is not a list of at most 8 sizes");
  if (!offsets.is_array() || offsets.size() != 2) {
    throw std::runtime_error("tensor " + format_excerpt(name) + ": its data_offsets are not [begin, end]");
  }
  Entry entry{name, dtype_of(dtype.get<std::string>(), format_excerpt(name)), {}, 0, 0};
  uint64_t count = 1;
  for (const json& size : shape) {
    const uint64_t dimension = unsigned_value(size, "tensor " + format_excerpt(name) + ": a size in its shape");
    if (dimension > data_size || __builtin_mul_overflow(count, dimension, &count) || count > data_size) {
      throw std::runtime_error("tensor " + format_excerpt(name) +
                               ": its shape holds more elements than the file has bytes");
    }
    entry.shape.push_back(static_cast<int64_t>(dimension));
  }
  entry.begin = unsigned_value(offsets[0], "tensor " + format_excerpt(name) + ": its first data offset");
  entry.end = unsigned_value(offsets[1], "tensor " + format_excerpt(name) + ": its second data offset");
  if (entry.begin > entry.end || entry.end > data_size) {
    throw std::runtime_error("tensor " + format_excerpt(name) + ": its data_offsets run outside the file's data");
  }
  const uint64_t bytes = count * c10::elementSize(entry.type);  // count <= data_size: no overflow
  if (bytes != entry.end - entry.begin) {
    throw std::runtime_error("tensor " + format_excerpt(name) + ": its shape and dtype need " + std::to_string(bytes) +
                             " bytes, its data_offsets give " + std::to_string(entry.end - entry.begin));
  }
  return entry;
}

}  // namespace

void TensorFile::add(const std::string& name, const torch::Tensor& tensor) {
  if (name == kMetadataKey || name.empty())
    throw std::invalid_argument("safetensors: a tensor cannot be named '" + name + "'");
  dtype_name(tensor.scalar_type());  // refuses a type the format cannot hold now, not at serialize
  if (!tensors_.emplace(name, tensor.detach().to(torch::kCPU).contiguous()).second) {
    throw std::invalid_argument("safetensors: tensor " + name + " added twice");
  }
}

void TensorFile::add_bytes(const std::string& name, const std::string& bytes) {
  torch::Tensor tensor = torch::empty({static_cast<int64_t>(bytes.size())}, torch::kUInt8);
  std::memcpy(tensor.data_ptr<uint8_t>(), bytes.data(), bytes.size());
  add(name, tensor);
}

const torch::Tensor& TensorFile::tensor(const std::string& name) const {
  const auto found = tensors_.find(name);
  if (found == tensors_.end()) throw std::runtime_error("tensor " + name + " is missing");
  return found->second;
}

std::string TensorFile::bytes(const std::string& name) const {
  const torch::Tensor& stored = tensor(name);
  if (stored.scalar_type() != torch::kUInt8 || stored.dim() != 1) {
    throw std::runtime_error("tensor " + name + " is not a list of bytes (U8, one dimension)");
  }
  return {reinterpret_cast<const char*>(stored.data_ptr<uint8_t>()), static_cast<size_t>(stored.numel())};
}

std::string TensorFile::metadata(const std::string& key, const std::string& fallback) const {
  const auto found = metadata_.find(key);
  return found == metadata_.end() ? fallback : found->second;
}

TensorFile TensorFile::with_prefix(const std::string& prefix) const {
  TensorFile part;
  for (const auto& [name, tensor] : tensors_) {
    if (name.rfind(prefix, 0) == 0) part.tensors_.emplace(name, tensor);
  }
  for (const auto& [key, value] : metadata_) {
    if (key.rfind(prefix, 0) == 0) part.metadata_.emplace(key, value);
  }
  return part;
}

std::string TensorFile::serialize() const {
  std::vector<const std::pair<const std::string, torch::Tensor>*> order;
  for (const auto& item : tensors_) order.push_back(&item);
  std::stable_sort(order.begin(), order.end(),
                   [](const auto* a, const auto* b) { return a->second.element_size() > b->second.element_size(); });
  json header = json::object();
  uint64_t offset = 0;
  uint32_t crc = 0;
  for (const auto* item : order) {
    const torch::Tensor& tensor = item->second;
    const auto bytes = static_cast<uint64_t>(tensor.numel()) * tensor.element_size();
    header[item->first] = {{"dtype", dtype_name(tensor.scalar_type())},
                           {"shape", tensor.sizes().vec()},
                           {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    crc = checksum(crc, static_cast<const char*>(tensor.data_ptr()), bytes);
  }
  std::map<std::string, std::string> metadata = metadata_;
  metadata[kChecksumKey] = hex32(crc);
  header[kMetadataKey] = metadata;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts at a multiple of 8
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i) file[static_cast<size_t>(i)] = static_cast<char>(text.size() >> (8 * i) & 0xFF);
  file.reserve(8 + text.size() + offset);
  file += text;
  for (const auto* item : order) {
    const torch::Tensor& tensor = item->second;
    file.append(static_cast<const char*>(tensor.data_ptr()),
                static_cast<size_t>(tensor.numel()) * tensor.element_size());
  }
  return file;
}

TensorFile TensorFile::parse(const std::string& bytes) {
  if (bytes.size() < 8) throw std::runtime_error("too short for a safetensors file");
  const uint64_t header_size = read_le64(bytes);
  if (header_size > kMaxHeaderBytes || header_size > bytes.size() - 8) {
    throw std::runtime_error("its header length (" + std::to_string(header_size) + " bytes) runs past the file");
  }
  const json header = parse_header(bytes.data() + 8, bytes.data() + 8 + header_size);
  if (!header.is_object()) throw std::runtime_error("the header is not a JSON object");
  const uint64_t data_offset = 8 + header_size, data_size = bytes.size() - data_offset;

  TensorFile file;
  std::vector<Entry> entries;
  for (const auto& [name, value] : header.items()) {
    if (name != kMetadataKey) {
      entries.push_back(read_entry(name, value, data_size));
      continue;
    }
    if (!value.is_object()) throw std::runtime_error("its __metadata__ is not an object");
    for (const auto& [key, text] : value.items()) {
      if (!text.is_string()) throw std::runtime_error("metadata " + format_excerpt(key) + " is not a string");
      file.metadata_[key] = text.get<std::string>();
    }
  }
  // The ranges must tile the data: sorted, each starts where the one before ends, the last ends at
  // the file's end. No byte belongs to two tensors, and none is left over.
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  uint64_t cursor = 0;
  for (const Entry& entry : entries) {
    if (entry.begin != cursor) {
      throw std::runtime_error(
          "tensor " + format_excerpt(entry.name) +
          (entry.begin < cursor ? ": its bytes overlap another tensor's" : ": a gap of unused bytes lies before it"));
    }
    cursor = entry.end;
  }
  if (cursor != data_size) {
    throw std::runtime_error(std::to_string(data_size - cursor) + " bytes after the last tensor belong to none");
  }
  if (const auto stored = file.metadata_.find(kChecksumKey); stored != file.metadata_.end()) {
    if (stored->second != hex32(checksum(0, bytes.data() + data_offset, data_size))) {
      throw std::runtime_error("its data fails its checksum (" + std::string(kChecksumKey) + ")");
    }
    file.metadata_.erase(stored);
  }
  for (const Entry& entry : entries) {
    torch::Tensor tensor = torch::empty(entry.shape, torch::TensorOptions().dtype(entry.type));
    if (entry.end > entry.begin) {
      std::memcpy(tensor.data_ptr(), bytes.data() + data_offset + entry.begin, entry.end - entry.begin);
    }
    file.tensors_.emplace(entry.name, std::move(tensor));
  }
  return file;
}

bool looks_like_safetensors(const std::string& bytes) {
  if (bytes.size() < 9) return false;
  const uint64_t header_size = read_le64(bytes);
  return header_size >= 2 && header_size <= bytes.size() - 8 && bytes[8] == '{';
}

}  // namespace nmt
