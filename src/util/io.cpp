#include "util/io.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace nmt {

namespace {

// Flushes a file (or directory) to disk, so that a rename never publishes data still in the
// page cache: after a crash the old or the new file is there, never a truncated one.
void sync_to_disk(const std::string& path, bool directory) {
  const int descriptor = ::open(path.c_str(), directory ? O_RDONLY | O_DIRECTORY : O_RDONLY);
  if (descriptor < 0) throw std::runtime_error(path + ": cannot open to flush it to disk");
  const int result = ::fsync(descriptor);
  ::close(descriptor);
  if (result != 0 && !directory) {
    throw std::runtime_error(path + ": cannot flush to disk (" + std::strerror(errno) + "); free some disk space");
  }
}

}  // namespace

void write_via_temporary(const std::string& path, const std::function<void(const std::string&)>& write,
                         Durability durability) {
  const std::string temporary = path + ".tmp." + std::to_string(::getpid());
  try {
    write(temporary);
    if (durability == Durability::kSync) sync_to_disk(temporary, false);
    std::filesystem::rename(temporary, path);
    const auto parent = std::filesystem::path(path).parent_path();
    if (durability == Durability::kSync) sync_to_disk(parent.empty() ? "." : parent.string(), true);
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove(temporary, ignored);
    throw;
  }
}

void write_file_atomic(const std::string& path, const std::string& content, Durability durability) {
  write_via_temporary(
      path,
      [&](const std::string& temporary) {
        OutputFile out(temporary, path);
        out.write(content);
        out.close();
      },
      durability);
}

OutputFile::OutputFile(const std::string& path, const std::string& name) : name_(name) {
  descriptor_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (descriptor_ < 0) {
    throw std::runtime_error(name_ + ": cannot write (" + std::strerror(errno) +
                             "; check the directory exists and is writable)");
  }
}

OutputFile::~OutputFile() {
  if (descriptor_ >= 0) ::close(descriptor_);
}

std::string write_fully(int descriptor, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t written = ::write(descriptor, data, size);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return written < 0 ? std::strerror(errno) : "nothing written";
    data += written;
    size -= static_cast<size_t>(written);
  }
  return "";
}

void OutputFile::write(const char* data, size_t size) {
  if (const std::string reason = write_fully(descriptor_, data, size); !reason.empty()) {
    throw std::runtime_error(name_ + ": write failed (" + reason + "); free some disk space and try again");
  }
}

void OutputFile::close() {
  const int descriptor = descriptor_;
  descriptor_ = -1;
  if (::close(descriptor) != 0) {
    throw std::runtime_error(name_ + ": write failed (" + std::strerror(errno) +
                             "); free some disk space and try again");
  }
}

std::vector<std::string> remove_stale_temporaries(const std::string& directory) {
  std::vector<std::string> removed;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(directory, error)) {
    const std::string name = entry.path().filename().string();
    const size_t mark = name.rfind(".tmp.");
    if (mark == std::string::npos || mark + 5 == name.size()) continue;
    const std::string pid = name.substr(mark + 5);
    if (!std::all_of(pid.begin(), pid.end(), [](char c) { return c >= '0' && c <= '9'; }) || pid.size() > 9) continue;
    if (::kill(static_cast<pid_t>(std::stol(pid)), 0) == 0 || errno != ESRCH) continue;  // its writer still runs
    if (std::filesystem::remove(entry.path(), error)) removed.push_back(name);
  }
  return removed;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (!std::filesystem::exists(path)) throw FileNotFound(path + ": file not found (check the path)");
    throw std::runtime_error(path + ": cannot open file (check the path)");
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

bool file_exists(const std::string& path) { return std::filesystem::exists(path); }

void require_parent_directory(const std::string& path, const std::string& option) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty() && !std::filesystem::is_directory(parent)) {
    throw std::invalid_argument(option + " " + path + ": directory " + parent.string() + " does not exist");
  }
}

DirectoryLock::DirectoryLock(const std::string& directory) {
  const std::string path = (std::filesystem::path(directory) / ".lock").string();
  descriptor_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (descriptor_ < 0) throw std::runtime_error(path + ": cannot create the lock file (" + std::strerror(errno) + ")");
  if (::flock(descriptor_, LOCK_EX | LOCK_NB) != 0) {
    char owner[32] = {0};
    const ssize_t bytes = ::pread(descriptor_, owner, sizeof(owner) - 1, 0);
    ::close(descriptor_);
    descriptor_ = -1;
    std::string pid(owner, static_cast<size_t>(std::max<ssize_t>(bytes, 0)));
    while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
    throw std::runtime_error(directory + " is in use by another nmt process" +
                             (pid.empty() ? "" : " (pid " + pid + ")") +
                             "; wait for it to finish or choose another directory");
  }
  // The pid is only for a second process's message: the lock holds without it.
  const std::string pid = std::to_string(::getpid()) + "\n";
  const bool written = ::ftruncate(descriptor_, 0) == 0 &&
                       ::pwrite(descriptor_, pid.data(), pid.size(), 0) == static_cast<ssize_t>(pid.size());
  static_cast<void>(written);
}

DirectoryLock::~DirectoryLock() {
  if (descriptor_ >= 0) ::close(descriptor_);  // releases the flock
}

}  // namespace nmt
