#include "runtime/checkpoint_format.h"

#include <torch/version.h>

#include <dirent.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <sstream>

#include <nano/checkpoint.h>
#include "runtime/durable_file.h"

namespace nano {

namespace {

constexpr const char* kMagic = "nano-checkpoint 1";

}  // namespace

uint64_t checkpoint_checksum(const char* p, std::size_t n) {
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(p[i]);
    h *= 1099511628211ULL;
  }
  return h;
}

std::string checkpoint_header(int64_t step, int world, const std::string& payload) {
  char sum[32];
  snprintf(sum, sizeof sum, "%016llx",
           static_cast<unsigned long long>(checkpoint_checksum(payload.data(), payload.size())));
  std::ostringstream h;
  h << kMagic << "\nstep " << step << "\nworld " << world << "\ntorch " << TORCH_VERSION << "\nbytes " << payload.size()
    << "\nfnv1a64 " << sum << "\n\n";
  return h.str();
}

bool parse_checkpoint_header(const std::string& text, CheckpointHeader& h) {
  if (text.compare(0, strlen(kMagic), kMagic) != 0) return false;
  const size_t end = text.find("\n\n");
  if (end == std::string::npos || end > 4096) return false;
  std::istringstream in(text.substr(0, end));
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    std::istringstream kv(line);
    std::string key;
    kv >> key;
    if (key == "step")
      kv >> h.step;
    else if (key == "world")
      kv >> h.world;
    else if (key == "torch")
      kv >> h.torch;
    else if (key == "bytes")
      kv >> h.bytes;
    else if (key == "fnv1a64")
      kv >> std::hex >> h.sum;
  }
  h.payload_at = end + 2;
  return h.step >= 0 && h.world > 0;
}

std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> out;
  DIR* d = opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() != 22 || name.compare(0, 5, "ckpt-") != 0 || name.compare(17, 5, ".nano") != 0) continue;
    const std::string digits = name.substr(5, 12);
    if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
    out.emplace_back(std::stoll(digits), dir + "/" + name);
  }
  closedir(d);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  return out;
}

std::string checkpoint_file_name(int64_t step) {
  char name[32];
  snprintf(name, sizeof name, "ckpt-%012lld.nano", static_cast<long long>(step));
  return name;
}

std::string verify_checkpoint(const std::string& path) {
  const std::string text = read_whole_file(path);
  CheckpointHeader h;
  if (!parse_checkpoint_header(text, h)) return text.empty() ? "empty or unreadable" : "not a nano checkpoint";
  const uint64_t have = text.size() - h.payload_at;
  if (have < h.bytes) return "truncated: " + std::to_string(have) + " of " + std::to_string(h.bytes) + " payload bytes";
  if (have > h.bytes) return "longer than its header says";
  if (checkpoint_checksum(text.data() + h.payload_at, h.bytes) != h.sum) return "checksum mismatch (damaged)";
  return "";
}

}  // namespace nano
