// For the fuzz targets that read files: the input written to a file of this process's own.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace nmt::fuzz {

inline std::string write_input(const std::string& name, const uint8_t* data, size_t size) {
  static const std::filesystem::path directory = [] {
    std::filesystem::path path = std::filesystem::temp_directory_path() / ("nmt_fuzz_" + std::to_string(::getpid()));
    std::filesystem::create_directories(path);
    return path;
  }();
  const std::string path = (directory / name).string();
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path;
}

}  // namespace nmt::fuzz
