#include "examples/common/models.h"

#include <doctest/doctest.h>

using namespace nano::examples;

TEST_CASE("LeNet maps 1x28x28 to 10 logits") {
  LeNet m;
  CHECK((m->forward(at::zeros({4, 1, 28, 28})).sizes() == at::IntArrayRef{4, 10}));
  CHECK(count_parameters(*m) == 32 * 9 + 32 + 64 * 32 * 9 + 64 + 3136 * 128 + 128 + 128 * 10 + 10);
}

TEST_CASE("ResNet-18 maps 3x32x32 to 10 logits with 11.17 M parameters") {
  ResNet18 m;
  m->eval();
  CHECK((m->forward(at::zeros({2, 3, 32, 32})).sizes() == at::IntArrayRef{2, 10}));
  CHECK(count_parameters(*m) == 11173962);  // torchvision's resnet18 with a 3x3 stem and 10 classes
}

TEST_CASE("SyntheticCifar is deterministic and CIFAR-shaped") {
  SyntheticCifar a(1000, 7, 16), b(1000, 7, 16);
  CHECK(*a.size() == 1000);
  const auto x = a.get(17);
  CHECK((x.data.sizes() == at::IntArrayRef{3, 32, 32}));
  CHECK(x.data.equal(b.get(17).data));
  CHECK(x.data.equal(a.get(1).data));  // 17 % 16
  CHECK(x.target.item<int64_t>() >= 0);
  CHECK(x.target.item<int64_t>() <= 9);
}
