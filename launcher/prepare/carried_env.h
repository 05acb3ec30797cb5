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

/// The secrets among the variables (the job's secret, a Python launch's key): never written into
/// a shim's spec, which is a command line on every host. The attempt sets the job's secret; the
/// others travel in mpirun's environment as kCarriedSecretPrefix + NAME, which Open MPI hands to
/// every process it starts on every host in its launch message, and each shim gives its rank as
/// NAME (carried_secrets, restored_secrets).
inline constexpr const char* kCarriedSecretPrefix = "OMPI_NANO_SECRET_";

/// Pure: whether variable `name` holds a secret.
bool secret_variable(const std::string& name);

/// Pure: the variables of `env` that travel to every host, plus `named` (--env NAME=VALUE,
/// applied last), secrets left out. Carried: PATH, LD_LIBRARY_PATH, PYTHONPATH, PYTHONHOME, VIRTUAL_ENV,
/// MALLOC_CONF, and every name starting with NANO_, OMP_, KMP_, GOMP_, MKL_, OPENBLAS_, DNNL_,
/// ONEDNN_, TORCH_, PYTORCH_, GLOO_, TCMALLOC_ or TORCHELASTIC_. Not carried: everything else
/// (HOME, HOSTNAME, PWD, TMPDIR, SSH_*, DISPLAY, ...: the other host's own apply), and nano's
/// per-host ones (NANO_CPUS, NANO_IN_PROGRAM's result file stays as set by the launcher).
std::map<std::string, std::string> carried_environment(const Environment& env,
                                                       const std::map<std::string, std::string>& named);

/// Pure: the secrets of `named` (the job's own left to the attempt) as mpirun's environment
/// carries them: kCarriedSecretPrefix + NAME = value.
std::map<std::string, std::string> carried_secrets(const std::map<std::string, std::string>& named);

/// Pure: a shim's environment `env` with each carried secret back under its own name (and its
/// carried name gone).
Environment restored_secrets(Environment env);

/// Pure: one --env value: "NAME=VALUE", or "NAME" for NAME's value in `env`. Throws UsageError
/// naming the value: "invalid value '1X=2' for --env: expected NAME or NAME=VALUE with NAME
/// made of letters, digits and _", "--env FOO: FOO is not set in nano-run's environment".
std::pair<std::string, std::string> parse_env_option(const std::string& spec, const Environment& env);

}  // namespace nano
