#pragma once
// Files that survive a crash whole: what checkpoints are written with.
#include <string>

namespace nano {

/// Writes `bytes` to `path` (a file of folder `dir`) so that a crash leaves the old file or the
/// new one: a temporary in the same folder (an unpredictable name, made O_EXCL|O_NOFOLLOW, 0600),
/// fsync, rename, fsync of the folder. Throws Error naming the file; no temporary is left then.
void write_durable(const std::string& dir, const std::string& path, const std::string& bytes);

/// fsyncs folder `dir`, so that what was renamed into it or removed from it lasts a crash.
void sync_folder(const std::string& dir);

}  // namespace nano
