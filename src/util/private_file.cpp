#include "util/private_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace nmt {

std::string read_private_file(const std::string& path, const std::string& source, size_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  const int open_error = errno;
  struct stat info {};
  if (fd < 0 || ::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    if (fd >= 0) ::close(fd);
    throw std::invalid_argument(source + ": cannot read it (" +
                                (fd < 0 ? std::string(std::strerror(open_error)) : std::string("not a regular file")) +
                                "); give the path of a file you own");
  }
  if (info.st_uid != ::getuid() || (info.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    ::close(fd);
    throw std::invalid_argument(source + ": other users can read or change it: make it yours and chmod 600 " + path);
  }
  std::string text;
  char buffer[4096];
  ssize_t count = 0;
  while (text.size() < max_bytes &&
         ((count = ::read(fd, buffer, sizeof(buffer))) > 0 || (count < 0 && errno == EINTR))) {
    if (count > 0) text.append(buffer, static_cast<size_t>(count));
  }
  const int read_error = errno;
  ::close(fd);
  if (count < 0) throw std::invalid_argument(source + ": cannot read it (" + std::strerror(read_error) + ")");
  if (text.size() > max_bytes) text.resize(max_bytes);
  return text;
}

}  // namespace nmt
