#pragma once
// Benchmark models: a LeNet-style CNN for 1x28x28 inputs and ResNet-18 (CIFAR stem) for
// 3x32x32 inputs, both with 10 classes.
#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

namespace nano::bench {

struct LeNetImpl : torch::nn::Module {
  LeNetImpl();
  torch::Tensor forward(torch::Tensor x);
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
};
TORCH_MODULE(LeNet);

struct BasicBlockImpl : torch::nn::Module {
  BasicBlockImpl(int64_t in, int64_t out, int64_t stride);
  torch::Tensor forward(torch::Tensor x);
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr}, bn2{nullptr};
  torch::nn::Sequential shortcut{nullptr};
};
TORCH_MODULE(BasicBlock);

struct ResNet18Impl : torch::nn::Module {
  ResNet18Impl();
  torch::Tensor forward(torch::Tensor x);
  torch::nn::Conv2d stem{nullptr};
  torch::nn::BatchNorm2d bn{nullptr};
  torch::nn::Sequential layers{nullptr};
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(ResNet18);

}  // namespace nano::bench
