#include "examples/common/fashion_mnist.h"

#include <cstring>

#include <nano/error.h>
#include "examples/common/idx.h"

namespace nano::examples {

std::string fashion_mnist_images_file(Split split) {
  return split == Split::kTrain ? "train-images-idx3-ubyte.gz" : "t10k-images-idx3-ubyte.gz";
}

std::string fashion_mnist_labels_file(Split split) {
  return split == Split::kTrain ? "train-labels-idx1-ubyte.gz" : "t10k-labels-idx1-ubyte.gz";
}

FashionMnistTensors decode_fashion_mnist(const std::string& images_gz, const std::string& images_name,
                                         const std::string& labels_gz, const std::string& labels_name) {
  const IdxArray images = parse_idx(gunzip(images_gz, images_name), images_name, kIdxImagesMagic);
  const IdxArray labels = parse_idx(gunzip(labels_gz, labels_name), labels_name, kIdxLabelsMagic);
  if (images.dims[1] != 28 || images.dims[2] != 28)
    throw Error(images_name + ": images are " + std::to_string(images.dims[1]) + "x" + std::to_string(images.dims[2]) +
                ", expected 28x28");
  if (images.dims[0] != labels.dims[0])
    throw Error(images_name + " has " + std::to_string(images.dims[0]) + " images but " + labels_name + " has " +
                std::to_string(labels.dims[0]) + " labels");
  const int64_t n = labels.dims[0];
  for (int64_t i = 0; i < n; ++i) {
    const auto label = static_cast<unsigned char>(labels.data[i]);
    if (label > 9)
      throw Error(labels_name + ": label " + std::to_string(label) + " at index " + std::to_string(i) +
                  " is outside 0..9");
  }
  FashionMnistTensors out;
  out.images = at::empty({n, 28, 28}, at::kByte);
  std::memcpy(out.images.data_ptr(), images.data.data(), images.data.size());
  out.labels = at::empty({n}, at::kByte);
  std::memcpy(out.labels.data_ptr(), labels.data.data(), labels.data.size());
  out.labels = out.labels.to(at::kLong);
  return out;
}

FashionMnistTensors load_fashion_mnist(const std::string& dir, Split split) {
  const std::string folder = dir.empty() ? kFashionMnistDefaultDir : dir;
  const std::string images_path = folder + "/" + fashion_mnist_images_file(split);
  const std::string labels_path = folder + "/" + fashion_mnist_labels_file(split);
  auto read = [](const std::string& path) {
    try {
      return read_file_bytes(path);
    } catch (const Error& e) {
      throw Error(std::string(e.what()) + " (Fashion-MNIST: install dataset-fashion-mnist or pass --data-dir)");
    }
  };
  const std::string images_gz = read(images_path);
  const std::string labels_gz = read(labels_path);
  return decode_fashion_mnist(images_gz, images_path, labels_gz, labels_path);
}

FashionMnist::FashionMnist(const std::string& dir, Split split) : FashionMnist(load_fashion_mnist(dir, split)) {}

FashionMnist::FashionMnist(const FashionMnistTensors& raw)
    : images_(raw.images.to(at::kFloat).div_(255.0).sub_(kFashionMnistMean).div_(kFashionMnistStd).unsqueeze(1)),
      labels_(raw.labels) {}

torch::data::Example<> FashionMnist::get(size_t index) {
  const auto i = static_cast<int64_t>(index);
  return {images_[i], labels_[i]};
}

c10::optional<size_t> FashionMnist::size() const { return static_cast<size_t>(labels_.size(0)); }

}  // namespace nano::examples
