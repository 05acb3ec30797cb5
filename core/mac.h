#pragma once
// SHA-256, HMAC-SHA256 and GMAC from OpenSSL's libcrypto (a maintained library, with the CPU's SHA,
// AES and carry-less multiply instructions where it has them): the job secret's challenges
// (core/job_secret.h) and the seal of every checkpoint
// (runtime/checkpoint_files/checkpoint_format.h). nano has no hash or MAC of its own.
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace nano {

/// A SHA-256 or HMAC-SHA256 digest.
using Digest = std::array<uint8_t, 32>;

/// Pure: the SHA-256 digest of `message`.
Digest sha256(const std::string& message);

/// Pure: HMAC-SHA256 of `message` under `key`.
Digest hmac_sha256(const std::string& key, const std::string& message);

/// HMAC-SHA256 over a message given in pieces (a checkpoint's payload, read or written in
/// chunks): update() as often as needed, then digest() once. Throws Error when libcrypto fails.
class Hmac {
 public:
  explicit Hmac(const std::string& key);
  ~Hmac();
  Hmac(const Hmac&) = delete;
  Hmac& operator=(const Hmac&) = delete;
  Hmac& update(const void* data, std::size_t n);
  Hmac& update(const std::string& data) { return update(data.data(), data.size()); }
  Digest digest();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

/// A GMAC tag.
using Tag = std::array<uint8_t, 16>;

/// GMAC (AES-256-GCM over the message as authenticated data, nothing encrypted) under a 32-byte
/// key with a 12-byte IV, which must never repeat under one key, over a message given in pieces.
/// With the CPU's AES and carry-less multiply instructions it runs at several GB/s a core, a few
/// times HMAC-SHA256's speed: what seals a checkpoint's bulk. Throws Error when libcrypto fails.
class Gmac {
 public:
  Gmac(const std::string& key, const std::string& iv);
  ~Gmac();
  Gmac(const Gmac&) = delete;
  Gmac& operator=(const Gmac&) = delete;
  Gmac& update(const void* data, std::size_t n);
  Tag tag();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

/// Pure: whether `a` and `b` are equal, every byte looked at whatever the first difference (the
/// time taken tells nothing of where they differ).
bool equal_in_constant_time(const std::string& a, const std::string& b);

}  // namespace nano
