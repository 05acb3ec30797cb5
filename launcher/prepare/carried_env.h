#pragma once
// What environment the ranks on other hosts get. Open MPI starts them through ssh (or the
// cluster's launch agent) with a login environment, not the launching shell's, so a job would
// run differently configured on each host. nano-run carries a fixed set of variables to every
// rank's shim, which applies them over its host's own environment; host-specific ones stay.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/recipe.h"

namespace nano {

/// Pure: the variables of `env` that travel to every host, plus `named` (--env NAME=VALUE,
/// applied last). Carried: PATH, LD_LIBRARY_PATH, PYTHONPATH, PYTHONHOME, VIRTUAL_ENV,
/// MALLOC_CONF, and every name starting with NANO_, OMP_, KMP_, GOMP_, MKL_, OPENBLAS_, DNNL_,
/// ONEDNN_, TORCH_, PYTORCH_, GLOO_, TCMALLOC_ or TORCHELASTIC_. Not carried: everything else
/// (HOME, HOSTNAME, PWD, TMPDIR, SSH_*, DISPLAY, ...: the other host's own apply), and nano's
/// per-host ones (NANO_CPUS, NANO_IN_PROGRAM's result file stays as set by the launcher).
std::map<std::string, std::string> carried_environment(const Environment& env,
                                                       const std::map<std::string, std::string>& named);

/// Pure: one --env value: "NAME=VALUE", or "NAME" for NAME's value in `env`. Throws UsageError
/// naming the value: "invalid value '1X=2' for --env: expected NAME or NAME=VALUE with NAME
/// made of letters, digits and _", "--env FOO: FOO is not set in nano-run's environment".
std::pair<std::string, std::string> parse_env_option(const std::string& spec, const Environment& env);

}  // namespace nano
