#include "core/parse.h"

#include <cmath>
#include <cstdlib>
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

std::optional<std::chrono::milliseconds> parse_seconds(const std::string& text, std::chrono::milliseconds min,
                                                       std::chrono::milliseconds max) {
  size_t digits = 0, dots = 0;
  for (char c : text) {
    if (c >= '0' && c <= '9')
      ++digits;
    else if (c == '.')
      ++dots;
    else
      return std::nullopt;
  }
  // Long enough for any duration this project takes, short enough that strtod is exact enough.
  if (digits == 0 || dots > 1 || text.size() > 20) return std::nullopt;
  const double seconds = std::strtod(text.c_str(), nullptr);
  const std::chrono::milliseconds value(std::llround(seconds * 1000));
  if (value < min || value > max) return std::nullopt;
  return value;
}

}  // namespace nano
