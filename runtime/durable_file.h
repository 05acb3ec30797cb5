#pragma once
// Files that survive a crash whole: what checkpoints are written with.
#include <string>

namespace nano {

/// Writes `bytes` to `path` (a file of folder `dir`) so that a crash leaves the old file or the
/// new one: a temporary in the same folder, fsync, rename, fsync of the folder. Throws Error
/// naming the file; no temporary is left then.
void write_durable(const std::string& dir, const std::string& path, const std::string& bytes);

/// The whole of `path`; "" when it cannot be read.
std::string read_whole_file(const std::string& path);

}  // namespace nano
