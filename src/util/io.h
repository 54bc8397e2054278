// File helpers: everything the program writes goes through a temporary file and a rename, so an
// interrupted run never leaves a half-written file where a good one was.
#pragma once

#include <functional>
#include <string>

namespace nmt {

// Writes `content` to `path` atomically (temporary file in the same directory, then rename).
void write_file_atomic(const std::string& path, const std::string& content);

// Calls `write(temporary_path)` and renames the result to `path`; removes the temporary file if
// `write` throws. For writers that need a path (LibTorch archives).
void write_via_temporary(const std::string& path, const std::function<void(const std::string&)>& write);

std::string read_file(const std::string& path);
bool file_exists(const std::string& path);

}  // namespace nmt
