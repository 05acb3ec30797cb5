// Must NOT compile: the wrapped training function gets no model. The ctest
// nano_wrapper_compile_fail expects the static_assert text "exactly one model".
#include <torch/optim/sgd.h>

#include <nano/nano_wrapper.h>

int main() {
  std::vector<at::Tensor> params{at::zeros({1}).requires_grad_()};
  torch::optim::SGD optimizer(params, torch::optim::SGDOptions(0.1));
  auto loop = [](torch::optim::SGD& opt, int epochs) { return epochs; };
  return nano::nano({.num_processes = 2})(loop)(optimizer, 2);
}
