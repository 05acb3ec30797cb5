#pragma once
// Fashion-MNIST read straight from Debian's dataset-fashion-mnist files (gzip'd IDX).
#include <torch/data/datasets/base.h>
#include <torch/data/example.h>

#include <ATen/ATen.h>

#include <cstdint>
#include <string>

namespace nano::examples {

/// Where Debian's dataset-fashion-mnist package installs the four .gz files.
inline constexpr const char* kFashionMnistDefaultDir = "/usr/share/datasets/fashion-mnist";

/// Which half of Fashion-MNIST to read.
enum class Split { kTrain, kTest };

/// The two file names of a split, e.g. "train-images-idx3-ubyte.gz".
std::string fashion_mnist_images_file(Split split);
std::string fashion_mnist_labels_file(Split split);

/// Mean and standard deviation of the training images' pixels scaled to [0, 1].
inline constexpr double kFashionMnistMean = 0.2860;
inline constexpr double kFashionMnistStd = 0.3530;

/// Raw decoded split: uint8 images [N, 28, 28] and int64 labels [N].
struct FashionMnistTensors {
  at::Tensor images;
  at::Tensor labels;
};

/// Decodes one split from gzip'd IDX bytes (the file contents); `images_name` and
/// `labels_name` are used in errors. Validates magic numbers, 28x28 image size, equal counts
/// and labels in 0..9; throws nano::Error naming the file and the bad value, e.g.
/// "<labels_name>: label 12 at index 3 is outside 0..9".
FashionMnistTensors decode_fashion_mnist(const std::string& images_gz, const std::string& images_name,
                                         const std::string& labels_gz, const std::string& labels_name);

/// Reads and decodes one split from `dir` (empty = kFashionMnistDefaultDir). A missing file
/// throws nano::Error "cannot open <path>: No such file or directory (Fashion-MNIST: install
/// dataset-fashion-mnist or pass --data-dir)".
FashionMnistTensors load_fashion_mnist(const std::string& dir, Split split);

/// A torch dataset over one split: each example is a normalised float image [1, 28, 28]
/// ((x/255 - mean) / std) and an int64 scalar label in 0..9.
class FashionMnist : public torch::data::datasets::Dataset<FashionMnist> {
 public:
  /// Loads the split from `dir` (empty = default); throws as load_fashion_mnist.
  FashionMnist(const std::string& dir, Split split);
  /// Wraps already-decoded tensors (uint8 [N,28,28], int64 [N]).
  explicit FashionMnist(const FashionMnistTensors& raw);

  torch::data::Example<> get(size_t index) override;
  c10::optional<size_t> size() const override;

  /// All normalised images [N, 1, 28, 28] and labels [N], for fast whole-set evaluation.
  const at::Tensor& images() const { return images_; }
  const at::Tensor& labels() const { return labels_; }

 private:
  at::Tensor images_;
  at::Tensor labels_;
};

}  // namespace nano::examples
