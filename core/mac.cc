#include "core/mac.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <nano/error.h>

namespace nano {

namespace {

[[noreturn]] void fail(const char* what) { throw Error(std::string("nano: libcrypto failed to ") + what); }

}  // namespace

// EVP_MAC (OpenSSL 3, Debian 12 and 13): the HMAC of one digest, its context made per message.
struct Hmac::State {
  EVP_MAC* mac = nullptr;
  EVP_MAC_CTX* ctx = nullptr;
  ~State() {
    EVP_MAC_CTX_free(ctx);
    EVP_MAC_free(mac);
  }
};

Hmac::Hmac(const std::string& key) : state_(std::make_unique<State>()) {
  state_->mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  if (!state_->mac) fail("fetch HMAC");
  state_->ctx = EVP_MAC_CTX_new(state_->mac);
  if (!state_->ctx) fail("make an HMAC context");
  char digest[] = "SHA256";
  const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string("digest", digest, 0), OSSL_PARAM_construct_end()};
  // A key of no bytes is still a key to HMAC; libcrypto wants a pointer all the same.
  static const unsigned char kNoKey = 0;
  const auto* k = key.empty() ? &kNoKey : reinterpret_cast<const unsigned char*>(key.data());
  if (EVP_MAC_init(state_->ctx, k, key.size(), params) != 1) fail("start an HMAC-SHA256");
}

Hmac::~Hmac() = default;

Hmac& Hmac::update(const void* data, std::size_t n) {
  if (n > 0 && EVP_MAC_update(state_->ctx, static_cast<const unsigned char*>(data), n) != 1) fail("update an HMAC");
  return *this;
}

Digest Hmac::digest() {
  Digest out{};
  size_t n = 0;
  if (EVP_MAC_final(state_->ctx, out.data(), &n, out.size()) != 1 || n != out.size()) fail("finish an HMAC");
  return out;
}

Digest hmac_sha256(const std::string& key, const std::string& message) { return Hmac(key).update(message).digest(); }

Digest sha256(const std::string& message) {
  Digest out{};
  unsigned int n = 0;
  if (EVP_Digest(message.data(), message.size(), out.data(), &n, EVP_sha256(), nullptr) != 1 || n != out.size())
    fail("hash with SHA-256");
  return out;
}

struct Gmac::State {
  EVP_MAC* mac = nullptr;
  EVP_MAC_CTX* ctx = nullptr;
  ~State() {
    EVP_MAC_CTX_free(ctx);
    EVP_MAC_free(mac);
  }
};

Gmac::Gmac(const std::string& key, const std::string& iv) : state_(std::make_unique<State>()) {
  if (key.size() != 32 || iv.size() != 12) fail("start a GMAC (a 32-byte key and a 12-byte iv)");
  state_->mac = EVP_MAC_fetch(nullptr, "GMAC", nullptr);
  if (!state_->mac) fail("fetch GMAC");
  state_->ctx = EVP_MAC_CTX_new(state_->mac);
  if (!state_->ctx) fail("make a GMAC context");
  char cipher[] = "AES-256-GCM";
  std::string iv_copy = iv;
  const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string("cipher", cipher, 0),
                               OSSL_PARAM_construct_octet_string("iv", iv_copy.data(), iv_copy.size()),
                               OSSL_PARAM_construct_end()};
  if (EVP_MAC_init(state_->ctx, reinterpret_cast<const unsigned char*>(key.data()), key.size(), params) != 1)
    fail("start a GMAC");
}

Gmac::~Gmac() = default;

Gmac& Gmac::update(const void* data, std::size_t n) {
  if (n > 0 && EVP_MAC_update(state_->ctx, static_cast<const unsigned char*>(data), n) != 1) fail("update a GMAC");
  return *this;
}

Tag Gmac::tag() {
  Tag out{};
  size_t len = 0;
  if (EVP_MAC_final(state_->ctx, out.data(), &len, out.size()) != 1 || len != out.size()) fail("finish a GMAC");
  return out;
}

bool equal_in_constant_time(const std::string& a, const std::string& b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace nano
