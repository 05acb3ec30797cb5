#include "runtime/training_index.h"

namespace nano {
namespace in_program {
namespace {

// One count per process: the program's trainings run one after another on its main thread.
int g_trainings_reached = 0;

}  // namespace

int reach_next_training() { return ++g_trainings_reached; }

int trainings_reached() { return g_trainings_reached; }

}  // namespace in_program
}  // namespace nano
