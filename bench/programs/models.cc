#include "bench/programs/models.h"

#include <ATen/ATen.h>

namespace nano::bench {

namespace nn = torch::nn;

LeNetImpl::LeNetImpl() {
  conv1 = register_module("conv1", nn::Conv2d(nn::Conv2dOptions(1, 6, 5).padding(2)));
  conv2 = register_module("conv2", nn::Conv2d(nn::Conv2dOptions(6, 16, 5)));
  fc1 = register_module("fc1", nn::Linear(16 * 5 * 5, 120));
  fc2 = register_module("fc2", nn::Linear(120, 84));
  fc3 = register_module("fc3", nn::Linear(84, 10));
}

torch::Tensor LeNetImpl::forward(torch::Tensor x) {
  x = at::max_pool2d(at::relu(conv1(x)), {2, 2});
  x = at::max_pool2d(at::relu(conv2(x)), {2, 2});
  x = x.flatten(1);
  return fc3(at::relu(fc2(at::relu(fc1(x)))));
}

BasicBlockImpl::BasicBlockImpl(int64_t in, int64_t out, int64_t stride) {
  conv1 = register_module("conv1", nn::Conv2d(nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false)));
  bn1 = register_module("bn1", nn::BatchNorm2d(out));
  conv2 = register_module("conv2", nn::Conv2d(nn::Conv2dOptions(out, out, 3).padding(1).bias(false)));
  bn2 = register_module("bn2", nn::BatchNorm2d(out));
  shortcut = register_module("shortcut", nn::Sequential());
  if (stride != 1 || in != out) {
    shortcut->push_back(nn::Conv2d(nn::Conv2dOptions(in, out, 1).stride(stride).bias(false)));
    shortcut->push_back(nn::BatchNorm2d(out));
  }
}

torch::Tensor BasicBlockImpl::forward(torch::Tensor x) {
  auto y = at::relu(bn1(conv1(x)));
  y = bn2(conv2(y));
  return at::relu(y + (shortcut->is_empty() ? x : shortcut->forward(x)));
}

ResNet18Impl::ResNet18Impl() {
  stem = register_module("stem", nn::Conv2d(nn::Conv2dOptions(3, 64, 3).padding(1).bias(false)));
  bn = register_module("bn", nn::BatchNorm2d(64));
  layers = register_module("layers", nn::Sequential());
  int64_t in = 64;
  for (int64_t out : {64, 128, 256, 512}) {
    layers->push_back(BasicBlock(in, out, out == 64 ? 1 : 2));
    layers->push_back(BasicBlock(out, out, 1));
    in = out;
  }
  fc = register_module("fc", nn::Linear(512, 10));
}

torch::Tensor ResNet18Impl::forward(torch::Tensor x) {
  x = at::relu(bn(stem(x)));
  x = layers->forward(x);
  x = at::adaptive_avg_pool2d(x, {1, 1}).flatten(1);
  return fc(x);
}

}  // namespace nano::bench
