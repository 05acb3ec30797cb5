#include <nano/batch_policy.h>

#include <cstdlib>
#include <string>

#include <nano/error.h>
#include "core/rank_contract.h"

namespace nano {

int batch_world_size(int world_size) {
  const char* text = std::getenv(contract::kBatchWorldSize);
  if (text == nullptr || *text == '\0') return world_size;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (*end != '\0' || value < 1 || value > (1 << 24))
    throw UsageError(std::string("nano: bad ") + contract::kBatchWorldSize + "=" + text + ": expected a count >= 1");
  return static_cast<int>(value);
}

std::size_t per_rank_batch(std::size_t batch_size, int batch_world, int world_size) {
  if (world_size < 1 || batch_world < 1 || batch_world == world_size) return batch_size;
  const std::size_t global = batch_size * static_cast<std::size_t>(batch_world);
  const auto n = static_cast<std::size_t>(world_size);
  return (global + n - 1) / n;
}

}  // namespace nano
