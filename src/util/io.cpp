#include "util/io.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace nmt {

void write_via_temporary(const std::string& path, const std::function<void(const std::string&)>& write) {
  const std::string temporary = path + ".tmp." + std::to_string(::getpid());
  try {
    write(temporary);
    std::filesystem::rename(temporary, path);
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove(temporary, ignored);
    throw;
  }
}

void write_file_atomic(const std::string& path, const std::string& content) {
  write_via_temporary(path, [&](const std::string& temporary) {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error(path + ": cannot write (check the directory exists and is writable)");
    out << content;
    out.flush();
    if (!out) throw std::runtime_error(path + ": write failed (disk full?)");
  });
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open file (check the path)");
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

bool file_exists(const std::string& path) { return std::filesystem::exists(path); }

}  // namespace nmt
