// The safetensors format (huggingface/safetensors): 8 bytes, the length N of a JSON header as a
// little-endian integer; N bytes of JSON, an object naming each tensor's dtype, shape and byte range
// ("data_offsets", relative to the data's start) and an optional "__metadata__" object of strings;
// then the tensors' raw little-endian bytes, back to back. A reader builds tensors from bytes and
// never runs anything a file holds, which is why our checkpoints use it (inference/checkpoint_format.h).
#pragma once

#include <torch/types.h>

#include <map>
#include <string>

namespace nmt {

class TensorFile {
 public:
  // Adds a tensor (copied to the CPU, contiguous, when written); a name is used once.
  void add(const std::string& name, const torch::Tensor& tensor);
  // Bytes as a tensor of type uint8 (vocabularies, the configuration's text).
  void add_bytes(const std::string& name, const std::string& bytes);
  void set_metadata(const std::string& key, const std::string& value) { metadata_[key] = value; }

  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  // The tensor `name`; std::runtime_error ("`name` is missing") when there is none.
  const torch::Tensor& tensor(const std::string& name) const;
  std::string bytes(const std::string& name) const;
  // The metadata value `key`, or `fallback` when it has none.
  std::string metadata(const std::string& key, const std::string& fallback = "") const;
  bool has_metadata(const std::string& key) const { return metadata_.count(key) != 0; }
  const std::map<std::string, torch::Tensor>& tensors() const { return tensors_; }
  // The tensors and metadata whose names begin with `prefix` (sharing the tensors' storage).
  TensorFile with_prefix(const std::string& prefix) const;

  // The file's bytes. Tensors are laid out by falling element size, so that each starts at a
  // multiple of its element size (the data starts at a multiple of 8). The metadata gains
  // "data_crc32", the CRC-32 of the data as 8 hex digits, which parse checks when a file has it.
  std::string serialize() const;
  // Reads `bytes` as a whole safetensors file. Every length, dtype, shape and byte range is checked
  // against the bytes before a tensor is built: std::runtime_error saying what is wrong otherwise.
  // Accepts what the format allows (any order of ranges that tile the data exactly), refuses
  // duplicate names, holes, overlaps, nesting the format does not have, a header over 100 MB and
  // data that fails its data_crc32.
  static TensorFile parse(const std::string& bytes);

 private:
  std::map<std::string, torch::Tensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

// Whether `bytes` begin as a safetensors file does: a header length within the bytes, then '{'.
bool looks_like_safetensors(const std::string& bytes);

}  // namespace nmt
