#pragma once
// The heartbeat rule both ends of a rank shim's link follow (nano-run's supervision loop and
// every shim): a cut link or a lost host never closes the connection, so each end sends a beat
// every timeout / kHeartbeatsPerTimeout (launcher/process/timeouts.h) and counts the other as lost once it
// has heard nothing for longer than `timeout`. Pure: the caller passes the time.
#include <chrono>

namespace nano {

class Heartbeat {
 public:
  using Clock = std::chrono::steady_clock;

  /// Starts both the sending period and the silence at `now`.
  Heartbeat(std::chrono::milliseconds timeout, Clock::time_point now);

  /// True when a beat is due at `now` (a quarter of the timeout since the last one); the
  /// period starts again then.
  bool beat_due(Clock::time_point now);
  /// The other end was heard from at `now` (any frame counts).
  void heard(Clock::time_point now) { heard_ = now; }
  /// How long the other end has been silent at `now`.
  std::chrono::milliseconds silence(Clock::time_point now) const { return silence_since(heard_, now); }
  /// The other end counts as lost at `now`: silent for longer than the timeout.
  bool lost(Clock::time_point now) const { return silence(now) > timeout_; }

  /// How long an end last heard from at `heard` has been silent at `now`: for nano-run's side,
  /// which hears from one shim per rank (launcher/supervise/shim_channels.h keeps when).
  static std::chrono::milliseconds silence_since(Clock::time_point heard, Clock::time_point now);

 private:
  std::chrono::milliseconds timeout_;
  Clock::time_point last_beat_;
  Clock::time_point heard_;
};

}  // namespace nano
