#include "examples/common/idx.h"

#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include <nano/error.h>

namespace nano::examples {
namespace {

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

uint32_t read_be32(const std::string& bytes, size_t offset) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data()) + offset;
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

void append_be32(std::string& out, uint32_t v) {
  out.push_back(static_cast<char>((v >> 24) & 0xff));
  out.push_back(static_cast<char>((v >> 16) & 0xff));
  out.push_back(static_cast<char>((v >> 8) & 0xff));
  out.push_back(static_cast<char>(v & 0xff));
}

}  // namespace

std::string gunzip(const std::string& compressed, const std::string& name) {
  z_stream zs{};
  // 16 + MAX_WBITS: accept only the gzip wrapper, so a plain file is reported, not passed on.
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) throw Error(name + ": cannot start zlib");
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  zs.avail_in = static_cast<uInt>(compressed.size());
  std::string out;
  char chunk[1 << 16];
  int rc = Z_OK;
  while (rc == Z_OK) {
    zs.next_out = reinterpret_cast<Bytef*>(chunk);
    zs.avail_out = sizeof chunk;
    rc = inflate(&zs, Z_NO_FLUSH);
    out.append(chunk, sizeof chunk - zs.avail_out);
    // Z_BUF_ERROR with input left over cannot happen here (output space was given), so it
    // means the input ended before the stream did.
  }
  const std::string msg = zs.msg ? zs.msg : "";
  inflateEnd(&zs);
  if (rc == Z_STREAM_END) return out;
  if (rc == Z_BUF_ERROR)
    throw Error(name + ": truncated gzip stream (" + std::to_string(compressed.size()) +
                " bytes read, stream not finished)");
  throw Error(name + ": not a gzip file or corrupt gzip data (" +
              (msg.empty() ? "zlib error " + std::to_string(rc) : msg) + ")");
}

std::string read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open " + path + ": " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw Error("cannot read " + path + ": " + std::strerror(errno));
  return ss.str();
}

IdxArray parse_idx(const std::string& bytes, const std::string& name, uint32_t expected_magic) {
  if (bytes.size() < 4)
    throw Error(name + ": truncated IDX header: " + std::to_string(bytes.size()) + " bytes, need at least 4");
  const uint32_t magic = read_be32(bytes, 0);
  if (magic != expected_magic)
    throw Error(name + ": bad IDX magic number " + hex32(magic) + ", expected " + hex32(expected_magic));
  const size_t ndims = magic & 0xff;
  const size_t header = 4 + 4 * ndims;
  if (bytes.size() < header)
    throw Error(name + ": truncated IDX header: " + std::to_string(bytes.size()) + " bytes, need " +
                std::to_string(header));
  IdxArray arr;
  int64_t count = 1;
  std::string shape;
  for (size_t d = 0; d < ndims; ++d) {
    const int64_t n = read_be32(bytes, 4 + 4 * d);
    arr.dims.push_back(n);
    count *= n;
    shape += (d ? "x" : "") + std::to_string(n);
  }
  const size_t have = bytes.size() - header;
  if (have < static_cast<size_t>(count))
    throw Error(name + ": truncated IDX data: header says " + shape + " = " + std::to_string(count) +
                " bytes, file has " + std::to_string(have));
  if (have > static_cast<size_t>(count))
    throw Error(name + ": " + std::to_string(have - count) + " bytes of trailing data after " + std::to_string(count) +
                " bytes of IDX data");
  arr.data = bytes.substr(header);
  return arr;
}

std::string make_idx(const std::vector<int64_t>& dims, const std::string& data) {
  std::string out;
  append_be32(out, 0x00000800u | static_cast<uint32_t>(dims.size()));
  for (int64_t d : dims) append_be32(out, static_cast<uint32_t>(d));
  return out + data;
}

std::string gzip(const std::string& raw) {
  z_stream zs{};
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw Error("gzip: cannot start zlib");
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()));
  zs.avail_in = static_cast<uInt>(raw.size());
  std::string out;
  char chunk[1 << 16];
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    zs.next_out = reinterpret_cast<Bytef*>(chunk);
    zs.avail_out = sizeof chunk;
    rc = deflate(&zs, Z_FINISH);
    if (rc == Z_STREAM_ERROR) {
      deflateEnd(&zs);
      throw Error("gzip: zlib deflate failed");
    }
    out.append(chunk, sizeof chunk - zs.avail_out);
  }
  deflateEnd(&zs);
  return out;
}

}  // namespace nano::examples
