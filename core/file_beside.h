#pragma once
// A file the user names (a timeline trace and its report, the tuning cache) written whole: never
// through a link someone put at its name, never seen half-written.
#include <string>

namespace nano {

/// Writes `text` into `path` whole: a new file beside it (mkostemp: 0600, a name nobody can guess,
/// never an existing file nor a link) renamed onto it, so a link at `path` is replaced, never
/// written through. Throws Error("cannot write PATH: why").
void write_file_beside(const std::string& path, const std::string& text);

}  // namespace nano
