// The installed surface, checked where a consumer compiles: nano's public headers are
// <nano/...>, and nothing else of nano's build (the launcher, the env-init layer, the runtime's
// private headers) nor MPI's headers are on a consumer's include path.
#include <nano/nano.h>

#if __has_include(<mpi.h>)
#error "a nano consumer should not see MPI's headers"
#endif
#if __has_include(<launcher/launch/launcher.h>) || __has_include(<nano/launcher/launch/launcher.h>)
#error "a nano consumer should not see the launcher's headers"
#endif
#if __has_include(<core/planner.h>) || __has_include(<nano/core/planner.h>)
#error "a nano consumer should not see env-init's headers"
#endif
#if __has_include( \
    <runtime/communicators/mpi_communicator.h>) || __has_include(<nano/runtime/communicators/mpi_communicator.h>)
#error "a nano consumer should not see the runtime's private headers"
#endif
