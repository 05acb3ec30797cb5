#include "core/mac.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <nano/error.h>

namespace nano {

namespace {

[[noreturn]] void fail(const char* what) { throw Error(std::string("nano: libcrypto failed to ") + what); }

// One MAC of libcrypto's EVP_MAC interface (OpenSSL 3, Debian 12 and 13), keyed and started:
// HMAC and GMAC differ only in their name and parameters.
class EvpMac {
 public:
  EvpMac(const char* name, const OSSL_PARAM* params, const std::string& key) {
    mac_ = EVP_MAC_fetch(nullptr, name, nullptr);
    ctx_ = mac_ ? EVP_MAC_CTX_new(mac_) : nullptr;
    // A key of no bytes is still a key to HMAC; libcrypto wants a pointer all the same.
    static const unsigned char kNoKey = 0;
    const auto* k = key.empty() ? &kNoKey : reinterpret_cast<const unsigned char*>(key.data());
    if (!ctx_ || EVP_MAC_init(ctx_, k, key.size(), params) != 1) fail((std::string("start a ") + name).c_str());
  }
  ~EvpMac() {
    EVP_MAC_CTX_free(ctx_);
    EVP_MAC_free(mac_);
  }
  EvpMac(const EvpMac&) = delete;
  EvpMac& operator=(const EvpMac&) = delete;
  void update(const void* data, std::size_t n) {
    if (n > 0 && EVP_MAC_update(ctx_, static_cast<const unsigned char*>(data), n) != 1) fail("update a MAC");
  }
  /// The MAC, exactly out.size() bytes of it.
  template <class Out>
  Out final() {
    Out out{};
    size_t n = 0;
    if (EVP_MAC_final(ctx_, out.data(), &n, out.size()) != 1 || n != out.size()) fail("finish a MAC");
    return out;
  }

 private:
  EVP_MAC* mac_ = nullptr;
  EVP_MAC_CTX* ctx_ = nullptr;
};

}  // namespace

struct Hmac::State : EvpMac {
  using EvpMac::EvpMac;
};

Hmac::Hmac(const std::string& key) {
  char digest[] = "SHA256";
  const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string("digest", digest, 0), OSSL_PARAM_construct_end()};
  state_ = std::make_unique<State>("HMAC", params, key);
}

Hmac::~Hmac() = default;

Hmac& Hmac::update(const void* data, std::size_t n) {
  state_->update(data, n);
  return *this;
}

Digest Hmac::digest() { return state_->final<Digest>(); }

Digest hmac_sha256(const std::string& key, const std::string& message) { return Hmac(key).update(message).digest(); }

Digest sha256(const std::string& message) {
  Digest out{};
  unsigned int n = 0;
  if (EVP_Digest(message.data(), message.size(), out.data(), &n, EVP_sha256(), nullptr) != 1 || n != out.size())
    fail("hash with SHA-256");
  return out;
}

struct Gmac::State : EvpMac {
  using EvpMac::EvpMac;
};

Gmac::Gmac(const std::string& key, const std::string& iv) {
  if (key.size() != 32 || iv.size() != 12) fail("start a GMAC (a 32-byte key and a 12-byte iv)");
  char cipher[] = "AES-256-GCM";
  std::string iv_copy = iv;
  const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string("cipher", cipher, 0),
                               OSSL_PARAM_construct_octet_string("iv", iv_copy.data(), iv_copy.size()),
                               OSSL_PARAM_construct_end()};
  state_ = std::make_unique<State>("GMAC", params, key);
}

Gmac::~Gmac() = default;

Gmac& Gmac::update(const void* data, std::size_t n) {
  state_->update(data, n);
  return *this;
}

Tag Gmac::tag() { return state_->final<Tag>(); }

bool equal_in_constant_time(const std::string& a, const std::string& b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace nano
