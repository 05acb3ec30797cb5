#include "runtime/checkpoint_files/checkpoint_stop.h"

#include <signal.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "core/rank_contract.h"
#include "runtime/timeline/recorder.h"

namespace nano {
namespace {

std::atomic<bool> asked{false};

void note_ask(int) { asked.store(true); }

}  // namespace

bool planned_stops_on() {
  static const bool on = [] {
    const char* value = std::getenv(contract::kStopAtCheckpoint);
    if (value == nullptr || std::strcmp(value, "1") != 0) return false;
    struct sigaction action {};
    action.sa_handler = note_ask;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;  // a read or a wait the signal lands in goes on
    sigaction(contract::kStopAtCheckpointSignal, &action, nullptr);
    return true;
  }();
  return on;
}

bool stop_asked() { return asked.load(); }

void stop_at_checkpoint() {
  timeline::flush();  // what the exit handler would have written
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  std::_Exit(contract::kStoppedAtCheckpointExitCode);
}

}  // namespace nano
