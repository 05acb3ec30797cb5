#pragma once
// Strict number text, shared by every layer that reads numbers from options, environment
// variables and Slurm's lists: std::stoi and strtol accept "12abc", " 12" and "+12", which
// would let a typo pass as a different number.
#include <chrono>
#include <optional>
#include <string>

namespace nano {

/// The value of `text` when it is a whole base-10 integer (an optional leading '-', then
/// digits only: no spaces, no '+', nothing after) within [min, max]; nullopt otherwise,
/// including on overflow. Callers word the error, so it can name the option and what is
/// expected.
std::optional<long long> parse_integer(const std::string& text, long long min, long long max);

/// The duration `text` gives in seconds when it is a plain decimal number ("5", "0.5", "2.",
/// ".25": digits with at most one '.', no sign, no exponent, no spaces), rounded to the
/// millisecond and within [min, max]; nullopt otherwise. The one reader of seconds for every
/// option and environment variable.
std::optional<std::chrono::milliseconds> parse_seconds(const std::string& text, std::chrono::milliseconds min,
                                                       std::chrono::milliseconds max);

}  // namespace nano
