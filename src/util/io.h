// File helpers: everything the program writes goes through a temporary file and a rename, so an
// interrupted run never leaves a half-written file where a good one was.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace nmt {

// A file or directory the user named is not there: the message names it and what to do. The
// command line reports it like any error; the Python module raises FileNotFoundError.
class FileNotFound : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

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

// A file written with POSIX calls, so that every failure (a full disk: ENOSPC; a file-size limit:
// EFBIG) is a std::runtime_error naming `name` and the reason, never a silent short write.
// Writes all `size` bytes to `descriptor`, going on after short writes and EINTR. Returns "" when
// they are written, else why not (strerror, or "nothing written").
std::string write_fully(int descriptor, const char* data, size_t size);

class OutputFile {
 public:
  // Creates (or truncates) `path`; `name` is the path the messages give (the final name of a
  // temporary file).
  OutputFile(const std::string& path, const std::string& name);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void write(const char* data, size_t size);
  void write(const std::string& bytes) { write(bytes.data(), bytes.size()); }
  void close();  // throws if the last bytes could not be written

 private:
  std::string name_;
  int descriptor_ = -1;
};

// Removes the temporary files (NAME.tmp.PID, from write_via_temporary) in `directory` whose
// process no longer runs: what a killed run leaves. Returns their names.
std::vector<std::string> remove_stale_temporaries(const std::string& directory);

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
