#pragma once
// The value rank 0's training code hands back to the caller of an in-program launch: nothing,
// a number, a string or a tensor.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <type_traits>
#include <variant>

#include <nano/error.h>

namespace nano {

/// The value rank 0's training code hands back to the caller.
using TrainResult = std::variant<std::monostate, double, int64_t, std::string, at::Tensor>;

namespace detail {
template <class T>
constexpr bool is_result_type_v =
    std::is_void_v<T> || std::is_arithmetic_v<T> || std::is_same_v<T, std::string> || std::is_same_v<T, at::Tensor>;

template <class T>
TrainResult to_result(const T& value) {
  if constexpr (std::is_same_v<T, bool> || std::is_integral_v<T>) {
    return TrainResult(static_cast<int64_t>(value));
  } else if constexpr (std::is_floating_point_v<T>) {
    return TrainResult(static_cast<double>(value));
  } else if constexpr (std::is_same_v<T, at::Tensor>) {
    return TrainResult(value);
  } else {
    static_assert(std::is_same_v<T, std::string>,
                  "nano: a training result must be a number, std::string or at::Tensor");
    return TrainResult(value);
  }
}

/// "nothing", "double", "int64", "string", "tensor".
const char* result_kind(const TrainResult& result);

template <class T>
T from_result(const TrainResult& result) {
  using Held =
      std::conditional_t<std::is_integral_v<T>, int64_t, std::conditional_t<std::is_floating_point_v<T>, double, T>>;
  if (const Held* v = std::get_if<Held>(&result)) return static_cast<T>(*v);
  throw Error(std::string("nano: rank 0's result is ") + result_kind(result) + ", not the type asked for (" +
              result_kind(TrainResult(Held{})) + ")");
}
}  // namespace detail

}  // namespace nano
