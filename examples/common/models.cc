#include "examples/common/models.h"

#include <ATen/CPUGeneratorImpl.h>

#include <string>

namespace nano::examples {
namespace {

torch::nn::Conv2dOptions conv3x3(int64_t in, int64_t out, int64_t stride = 1) {
  return torch::nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false);
}

}  // namespace

LeNetImpl::LeNetImpl()
    : conv1_(register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 32, 3).padding(1)))),
      conv2_(register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 64, 3).padding(1)))),
      fc1_(register_module("fc1", torch::nn::Linear(64 * 7 * 7, 128))),
      fc2_(register_module("fc2", torch::nn::Linear(128, 10))) {}

at::Tensor LeNetImpl::forward(const at::Tensor& x) {
  auto h = at::max_pool2d(at::relu(conv1_->forward(x)), {2, 2});
  h = at::max_pool2d(at::relu(conv2_->forward(h)), {2, 2});
  h = at::dropout(at::relu(fc1_->forward(h.flatten(1))), 0.25, is_training());
  return fc2_->forward(h);
}

BasicBlockImpl::BasicBlockImpl(int64_t in_channels, int64_t out_channels, int64_t stride)
    : conv1_(register_module("conv1", torch::nn::Conv2d(conv3x3(in_channels, out_channels, stride)))),
      conv2_(register_module("conv2", torch::nn::Conv2d(conv3x3(out_channels, out_channels)))),
      bn1_(register_module("bn1", torch::nn::BatchNorm2d(out_channels))),
      bn2_(register_module("bn2", torch::nn::BatchNorm2d(out_channels))) {
  if (stride != 1 || in_channels != out_channels) {
    shortcut_conv_ = register_module(
        "shortcut_conv",
        torch::nn::Conv2d(torch::nn::Conv2dOptions(in_channels, out_channels, 1).stride(stride).bias(false)));
    shortcut_bn_ = register_module("shortcut_bn", torch::nn::BatchNorm2d(out_channels));
  }
}

at::Tensor BasicBlockImpl::forward(const at::Tensor& x) {
  auto h = at::relu(bn1_->forward(conv1_->forward(x)));
  h = bn2_->forward(conv2_->forward(h));
  const auto shortcut = shortcut_conv_ ? shortcut_bn_->forward(shortcut_conv_->forward(x)) : x;
  return at::relu(h + shortcut);
}

ResNet18Impl::ResNet18Impl(int64_t num_classes)
    : stem_conv_(register_module("stem_conv", torch::nn::Conv2d(conv3x3(3, 64)))),
      stem_bn_(register_module("stem_bn", torch::nn::BatchNorm2d(64))) {
  const int64_t widths[] = {64, 128, 256, 512};
  int64_t in = 64;
  for (int stage = 0; stage < 4; ++stage) {
    for (int b = 0; b < 2; ++b) {
      const int64_t stride = (stage > 0 && b == 0) ? 2 : 1;
      blocks_.push_back(register_module("layer" + std::to_string(stage + 1) + "_" + std::to_string(b),
                                        BasicBlock(in, widths[stage], stride)));
      in = widths[stage];
    }
  }
  fc_ = register_module("fc", torch::nn::Linear(512, num_classes));
}

at::Tensor ResNet18Impl::forward(const at::Tensor& x) {
  auto h = at::relu(stem_bn_->forward(stem_conv_->forward(x)));
  for (auto& block : blocks_) h = block->forward(h);
  h = at::adaptive_avg_pool2d(h, {1, 1}).flatten(1);
  return fc_->forward(h);
}

int64_t count_parameters(const torch::nn::Module& module) {
  int64_t n = 0;
  for (const auto& p : module.parameters()) n += p.numel();
  return n;
}

SyntheticCifar::SyntheticCifar(size_t size, uint64_t seed, int64_t pool) : size_(size) {
  auto gen = at::detail::createCPUGenerator(seed);
  images_ = at::randn({pool, 3, 32, 32}, gen, at::kFloat);
  labels_ = at::randint(0, 10, {pool}, gen, at::kLong);
}

torch::data::Example<> SyntheticCifar::get(size_t index) {
  const auto i = static_cast<int64_t>(index % static_cast<size_t>(images_.size(0)));
  return {images_[i], labels_[i]};
}

c10::optional<size_t> SyntheticCifar::size() const { return size_; }

}  // namespace nano::examples
