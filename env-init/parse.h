#pragma once
// Strict integer text, shared by every layer that reads numbers from options, environment
// variables and Slurm's lists: std::stoi and strtol accept "12abc", " 12" and "+12", which
// would let a typo pass as a different number.
#include <optional>
#include <string>

namespace nano {

/// The value of `text` when it is a whole base-10 integer (an optional leading '-', then
/// digits only: no spaces, no '+', nothing after) within [min, max]; nullopt otherwise,
/// including on overflow. Callers word the error, so it can name the option and what is
/// expected.
std::optional<long long> parse_integer(const std::string& text, long long min, long long max);

}  // namespace nano
