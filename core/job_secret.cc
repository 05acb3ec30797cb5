#include "core/job_secret.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <nano/error.h>
#include "core/mac.h"

namespace nano {
namespace {

std::string random_bytes(size_t count) {
  std::string bytes(count, '\0');
  size_t got = 0;
  while (got < count) {
    const ssize_t n = getrandom(&bytes[got], count - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(std::string("nano: cannot read random bytes from the kernel: ") + std::strerror(errno));
    got += static_cast<size_t>(n);
  }
  return bytes;
}

}  // namespace

std::string hex_of(const std::string& bytes) {
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : bytes) {
    hex += kHex[c >> 4];
    hex += kHex[c & 15];
  }
  return hex;
}

std::optional<std::string> bytes_of_hex(const std::string& hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  const auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string bytes;
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int high = digit(hex[i]), low = digit(hex[i + 1]);
    if (high < 0 || low < 0) return std::nullopt;
    bytes += static_cast<char>(high * 16 + low);
  }
  return bytes;
}

std::string make_job_secret() { return hex_of(random_bytes(32)); }

std::string make_challenge() { return random_bytes(16); }

std::string answer_challenge(const std::string& secret, const std::string& purpose, const std::string& challenge) {
  std::string message = purpose;
  message += '\0';
  message += challenge;
  const auto digest = hmac_sha256(secret, message);
  return std::string(digest.begin(), digest.end());
}

bool is_right_answer(const std::string& answer, const std::string& secret, const std::string& purpose,
                     const std::string& challenge) {
  return equal_in_constant_time(answer, answer_challenge(secret, purpose, challenge));
}

std::string job_secret_from_environment() {
  const char* secret = std::getenv(kJobSecretVariable);
  return secret ? secret : "";
}

}  // namespace nano
