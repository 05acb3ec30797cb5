// <nano/precision.h>: the precision setting, the batch and module formats, the autocast scope
// (which dtypes a forward produces inside it) and the bfloat16 CPU check. One process.
#include <torch/data/example.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include <string>
#include <vector>

#include <nano/error.h>
#include <nano/precision.h>
#include <nano/sharding.h>

#include <doctest/doctest.h>

namespace {

std::string error_of(const std::string& text) {
  try {
    nano::parse_precision(text);
  } catch (const nano::UsageError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("precision: the three values, and one line naming any other") {
  CHECK(nano::parse_precision("32") == nano::Precision::kFloat32);
  CHECK(nano::parse_precision("64") == nano::Precision::kFloat64);
  CHECK(nano::parse_precision("bf16") == nano::Precision::kBfloat16);
  for (auto p : {nano::Precision::kFloat32, nano::Precision::kFloat64, nano::Precision::kBfloat16})
    CHECK(nano::parse_precision(nano::precision_name(p)) == p);
  struct Row {
    std::string text, error;
  };
  for (const Row& r : std::vector<Row>{
           {"16",
            "precision \"16\" (float16) is not supported on CPUs: use \"bf16\", the half-width type CPUs "
            "compute in"},
           {"BF16", "unknown precision \"BF16\": expected \"32\", \"64\" or \"bf16\""},
           {"", "unknown precision \"\": expected \"32\", \"64\" or \"bf16\""},
           {"fp32", "unknown precision \"fp32\": expected \"32\", \"64\" or \"bf16\""},
       }) {
    CAPTURE(r.text);
    CHECK(error_of(r.text) == r.error);
  }
}

TEST_CASE("precision: batch formats and formatted tensors") {
  CHECK(nano::batch_format(nano::Precision::kFloat32, false).identity());
  CHECK(nano::batch_format(nano::Precision::kBfloat16, false).identity());  // autocast casts, not the loader
  CHECK((nano::batch_format(nano::Precision::kFloat64, false).floating == at::kDouble));
  CHECK(nano::batch_format(nano::Precision::kBfloat16, true).channels_last);

  const at::Tensor images = at::rand({2, 3, 4, 5});
  const at::Tensor labels = at::arange(2);
  const at::Tensor same = nano::formatted(images, {});
  CHECK(same.unsafeGetTensorImpl() == images.unsafeGetTensorImpl());
  const at::Tensor wide = nano::formatted(images, nano::batch_format(nano::Precision::kFloat64, false));
  CHECK((wide.scalar_type() == at::kDouble));
  CHECK((nano::formatted(labels, nano::batch_format(nano::Precision::kFloat64, false)).scalar_type() == at::kLong));
  const at::Tensor cl = nano::formatted(images, nano::batch_format(nano::Precision::kFloat32, true));
  CHECK(cl.is_contiguous(at::MemoryFormat::ChannelsLast));
  CHECK(!cl.is_contiguous());
  CHECK(torch::equal(cl, images));
  // Not 4-D: left in its layout.
  CHECK(nano::formatted(at::rand({3, 4}), nano::batch_format(nano::Precision::kFloat32, true)).is_contiguous());

  // A loader's Example batch: data and a floating target converted, an integer target kept.
  torch::data::Example<> example(images, at::rand({2}));
  nano::detail::format_batch(example, nano::batch_format(nano::Precision::kFloat64, true));
  CHECK((example.data.scalar_type() == at::kDouble));
  CHECK(example.data.is_contiguous(at::MemoryFormat::ChannelsLast));
  CHECK((example.target.scalar_type() == at::kDouble));
  std::vector<torch::data::Example<>> many{{images, labels}, {images, labels}};
  nano::detail::format_batch(many, nano::batch_format(nano::Precision::kFloat64, false));
  for (const auto& e : many) {
    CHECK((e.data.scalar_type() == at::kDouble));
    CHECK((e.target.scalar_type() == at::kLong));
  }
}

TEST_CASE("precision: format_module converts in place, so the parameters stay the same tensors") {
  torch::nn::Conv2d conv(torch::nn::Conv2dOptions(3, 8, 3));
  at::Tensor weight = conv->weight;
  const auto* impl = weight.unsafeGetTensorImpl();
  const at::Tensor before = weight.detach().clone();
  nano::format_module(*conv, nano::Precision::kFloat64, true);
  CHECK(conv->weight.unsafeGetTensorImpl() == impl);
  CHECK((weight.scalar_type() == at::kDouble));
  CHECK((conv->bias.scalar_type() == at::kDouble));
  CHECK(weight.is_contiguous(at::MemoryFormat::ChannelsLast));
  CHECK(weight.requires_grad());
  CHECK(torch::equal(weight.to(at::kFloat), before));
  // It trains: the gradient comes in the new dtype.
  conv->forward(at::rand({1, 3, 6, 6}, at::kDouble)).sum().backward();
  CHECK((weight.grad().scalar_type() == at::kDouble));

  torch::nn::BatchNorm2d norm(4);
  nano::format_module(*norm, nano::Precision::kBfloat16, false);  // mixed: the weights stay float32
  CHECK((norm->weight.scalar_type() == at::kFloat));
  CHECK((norm->running_mean.scalar_type() == at::kFloat));
  nano::format_module(*norm, nano::Precision::kFloat64, false);
  CHECK((norm->running_mean.scalar_type() == at::kDouble));
}

TEST_CASE("precision: under the autocast scope convolutions and matmuls produce bfloat16, weights stay float32") {
  torch::nn::Conv2d conv(torch::nn::Conv2dOptions(3, 4, 3));
  torch::nn::Linear fc(16, 5);
  const at::Tensor x = at::rand({2, 3, 4, 4});
  CHECK(!nano::cpu_autocast_enabled());
  {
    nano::AutocastScope scope(true);
    CHECK(nano::cpu_autocast_enabled());
    const at::Tensor h = conv->forward(x);
    CHECK((h.scalar_type() == at::kBFloat16));
    const at::Tensor logits = fc->forward(h.flatten(1));
    CHECK((logits.scalar_type() == at::kBFloat16));
    CHECK((at::matmul(x.flatten(1), x.flatten(1).t()).scalar_type() == at::kBFloat16));
    // The loss is on autocast's float32 list: computed in float.
    const at::Tensor loss = torch::nn::functional::cross_entropy(logits, at::arange(2));
    CHECK((loss.scalar_type() == at::kFloat));
    loss.backward();
    CHECK((conv->weight.scalar_type() == at::kFloat));
    CHECK((conv->weight.grad().scalar_type() == at::kFloat));
    CHECK((fc->weight.grad().scalar_type() == at::kFloat));
    {
      nano::AutocastScope off(false);  // does nothing
      CHECK(nano::cpu_autocast_enabled());
    }
    // A weight changed between two forwards is cast again (no stale cached copy).
    const at::Tensor first = fc->forward(h.flatten(1));
    {
      at::NoGradGuard no_grad;
      fc->weight.mul_(2);
    }
    const at::Tensor second = fc->forward(h.flatten(1));
    CHECK(!torch::equal(first, second));
  }
  CHECK(!nano::cpu_autocast_enabled());
  CHECK((conv->forward(x).scalar_type() == at::kFloat));
}

TEST_CASE("precision: the bfloat16 instruction check reads the flags line") {
  CHECK(nano::cpuinfo_has_bf16("processor\t: 0\nflags\t\t: fpu sse avx512f avx512_bf16 avx512_vnni\n"));
  CHECK(nano::cpuinfo_has_bf16("flags\t\t: fpu amx_bf16 amx_tile\n"));
  CHECK(!nano::cpuinfo_has_bf16("flags\t\t: fpu sse avx512f avx512bw\n"));
  CHECK(!nano::cpuinfo_has_bf16("flags\t\t: fpu avx512_bf16x\n"));
  CHECK(!nano::cpuinfo_has_bf16(""));
  // Only the first flags line decides (every CPU lists the same ones).
  CHECK(!nano::cpuinfo_has_bf16("flags : fpu\nflags : avx512_bf16\n"));
}
