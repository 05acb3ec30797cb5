#include "launcher/tune/program_timing.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nano/error.h>
#include "core/rank_contract.h"
#include "launcher/prepare/launch_setup.h"
#include "launcher/process/subprocess.h"

namespace nano {
namespace {

// Whether the file at `path` holds any of `needles` (mapped, not read: a binary may be large).
bool file_contains(const std::string& path, const std::vector<std::string>& needles) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  bool found = false;
  if (fstat(fd, &st) == 0 && st.st_size > 0) {
    void* map = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    if (map != MAP_FAILED) {
      const char* begin = static_cast<const char*>(map);
      for (const auto& needle : needles) {
        if (memmem(begin, static_cast<size_t>(st.st_size), needle.data(), needle.size())) found = true;
      }
      munmap(map, static_cast<size_t>(st.st_size));
    }
  }
  ::close(fd);
  return found;
}

}  // namespace

bool names_nano_backend(const std::string& source, const std::vector<std::string>& arguments) {
  for (const char* name : {"nano_torch", "'nano'", "\"nano\""})
    if (source.find(name) != std::string::npos) return true;
  return std::find(arguments.begin(), arguments.end(), "nano") != arguments.end();
}

ProgramTiming program_timing(const std::vector<std::string>& argv) {
  if (argv.empty()) return ProgramTiming::kNone;
  std::string path;
  try {
    path = resolve_program(argv.front(), getenv_string("PATH"));
  } catch (const UsageError&) {
    return ProgramTiming::kNone;
  }
  // The runtime linked in (the step report's variable, which its runtime holds; nano's libraries are static).
  if (file_contains(path, {contract::kTuneReport})) return ProgramTiming::kRuntime;
  const std::string name = std::filesystem::path(argv.front()).filename().string();
  if (name.rfind("python", 0) != 0) return ProgramTiming::kNone;
  // python [options] (-c CODE | SCRIPT) [ARGS]: the code or the script's text.
  for (std::size_t i = 1; i < argv.size(); ++i) {
    const std::vector<std::string> rest(argv.begin() + static_cast<long>(i) + 1, argv.end());
    if (argv[i] == "-c" && i + 1 < argv.size())
      return names_nano_backend(argv[i + 1], rest) ? ProgramTiming::kTorchBackend : ProgramTiming::kNone;
    if (argv[i].empty() || argv[i][0] == '-') continue;
    std::ifstream in(argv[i]);
    std::stringstream text;
    text << in.rdbuf();
    return names_nano_backend(text.str(), rest) ? ProgramTiming::kTorchBackend : ProgramTiming::kNone;
  }
  return ProgramTiming::kNone;
}

}  // namespace nano
