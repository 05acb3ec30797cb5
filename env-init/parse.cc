#include "env-init/parse.h"

#include <limits>

namespace nano {

std::optional<long long> parse_integer(const std::string& text, long long min, long long max) {
  const bool negative = !text.empty() && text[0] == '-';
  const size_t first = negative ? 1 : 0;
  if (text.size() == first) return std::nullopt;
  // Accumulated as a negative number, whose range is one larger, so LLONG_MIN parses too.
  long long value = 0;
  const long long lowest = std::numeric_limits<long long>::min();
  for (size_t i = first; i < text.size(); ++i) {
    const char c = text[i];
    if (c < '0' || c > '9') return std::nullopt;
    const int digit = c - '0';
    if (value < (lowest + digit) / 10) return std::nullopt;  // value * 10 - digit would overflow
    value = value * 10 - digit;
  }
  if (!negative) {
    if (value == lowest) return std::nullopt;
    value = -value;
  }
  if (value < min || value > max) return std::nullopt;
  return value;
}

}  // namespace nano
