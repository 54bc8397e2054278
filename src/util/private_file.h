// Files that hold secrets (the rendezvous secret of a distributed run, nmt serve's API keys): read
// only when their owner alone can read or change them, as ssh does with its keys.
#pragma once

#include <cstddef>
#include <string>

namespace nmt {

// The first `max_bytes` of `path`, a regular file that belongs to this user and that neither its
// group nor others may read or write (chmod 600). The checks are made on the file as opened, so
// that it cannot be swapped in between. Throws std::invalid_argument beginning with `source` (the
// option that named it, say) and saying what to do.
std::string read_private_file(const std::string& path, const std::string& source, size_t max_bytes);

}  // namespace nmt
