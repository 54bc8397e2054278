// File helpers: everything the program writes goes through a temporary file and a rename, so an
// interrupted run never leaves a half-written file where a good one was.
#pragma once

#include <functional>
#include <string>

namespace nmt {

// kSync flushes the file and its directory to disk before and after the rename, so even a crash
// of the machine leaves the old or the new file. kNoSync still renames (a killed process never
// leaves a half-written file) but lets the page cache write it out: for many small files that can
// be made again, such as attention plots, where thousands of fsyncs would cost seconds.
enum class Durability { kSync, kNoSync };

// Writes `content` to `path` atomically (temporary file in the same directory, then rename).
void write_file_atomic(const std::string& path, const std::string& content, Durability durability = Durability::kSync);

// Calls `write(temporary_path)` and renames the result to `path`; removes the temporary file if
// `write` throws. For writers that need a path (LibTorch archives).
void write_via_temporary(const std::string& path, const std::function<void(const std::string&)>& write,
                         Durability durability = Durability::kSync);

std::string read_file(const std::string& path);
bool file_exists(const std::string& path);

// Throws std::invalid_argument naming `option` when the directory that would hold `path` does not
// exist; checked before any long work, so that a typo does not cost a whole run.
void require_parent_directory(const std::string& path, const std::string& option);

// An exclusive lock on `directory` (an flock on directory/.lock, which holds the owner's pid), held
// until destruction or the process's end, however it ends. Throws std::runtime_error naming the
// directory and the process that holds it.
class DirectoryLock {
 public:
  explicit DirectoryLock(const std::string& directory);
  ~DirectoryLock();
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

 private:
  int descriptor_ = -1;
};

}  // namespace nmt
