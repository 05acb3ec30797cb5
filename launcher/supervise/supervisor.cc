#include "launcher/supervise/supervisor.h"

#include <signal.h>

#include <algorithm>

namespace nano {

Supervisor::Supervisor(int world_size) : exited_(static_cast<size_t>(world_size), false) {}

Decision Supervisor::start_teardown(int signal) {
  tearing_down_ = true;
  Decision d;
  d.kind = Decision::kSignalAll;
  d.signal = signal;
  d.start_grace = true;
  return d;
}

Decision Supervisor::rank_exited(int rank, int exit_code, int signal) {
  if (rank >= 0 && static_cast<size_t>(rank) < exited_.size()) {
    if (exited_[static_cast<size_t>(rank)]) return {};
    exited_[static_cast<size_t>(rank)] = true;
  }
  bool failed = exit_code != 0 || signal != 0;
  if (!failed || interrupted_by_ != 0) return {};
  // Once a teardown is under way, failures are its consequences, but for a SIGKILL that nobody
  // here sent, told late: that one was the cause (see kRootCauseSettle).
  if (tearing_down_) {
    const bool takes_over = settling_ && root_cause_ && root_cause_->signal == 0 && signal == SIGKILL && !killed_;
    if (!takes_over) return {};
    root_cause_ = RootCause{rank, exit_code, signal};
    Decision d;
    d.announce = true;
    d.replaces_root_cause = true;
    return d;
  }
  root_cause_ = RootCause{rank, exit_code, signal};
  Decision d = all_exited() ? Decision{} : start_teardown(SIGTERM);
  d.announce = true;
  d.start_settle = !all_exited();
  settling_ = d.start_settle;
  return d;
}

Decision Supervisor::backend_exited(int exit_code, int signal) {
  bool failed = exit_code != 0 || signal != 0;
  Decision d;
  d.announce = failed && !root_cause_ && interrupted_by_ == 0 && !stopped_;
  if (d.announce && !all_exited()) root_cause_ = RootCause{-1, exit_code, signal};
  std::fill(exited_.begin(), exited_.end(), true);
  return d;
}

Decision Supervisor::received_signal(int signal) {
  if (interrupted_by_ == 0 && !root_cause_) interrupted_by_ = signal;
  if (!tearing_down_) return start_teardown(signal);
  if (killed_) return {};
  killed_ = true;
  Decision d;
  d.kind = Decision::kKillAll;
  return d;
}

Decision Supervisor::grace_expired() {
  if (!tearing_down_ || killed_ || all_exited()) return {};
  killed_ = true;
  Decision d;
  d.kind = Decision::kKillAll;
  return d;
}

Decision Supervisor::stop_requested() {
  if (tearing_down_ || all_exited()) return {};
  stopped_ = true;
  return start_teardown(SIGTERM);
}

bool Supervisor::exited(int rank) const {
  return rank >= 0 && static_cast<size_t>(rank) < exited_.size() && exited_[static_cast<size_t>(rank)];
}

bool Supervisor::all_exited() const {
  return std::all_of(exited_.begin(), exited_.end(), [](bool e) { return e; });
}

int Supervisor::exit_code() const {
  if (root_cause_) {
    if (root_cause_->signal != 0) return 128 + root_cause_->signal;
    return root_cause_->exit_code;
  }
  if (interrupted_by_ != 0) return 128 + interrupted_by_;
  return 0;
}

bool should_restart(int exit_code, int interrupted_by, int restarts_done, int max_restarts) {
  return exit_code != 0 && interrupted_by == 0 && restarts_done < max_restarts;
}

}  // namespace nano
