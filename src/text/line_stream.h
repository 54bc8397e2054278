// Lines of a pipe or a terminal, handed over as they arrive: a thread reads the stream, and the
// caller takes whatever has come so far (at least one line), so that a program in a pipeline can
// answer each line without waiting for the end of its input.
#pragma once

#include <cstddef>
#include <istream>
#include <memory>
#include <string>
#include <vector>

namespace nmt {

class LineStream {
 public:
  // Reads `in` (named `name` in errors) on a thread of its own until the end of the stream; `in`
  // must live that long (std::cin does).
  LineStream(std::istream& in, std::string name);
  ~LineStream();
  LineStream(const LineStream&) = delete;
  LineStream& operator=(const LineStream&) = delete;

  // Waits for at least one line, then returns up to `most` of the lines read so far, in order;
  // an empty result is the end of the stream. Throws std::runtime_error "NAME:LINE: invalid UTF-8"
  // or "NAME: read error" where the reader stopped.
  std::vector<std::string> take(size_t most);

 private:
  struct Shared;
  std::shared_ptr<Shared> shared_;  // also held by the reader, which may outlive this object
};

// True when `fd` is a pipe, a terminal or a socket: input that arrives over time, not a file.
bool is_stream(int fd);

}  // namespace nmt
