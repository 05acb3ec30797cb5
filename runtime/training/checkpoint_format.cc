#include "runtime/training/checkpoint_format.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <optional>
#include <sstream>
#include <vector>

#include <nano/error.h>

namespace nano {

namespace {

constexpr const char* kMagic = "nano-checkpoint 1";

}  // namespace

uint64_t checkpoint_checksum(const char* p, std::size_t n, uint64_t seed) {
  uint64_t h = seed;
  for (size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(p[i]);
    h *= 1099511628211ULL;
  }
  return h;
}

std::string checkpoint_header(int64_t step, int world, const std::string& torch, const std::string& payload) {
  char sum[32];
  snprintf(sum, sizeof sum, "%016llx",
           static_cast<unsigned long long>(checkpoint_checksum(payload.data(), payload.size())));
  std::ostringstream h;
  h << kMagic << "\nstep " << step << "\nworld " << world << "\ntorch " << torch << "\nbytes " << payload.size()
    << "\nfnv1a64 " << sum << "\n\n";
  return h.str();
}

bool parse_checkpoint_header(const std::string& text, CheckpointHeader& h) {
  if (text.compare(0, strlen(kMagic), kMagic) != 0) return false;
  const size_t end = text.find("\n\n");
  if (end == std::string::npos || end + 2 > kMaxCheckpointHeader) return false;
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

std::vector<std::string> checkpoints_to_prune(std::vector<CheckpointFile> files, int keep) {
  std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) { return a.step > b.step; });
  std::vector<std::string> out;
  int newer_verified = 0;
  for (const CheckpointFile& f : files) {
    if (!f.verified) continue;
    if (newer_verified >= keep) out.push_back(f.path);
    ++newer_verified;
  }
  return out;
}

std::string checkpoint_file_name(int64_t step) {
  char name[32];
  snprintf(name, sizeof name, "ckpt-%012lld.nano", static_cast<long long>(step));
  return name;
}

namespace {

// The file's first bytes, at most the longest header: what its header may be.
std::string read_head(int fd) {
  std::string head(kMaxCheckpointHeader, '\0');
  size_t used = 0;
  while (used < head.size()) {
    const ssize_t n = pread(fd, head.data() + used, head.size() - used, static_cast<off_t>(used));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    used += static_cast<size_t>(n);
  }
  head.resize(used);
  return head;
}

// Why the file open as `fd` is not a whole checkpoint ("" when it is), reading its payload in
// pieces; `h` gets its header.
std::string why_not_whole(int fd, CheckpointHeader& h, bool check_sum) {
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return "not a regular file";
  const std::string head = read_head(fd);
  if (!parse_checkpoint_header(head, h)) return head.empty() ? "empty or unreadable" : "not a nano checkpoint";
  const uint64_t have = static_cast<uint64_t>(st.st_size) - h.payload_at;
  if (have < h.bytes) return "truncated: " + std::to_string(have) + " of " + std::to_string(h.bytes) + " payload bytes";
  if (have > h.bytes) return "longer than its header says";
  if (!check_sum) return "";
  std::vector<char> chunk(1 << 20);
  uint64_t sum = kChecksumSeed;
  for (uint64_t at = 0; at < h.bytes;) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(chunk.size(), h.bytes - at));
    const ssize_t n = pread(fd, chunk.data(), want, static_cast<off_t>(h.payload_at + at));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return "unreadable: " + std::string(n < 0 ? strerror(errno) : "shorter than its size");
    sum = checkpoint_checksum(chunk.data(), static_cast<size_t>(n), sum);
    at += static_cast<uint64_t>(n);
  }
  return sum == h.sum ? "" : "checksum mismatch (damaged)";
}

// Never through a link, never blocking (a FIFO planted at a checkpoint's name is no checkpoint:
// why_not_whole refuses anything but a regular file before reading).
int open_checkpoint(const std::string& path) {
  return open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
}

}  // namespace

std::string verify_checkpoint(const std::string& path) {
  const int fd = open_checkpoint(path);
  if (fd < 0) return errno == ELOOP ? "a symbolic link" : "empty or unreadable";
  CheckpointHeader h;
  std::string why = why_not_whole(fd, h, true);
  close(fd);
  return why;
}

CheckpointReader::CheckpointReader(const std::string& path) : path_(path), fd_(open_checkpoint(path)) {
  if (fd_ < 0) throw Error("cannot read checkpoint " + path + ": " + strerror(errno));
  // The size is checked here, the checksum was by the rank that chose the file.
  const std::string why = why_not_whole(fd_, header_, false);
  if (!why.empty()) {
    close(fd_);
    throw Error("cannot read checkpoint " + path + ": " + why);
  }
}

CheckpointReader::~CheckpointReader() { close(fd_); }

size_t CheckpointReader::read(uint64_t at, void* buffer, size_t n) const {
  if (at >= header_.bytes) return 0;
  n = static_cast<size_t>(std::min<uint64_t>(n, header_.bytes - at));
  size_t done = 0;
  while (done < n) {
    const ssize_t got =
        pread(fd_, static_cast<char*>(buffer) + done, n - done, static_cast<off_t>(header_.payload_at + at + done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    done += static_cast<size_t>(got);
  }
  return done;
}

namespace {

std::optional<std::tuple<dev_t, ino_t, off_t, int64_t>> identity_of(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return std::nullopt;
  return std::make_tuple(st.st_dev, st.st_ino, st.st_size,
                         static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec);
}

}  // namespace

std::string CheckpointVerdicts::why_not(const std::string& path) {
  const auto id = identity_of(path);
  if (!id) return "empty or unreadable";
  const auto it = known_.find(path);
  if (it != known_.end() && it->second.first == *id) return it->second.second;
  const std::string why = verify_checkpoint(path);
  // Read again after verifying: a file that changed meanwhile is verified anew next time.
  if (identity_of(path) == id) known_[path] = {*id, why};
  return why;
}

void CheckpointVerdicts::written(const std::string& path) {
  if (const auto id = identity_of(path)) known_[path] = {*id, ""};
}

}  // namespace nano
