#include "launcher/supervise/heartbeat.h"

#include "launcher/process/timeouts.h"

namespace nano {

Heartbeat::Heartbeat(std::chrono::milliseconds timeout, Clock::time_point now)
    : timeout_(timeout), last_beat_(now), heard_(now) {}

bool Heartbeat::beat_due(Clock::time_point now) {
  if (now - last_beat_ < timeout_ / kHeartbeatsPerTimeout) return false;
  last_beat_ = now;
  return true;
}

std::chrono::milliseconds Heartbeat::silence_since(Clock::time_point heard, Clock::time_point now) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(now - heard);
}

}  // namespace nano
