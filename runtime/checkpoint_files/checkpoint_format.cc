#include "runtime/checkpoint_files/checkpoint_format.h"

#include <errno.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iomanip>
#include <sstream>

#include <nano/error.h>
#include "core/job_secret.h"  // hex_of

namespace nano {

namespace {

constexpr const char* kMagic = "nano-checkpoint ";
constexpr const char* kSealKey = "hmac-sha256";
constexpr size_t kSealHex = 64;

bool all_hex(const std::string& s) { return s.find_first_not_of("0123456789abcdef") == std::string::npos; }

}  // namespace

std::string checkpoint_key_id(const std::string& key) {
  static const std::string kPurpose("nano-checkpoint-key", sizeof "nano-checkpoint-key");  // with its NUL
  const Digest d = sha256(kPurpose + key);
  return hex_of(std::string(d.begin(), d.begin() + 8));
}

std::string checkpoint_sealed_lines(const CheckpointHeader& h) {
  std::ostringstream out;
  out << kMagic << kCheckpointFormat << "\nstep " << h.step << "\nworld " << h.world << "\napi " << h.api << "\ntorch "
      << h.torch << "\nbytes " << std::setw(20) << std::setfill('0') << h.bytes << "\nkey " << h.key << "\nnonce "
      << h.nonce << "\n";
  return out.str();
}

std::string checkpoint_header(const CheckpointHeader& h) {
  const std::string seal = h.seal.size() == kSealHex ? h.seal : std::string(kSealHex, '0');
  return checkpoint_sealed_lines(h) + kSealKey + " " + seal + "\n\n";
}

int seal_threads() {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  const int n = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
  return std::clamp(n - 1, 1, 15);
}

PayloadSource payload_in_file(int fd, uint64_t payload_at) {
  return [fd, payload_at](uint64_t at, size_t n, std::vector<char>& scratch) -> const char* {
    scratch.resize(n);
    return read_at(fd, scratch.data(), n, payload_at + at) == n ? scratch.data() : nullptr;
  };
}

Tag checkpoint_chunk_tag(const std::string& key, const CheckpointHeader& h, uint64_t index, std::size_t n,
                         const PayloadSource& source, std::vector<char>& scratch) {
  // A key of the chunks' own (with its NUL, a purpose apart from every other HMAC of the key), and
  // an IV never used twice: the checkpoint's random nonce and the chunk's index.
  const Digest k = hmac_sha256(key, std::string("nano-checkpoint-chunk-key", sizeof "nano-checkpoint-chunk-key"));
  std::string iv = bytes_of_hex(h.nonce).value_or("");
  iv.resize(8, '\0');
  for (int b = 3; b >= 0; --b) iv += static_cast<char>((index >> (8 * b)) & 0xff);
  Gmac mac(std::string(k.begin(), k.end()), iv);
  const uint64_t from = index * kSealChunk, to = from + n;
  for (uint64_t at = from; at < to;) {
    const size_t piece = static_cast<size_t>(std::min<uint64_t>(kSealPiece, to - at));
    const char* data = source(at, piece, scratch);
    if (!data) throw Error("chunk " + std::to_string(index) + " unreadable");
    mac.update(data, piece);
    at += piece;
  }
  return mac.tag();
}

std::string checkpoint_seal_of(const std::string& key, const CheckpointHeader& h, const std::vector<Tag>& tags) {
  Hmac seal(key);
  seal.update("nano-checkpoint", sizeof "nano-checkpoint").update(checkpoint_sealed_lines(h));
  for (const Tag& t : tags) seal.update(t.data(), t.size());
  const Digest d = seal.digest();
  return hex_of(std::string(d.begin(), d.end()));
}

bool parse_checkpoint_header(const std::string& text, CheckpointHeader& h) {
  if (text.compare(0, strlen(kMagic), kMagic) != 0) return false;
  const size_t end = text.find("\n\n");
  if (end == std::string::npos || end + 2 > kMaxCheckpointHeader) return false;
  std::istringstream in(text.substr(0, end));
  std::string line;
  std::getline(in, line);
  const std::string version = line.substr(strlen(kMagic));
  if (version == "1" || version == "2" || version == std::to_string(kCheckpointFormat))
    h.format = std::stoi(version);
  else
    return false;
  while (std::getline(in, line)) {
    std::istringstream kv(line);
    std::string key;
    kv >> key;
    if (key == "step")
      kv >> h.step;
    else if (key == "world")
      kv >> h.world;
    else if (key == "api")
      kv >> h.api;
    else if (key == "torch")
      kv >> h.torch;
    else if (key == "bytes")
      kv >> h.bytes;
    else if (key == "key")
      kv >> h.key;
    else if (key == "nonce")
      kv >> h.nonce;
    else if (key == kSealKey)
      kv >> h.seal;
  }
  h.payload_at = end + 2;
  if (h.step < 0 || h.world <= 0) return false;
  // Earlier formats are recognised to be named, never loaded: their fields beyond these do not matter.
  return h.format != kCheckpointFormat ||
         (h.seal.size() == kSealHex && all_hex(h.seal) && !h.api.empty() && h.nonce.size() == 16 && all_hex(h.nonce));
}

std::string checkpoint_file_name(int64_t step) {
  char name[32];
  snprintf(name, sizeof name, "ckpt-%012lld.nano", static_cast<long long>(step));
  return name;
}

std::string checkpoint_file_name(int64_t step, const std::string& tag) {
  char name[48];
  snprintf(name, sizeof name, "ckpt-%012lld.%s.nano", static_cast<long long>(step), tag.c_str());
  return name;
}

std::optional<int64_t> checkpoint_step_of(const std::string& name) {
  // "ckpt-" 12 digits ".nano", or "ckpt-" 12 digits "." 8 hex digits ".nano".
  if (name.size() != 22 && name.size() != 31) return std::nullopt;
  if (name.compare(0, 5, "ckpt-") != 0 || name.compare(name.size() - 5, 5, ".nano") != 0) return std::nullopt;
  const std::string digits = name.substr(5, 12);
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) return std::nullopt;
  if (name.size() == 31 && (name[17] != '.' || !all_hex(name.substr(18, 8)))) return std::nullopt;
  return std::stoll(digits);
}

std::vector<std::string> checkpoints_to_prune(std::vector<CheckpointFile> files, int keep) {
  // Stable: of one step's files, the order given (the later written first) is kept.
  std::stable_sort(files.begin(), files.end(), [](const auto& a, const auto& b) { return a.step > b.step; });
  std::vector<std::string> out;
  int newer_verified = 0;
  for (const CheckpointFile& f : files) {
    if (!f.verified) continue;
    if (newer_verified >= keep) out.push_back(f.path);
    ++newer_verified;
  }
  return out;
}

void write_at(int fd, const void* data, size_t n, uint64_t at) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = pwrite(fd, p, n, static_cast<off_t>(at));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) throw Error(w < 0 ? strerror(errno) : "short write");
    p += w;
    at += static_cast<uint64_t>(w);
    n -= static_cast<size_t>(w);
  }
}

size_t read_at(int fd, void* buffer, size_t n, uint64_t at) {
  size_t done = 0;
  while (done < n) {
    const ssize_t got = pread(fd, static_cast<char*>(buffer) + done, n - done, static_cast<off_t>(at + done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    done += static_cast<size_t>(got);
  }
  return done;
}

}  // namespace nano
