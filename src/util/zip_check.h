// The integrity check of a zip file as LibTorch writes checkpoints (entries stored or deflated,
// each with its CRC-32), made before LibTorch reads one: LibTorch's reader does not check the CRCs, and its
// unpickler can crash the process on damaged bytes (tests/fuzz/fuzz_checkpoint.cpp found such a
// file), so a damaged checkpoint must be refused first.
#pragma once

#include <string>

namespace nmt {

// Throws std::runtime_error saying what is wrong (no zip directory, an entry out of the file, an
// unknown compression, a checksum mismatch) unless every entry of the zip file at `path` is whole.
// Reads the file once, memory-mapped. Zip64 (files over 4 GB) included.
void check_zip_file(const std::string& path);

// The same for a zip held in memory (rank 0's optimizer state, read from the rendezvous store).
void check_zip_bytes(const std::string& bytes);

}  // namespace nmt
