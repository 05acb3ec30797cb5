#include "examples/common/fashion_mnist.h"

#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <functional>

#include <unistd.h>

#include <nano/error.h>
#include "examples/common/idx.h"
#include "tests/common/error_of.h"

using namespace nano::examples;
using nano::test::error_of;

namespace {

std::string images_gz(int n, int rows = 28, int cols = 28) {
  std::string data(static_cast<size_t>(n * rows * cols), '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i % 256);
  return gzip(make_idx({n, rows, cols}, data));
}

std::string labels_gz(const std::string& labels) {
  return gzip(make_idx({static_cast<int64_t>(labels.size())}, labels));
}

// A scratch folder removed at the end of the test.
struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/nano-fmnist-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() {
    for (const char* f : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"})
      std::remove((path + "/" + f).c_str());
    ::rmdir(path.c_str());
  }
  void write(const std::string& name, const std::string& bytes) const {
    std::ofstream(path + "/" + name, std::ios::binary) << bytes;
  }
};

}  // namespace

TEST_CASE("decode_fashion_mnist on generated files") {
  const std::string labels("\x00\x09\x03", 3);
  const FashionMnistTensors t = decode_fashion_mnist(images_gz(3), "i.gz", labels_gz(labels), "l.gz");
  CHECK((t.images.sizes() == at::IntArrayRef{3, 28, 28}));
  CHECK((t.labels.scalar_type() == at::kLong));
  CHECK(t.labels[1].item<int64_t>() == 9);
  CHECK(t.images[0][0][5].item<int64_t>() == 5);

  FashionMnist ds(t);
  CHECK(*ds.size() == 3);
  const auto ex = ds.get(0);
  CHECK((ex.data.sizes() == at::IntArrayRef{1, 28, 28}));
  CHECK((ex.data.scalar_type() == at::kFloat));
  CHECK(ex.data[0][0][0].item<double>() == doctest::Approx((0.0 - kFashionMnistMean) / kFashionMnistStd));
  CHECK(ex.data[0][0][255 % 28].item<double>() ==
        doctest::Approx(((255 % 28) / 255.0 - kFashionMnistMean) / kFashionMnistStd).epsilon(1e-5));
  CHECK(ds.get(2).target.item<int64_t>() == 3);
}

TEST_CASE("decode_fashion_mnist validation errors") {
  CHECK(error_of([] { decode_fashion_mnist(images_gz(2), "i.gz", labels_gz(std::string("\x01\x0c", 2)), "l.gz"); }) ==
        "l.gz: label 12 at index 1 is outside 0..9");
  CHECK(error_of([] {
          decode_fashion_mnist(images_gz(2), "i.gz", labels_gz(std::string("\x01\x02\x03", 3)), "l.gz");
        }) == "i.gz has 2 images but l.gz has 3 labels");
  CHECK(error_of([] { decode_fashion_mnist(images_gz(2, 32, 32), "i.gz", labels_gz("\x01\x02"), "l.gz"); }) ==
        "i.gz: images are 32x32, expected 28x28");
  CHECK(error_of([] { decode_fashion_mnist(labels_gz("\x01\x02"), "i.gz", labels_gz("\x01\x02"), "l.gz"); }) ==
        "i.gz: bad IDX magic number 0x00000801, expected 0x00000803");
}

TEST_CASE("load_fashion_mnist reads a --data-dir and names missing or bad files") {
  TempDir dir;
  CHECK(error_of([&] { load_fashion_mnist(dir.path, Split::kTrain); }) ==
        "cannot open " + dir.path +
            "/train-images-idx3-ubyte.gz: No such file or directory (Fashion-MNIST: install dataset-fashion-mnist or "
            "pass --data-dir)");
  dir.write("train-images-idx3-ubyte.gz", images_gz(2));
  dir.write("train-labels-idx1-ubyte.gz", "not gzip");
  CHECK(error_of([&] { load_fashion_mnist(dir.path, Split::kTrain); }) ==
        dir.path + "/train-labels-idx1-ubyte.gz: not a gzip file or corrupt gzip data (incorrect header check)");
  dir.write("train-labels-idx1-ubyte.gz", labels_gz("\x04\x05"));
  const FashionMnistTensors t = load_fashion_mnist(dir.path, Split::kTrain);
  CHECK(t.labels.size(0) == 2);
  CHECK(t.labels[1].item<int64_t>() == 5);
}

TEST_CASE("the real Debian Fashion-MNIST loads: 60000 + 10000 images, labels 0..9") {
  for (const auto& [split, n] : {std::pair{Split::kTrain, 60000}, std::pair{Split::kTest, 10000}}) {
    const FashionMnistTensors t = load_fashion_mnist("", split);
    CHECK((t.images.sizes() == at::IntArrayRef{n, 28, 28}));
    CHECK(t.labels.size(0) == n);
    CHECK(t.labels.min().item<int64_t>() == 0);
    CHECK(t.labels.max().item<int64_t>() == 9);
    // Fashion-MNIST is balanced: every class has exactly a tenth of the examples.
    CHECK(at::bincount(t.labels).eq(n / 10).all().item<bool>());
  }
}
