#pragma once
// The secret of one attempt of a job: nano-run, the attempt's rank shims and its ranks know it.
// nano's own listeners of a job over several hosts (the shims' link, the job store) admit a peer
// only once the peer proved it knows the secret by answering a fresh challenge (HMAC-SHA256 of
// it), so a stranger can neither join the job nor read or write its rendezvous, and an overheard
// answer is no answer to the next challenge. The secret never stands on a command line (any user
// of a host can read those) nor in a file: it travels in the environment, NANO_JOB_SECRET, which
// only its own user can read. To other hosts it travels in mpirun's environment, which Open MPI
// sends in its launch message over plain TCP: someone who can read the traffic between the hosts
// can learn it (docs/multihost.md, "Who gets in", states what that allows).
#include <optional>
#include <string>

#include "core/rank_contract.h"

namespace nano {

/// The variable that hands the secret to shims and ranks.
inline constexpr const char* kJobSecretVariable = contract::kJobSecret;

/// A new secret: 32 random bytes from the kernel, as 64 hex digits.
std::string make_job_secret();

/// A new challenge: 16 random bytes from the kernel.
std::string make_challenge();

/// Pure: the answer to `challenge` by one who knows `secret`: HMAC-SHA256 (core/mac.h) over
/// `purpose`, a NUL and the challenge (32 bytes). `purpose` names the listener and the side ("shim-link",
/// "store-client", "store-server"), so an answer given to one never serves at another.
std::string answer_challenge(const std::string& secret, const std::string& purpose, const std::string& challenge);

/// Pure: whether `answer` is the answer to `challenge` for `secret` and `purpose`; compared in
/// constant time, so the time taken tells nothing of the right answer.
bool is_right_answer(const std::string& answer, const std::string& secret, const std::string& purpose,
                     const std::string& challenge);

/// $NANO_JOB_SECRET, or "" when it is not set (a world not started by nano-run).
std::string job_secret_from_environment();

/// Pure: `bytes` as lower-case hex digits, and back (nullopt for text that is not an even
/// number of hex digits).
std::string hex_of(const std::string& bytes);
std::optional<std::string> bytes_of_hex(const std::string& hex);

}  // namespace nano
