#pragma once
// Gzip decompression and IDX (the MNIST file format) parsing, kept free of torch so it is
// tested on small in-memory files.
#include <cstdint>
#include <string>
#include <vector>

namespace nano::examples {

/// Decompresses a whole gzip stream held in memory. `name` (a file path) is only used in
/// error messages. Throws nano::Error "<name>: not a gzip file ..." or
/// "<name>: truncated gzip stream ..." when the bytes are not one complete gzip member.
std::string gunzip(const std::string& compressed, const std::string& name);

/// Reads a file into memory. Throws nano::Error "cannot open <path>: <reason>".
std::string read_file_bytes(const std::string& path);

/// An IDX array of unsigned bytes: its dimensions (outermost first) and its raw data.
struct IdxArray {
  std::vector<int64_t> dims;
  std::string data;  ///< product(dims) bytes, row-major
};

/// IDX magic numbers of unsigned-byte arrays: 0x00000801 for 1-D (labels), 0x00000803 for
/// 3-D (images).
constexpr uint32_t kIdxLabelsMagic = 0x00000801;
constexpr uint32_t kIdxImagesMagic = 0x00000803;

/// Parses decompressed IDX bytes, requiring the magic number `expected_magic` (which fixes
/// the element type, unsigned byte, and the number of dimensions) and exactly as many data
/// bytes as the header announces. Throws nano::Error naming `name` and the offending value:
///   "<name>: bad IDX magic number 0x00000801, expected 0x00000803"
///   "<name>: truncated IDX header: 8 bytes, need 16"
///   "<name>: truncated IDX data: header says 2x28x28 = 1568 bytes, file has 100"
///   "<name>: 3 bytes of trailing data after 1568 bytes of IDX data"
IdxArray parse_idx(const std::string& bytes, const std::string& name, uint32_t expected_magic);

/// Builds IDX bytes (header + data) for an unsigned-byte array; the inverse of parse_idx,
/// used to write test files.
std::string make_idx(const std::vector<int64_t>& dims, const std::string& data);

/// Compresses bytes into one gzip member (for tests and tools).
std::string gzip(const std::string& raw);

}  // namespace nano::examples
