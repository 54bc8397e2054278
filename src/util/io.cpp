#include "util/io.h"

#include <fcntl.h>
#include <unistd.h>

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
  if (result != 0 && !directory) throw std::runtime_error(path + ": cannot flush to disk (disk full?)");
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
        std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
        if (!out) throw std::runtime_error(path + ": cannot write (check the directory exists and is writable)");
        out << content;
        out.close();
        if (out.fail()) throw std::runtime_error(path + ": write failed (disk full?)");
      },
      durability);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open file (check the path)");
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

}  // namespace nmt
