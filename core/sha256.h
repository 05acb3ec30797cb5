#pragma once
// SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), for the challenges of the job's secret
// (core/job_secret.h): small enough to keep here rather than load a crypto library into nano-run,
// every rank shim and every rank (a few milliseconds per process start). Checked against FIPS
// 180-4's and RFC 4231's test vectors (tests/core/job_secret_test.cc).
#include <array>
#include <cstdint>
#include <string>

namespace nano {

/// Pure: the SHA-256 digest of `message` (32 bytes).
std::array<uint8_t, 32> sha256(const std::string& message);

/// Pure: HMAC-SHA256 of `message` under `key` (32 bytes).
std::array<uint8_t, 32> hmac_sha256(const std::string& key, const std::string& message);

}  // namespace nano
