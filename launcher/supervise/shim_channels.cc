#include "launcher/supervise/shim_channels.h"

#include <climits>
#include <cstdlib>

#include <nano/error.h>
#include "core/job_secret.h"
#include "core/parse.h"
#include "launcher/prepare/port.h"
#include "launcher/timeline/timeline_shipping.h"

namespace nano {

std::string started_payload(const GroupLeader& leader) {
  return std::to_string(leader.pid) + " " + std::to_string(leader.start_time);
}

GroupLeader parse_started(const std::string& payload) {
  const size_t space = payload.find(' ');
  GroupLeader leader;
  leader.pid = static_cast<pid_t>(parse_integer(payload.substr(0, space), 0, INT_MAX).value_or(0));
  if (leader.pid == 0) return {0, 0};
  if (space != std::string::npos) {
    const std::optional<long long> start = parse_integer(payload.substr(space + 1), 0, LLONG_MAX);
    if (!start) return {0, 0};
    leader.start_time = static_cast<unsigned long long>(*start);
  }
  return leader;
}

ShimChannels::ShimChannels(int world_size, bool one_host, OutputRouter& router, ShimEvents& events, SupervisionIo& io)
    : world_size_(world_size),
      one_host_(one_host),
      router_(router),
      events_(events),
      io_(io),
      hosts_(static_cast<size_t>(world_size), host_name()),
      shims_(static_cast<size_t>(world_size), nullptr),
      groups_(static_cast<size_t>(world_size), -1),
      heard_(static_cast<size_t>(world_size)),
      error_files_(static_cast<size_t>(world_size)) {}

bool ShimChannels::take(Channel& ch, const char* data, size_t size) {
  try {
    ch.decoder.feed(data, size);
    return take_frames(ch);
  } catch (const Error& e) {
    // The consequence stays (the channel closes, as at its end); for a shim's link the cause is
    // told once. Bytes before a hello are not a shim's (a stray client, a port scan on a
    // multi-host listener): closed without a word, as a wrong answer is.
    if (ch.hello)
      router_.note("nano-run: rank " + std::to_string(ch.rank) + "'s shim link: " + e.what() + "; closing it");
    return true;
  }
}

bool ShimChannels::take_frames(Channel& ch) {
  FrameType type;
  std::string payload;
  while (ch.decoder.next(type, payload)) {
    if (ch.hello) heard_[static_cast<size_t>(ch.rank)] = io_.now();
    if (!ch.hello) {
      std::string host, answer;
      int rank = -1;
      if (type != FrameType::kHello || !parse_hello(payload, rank, host, answer) || rank >= world_size_ ||
          ch.challenge.empty() || !is_right_shim_answer(answer, secret_, ch.challenge, rank) ||
          shims_[static_cast<size_t>(rank)] != nullptr)
        return true;  // not one of ours, or a second link for a linked rank
      ch.hello = true;
      ch.decoder.limit(FrameDecoder::kMaxPayload);
      ch.rank = rank;
      hosts_[static_cast<size_t>(rank)] = host;
      heard_[static_cast<size_t>(rank)] = io_.now();
      shims_[static_cast<size_t>(rank)] = &ch;
      // A shim that arrives during a teardown gets the teardown's signal at once.
      if (teardown_signal_ != 0) send(rank, encode_frame(FrameType::kSignal, std::to_string(teardown_signal_)));
      if (released_) send(rank, encode_frame(FrameType::kRelease, ""));
    } else if (type == FrameType::kStarted) {
      const GroupLeader leader = parse_started(payload);
      // On this host (one-host jobs), the guardian can take the rank's group down.
      if (leader.pid > 1 && one_host_) {
        groups_[static_cast<size_t>(ch.rank)] = leader.pid;
        events_.rank_started_here(ch.rank, leader);
      }
    } else if (type == FrameType::kOut || type == FrameType::kErr) {
      router_.feed(ch.rank, type == FrameType::kOut ? Stream::kOut : Stream::kErr, payload.data(), payload.size());
    } else if (type == FrameType::kTimeline) {
      keep_shipped_records(timeline_folder_, payload);
    } else if (type == FrameType::kErrorFile) {
      error_files_[static_cast<size_t>(ch.rank)] = std::move(payload);
    } else if (type == FrameType::kExit) {
      int code = 0, sig = 0;
      if (parse_exit(payload, code, sig)) {
        router_.finish(ch.rank, Stream::kOut);
        router_.finish(ch.rank, Stream::kErr);
        events_.rank_ended(ch.rank, code, sig);
      }
    }
  }
  return false;
}

void ShimChannels::greet(Channel& ch) {
  ch.shim = true;
  ch.opened = io_.now();
  ch.challenge = make_challenge();
  ch.decoder.limit(FrameDecoder::kMaxHelloPayload);
  io_.send_frame(ch.fd, encode_frame(FrameType::kChallenge, ch.challenge));
}

void ShimChannels::ended(const Channel& ch) {
  if (ch.hello) {
    router_.finish(ch.rank, Stream::kOut);
    router_.finish(ch.rank, Stream::kErr);
  }
}

void ShimChannels::forget(const Channel* ch) {
  for (auto& shim : shims_)
    if (shim == ch) shim = nullptr;
}

void ShimChannels::send(int rank, const std::string& frame) {
  Channel* ch = shims_[static_cast<size_t>(rank)];
  // A frame that did not go is not retried: a shim that stopped reading its link has mostly
  // stopped altogether, and its silence takes it as lost within the heartbeat timeout.
  if (ch) io_.send_frame(ch->fd, frame);
}

void ShimChannels::send_heartbeats() {
  for (int r = 0; r < world_size_; ++r) send(r, encode_frame(FrameType::kHeartbeat, ""));
}

bool ShimChannels::release() {
  if (released_) return false;
  released_ = true;
  for (int r = 0; r < world_size_; ++r) send(r, encode_frame(FrameType::kRelease, ""));
  return true;
}

}  // namespace nano
