#pragma once
// The example models: a LeNet-style CNN for 28x28 images and ResNet-18 for 3x32x32 images,
// plus a synthetic CIFAR-shaped dataset for throughput work.
#include <torch/data/datasets/base.h>
#include <torch/data/example.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace nano::examples {

/// LeNet-style CNN for 1x28x28 inputs, 10 classes, returning logits:
/// conv3x3(1->32) relu pool2 - conv3x3(32->64) relu pool2 - fc(3136->128) relu - dropout(0.25) -
/// fc(128->10). About 0.42 M parameters; cheap enough for CPU training.
class LeNetImpl : public torch::nn::Module {
 public:
  LeNetImpl();
  at::Tensor forward(const at::Tensor& x);

 private:
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr};
  torch::nn::Linear fc1_{nullptr}, fc2_{nullptr};
};
TORCH_MODULE(LeNet);

/// ResNet basic block: two 3x3 conv + batch-norm with an identity (or 1x1 projection)
/// shortcut.
class BasicBlockImpl : public torch::nn::Module {
 public:
  BasicBlockImpl(int64_t in_channels, int64_t out_channels, int64_t stride);
  at::Tensor forward(const at::Tensor& x);

 private:
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr}, shortcut_conv_{nullptr};
  torch::nn::BatchNorm2d bn1_{nullptr}, bn2_{nullptr}, shortcut_bn_{nullptr};
};
TORCH_MODULE(BasicBlock);

/// ResNet-18 for 3x32x32 inputs (CIFAR-style stem: one 3x3 conv, no max-pool), stages of
/// 64/128/256/512 channels with two basic blocks each, global average pool, fc to
/// `num_classes` logits. About 11.2 M parameters.
class ResNet18Impl : public torch::nn::Module {
 public:
  explicit ResNet18Impl(int64_t num_classes = 10);
  at::Tensor forward(const at::Tensor& x);

 private:
  torch::nn::Conv2d stem_conv_{nullptr};
  torch::nn::BatchNorm2d stem_bn_{nullptr};
  std::vector<BasicBlock> blocks_;
  torch::nn::Linear fc_{nullptr};
};
TORCH_MODULE(ResNet18);

/// Number of scalar parameters of a module (for logs and tests).
int64_t count_parameters(const torch::nn::Module& module);

/// Synthetic CIFAR-shaped data: `size` examples of a float image [3, 32, 32] drawn from
/// N(0, 1) and an int64 label in 0..9, deterministic in `seed`. Only `pool` distinct
/// examples are stored (example i is pool entry i % pool), so a large nominal size costs
/// little memory.
class SyntheticCifar : public torch::data::datasets::Dataset<SyntheticCifar> {
 public:
  SyntheticCifar(size_t size, uint64_t seed = 0, int64_t pool = 512);
  torch::data::Example<> get(size_t index) override;
  c10::optional<size_t> size() const override;

 private:
  size_t size_;
  at::Tensor images_;
  at::Tensor labels_;
};

}  // namespace nano::examples
