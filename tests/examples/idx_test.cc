#include "examples/common/idx.h"

#include <doctest/doctest.h>

#include <functional>

#include <nano/error.h>
#include "tests/common/error_of.h"

using namespace nano::examples;
using nano::test::error_of;

namespace {

std::string bytes_0_to(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s.push_back(static_cast<char>(i % 10));
  return s;
}

}  // namespace

TEST_CASE("gzip round trip through gunzip") {
  const std::string raw = make_idx({3, 2, 2}, bytes_0_to(12));
  CHECK(gunzip(gzip(raw), "x.gz") == raw);
  CHECK(gunzip(gzip(""), "empty.gz").empty());
  const std::string big(300000, 'a');  // larger than one inflate chunk
  CHECK(gunzip(gzip(big), "big.gz") == big);
}

TEST_CASE("gunzip rejects non-gzip and truncated streams") {
  CHECK(error_of([] { gunzip("plain text, not gzip", "/d/a.gz"); }) ==
        "/d/a.gz: not a gzip file or corrupt gzip data (incorrect header check)");
  const std::string gz = gzip(std::string(1000, 'x'));
  const std::string cut = gz.substr(0, gz.size() / 2);
  CHECK(error_of([&] { gunzip(cut, "/d/b.gz"); }) ==
        "/d/b.gz: truncated gzip stream (" + std::to_string(cut.size()) + " bytes read, stream not finished)");
  CHECK(error_of([] { gunzip("", "/d/c.gz"); }) ==
        "/d/c.gz: truncated gzip stream (0 bytes read, stream not finished)");
}

TEST_CASE("parse_idx reads header and data") {
  const IdxArray a = parse_idx(make_idx({2, 3, 2}, bytes_0_to(12)), "img", kIdxImagesMagic);
  CHECK(a.dims == std::vector<int64_t>{2, 3, 2});
  CHECK(a.data == bytes_0_to(12));
  const IdxArray l = parse_idx(make_idx({4}, bytes_0_to(4)), "lab", kIdxLabelsMagic);
  CHECK(l.dims == std::vector<int64_t>{4});
  CHECK(l.data == bytes_0_to(4));
}

TEST_CASE("parse_idx errors name the file and the value") {
  struct Row {
    std::string bytes;
    uint32_t magic;
    std::string error;
  };
  const std::string images = make_idx({2, 28, 28}, bytes_0_to(2 * 28 * 28));
  const Row rows[] = {
      {make_idx({5}, bytes_0_to(5)), kIdxImagesMagic, "f.idx: bad IDX magic number 0x00000801, expected 0x00000803"},
      {images, kIdxLabelsMagic, "f.idx: bad IDX magic number 0x00000803, expected 0x00000801"},
      {std::string("\x00\x00\x09\x01", 4) + std::string(4, '\0'), kIdxLabelsMagic,
       "f.idx: bad IDX magic number 0x00000901, expected 0x00000801"},
      {"ab", kIdxLabelsMagic, "f.idx: truncated IDX header: 2 bytes, need at least 4"},
      {images.substr(0, 8), kIdxImagesMagic, "f.idx: truncated IDX header: 8 bytes, need 16"},
      {images.substr(0, 116), kIdxImagesMagic,
       "f.idx: truncated IDX data: header says 2x28x28 = 1568 bytes, file has 100"},
      {images + "xyz", kIdxImagesMagic, "f.idx: 3 bytes of trailing data after 1568 bytes of IDX data"},
  };
  for (const Row& r : rows) {
    CAPTURE(r.error);
    CHECK(error_of([&] { parse_idx(r.bytes, "f.idx", r.magic); }) == r.error);
  }
}

TEST_CASE("read_file_bytes names a missing file") {
  CHECK(error_of([] { read_file_bytes("/nonexistent-h4/x.gz"); }) ==
        "cannot open /nonexistent-h4/x.gz: No such file or directory");
}
