#include "launcher/process/output.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <poll.h>
#include <algorithm>
#include <filesystem>
#include <system_error>

#include <nano/error.h>
#include "core/setting.h"

namespace nano {
namespace {

// Whole lines up to this size: a bound on memory for output that never ends a line.
constexpr size_t kMaxLine = 256u << 20;

void make_dirs(const std::string& path) {
  std::error_code failed;
  std::filesystem::create_directories(path, failed);
  if (failed) throw SettingError(Setting::kLogDir, path, "cannot create {log_dir} " + path + ": " + failed.message());
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw SettingError(Setting::kLogDir, path, "cannot create {log_dir} " + path + ": not a directory");
}

}  // namespace

void StdioSink::write(Stream stream, const std::string& line) { (stream == Stream::kOut ? out_ : err_).write(line); }

std::vector<pollfd> StdioSink::pollfds() const {
  std::vector<pollfd> fds;
  if (out_.pending()) fds.push_back({out_.fd(), POLLOUT, 0});
  if (err_.pending()) fds.push_back({err_.fd(), POLLOUT, 0});
  return fds;
}

void StdioSink::flush_ready() {
  out_.flush_ready();
  err_.flush_ready();
}

std::string StdioSink::drain(std::chrono::milliseconds limit) {
  out_.drain(limit);
  err_.drain(limit);
  std::string note;
  for (const PendingWriter* w : {&out_, &err_}) {
    if (w->dropped() == 0) continue;
    note += std::string(note.empty() ? "" : "; ") + std::to_string(w->dropped()) + " bytes of " +
            (w == &out_ ? "stdout" : "stderr") +
            (w->closed() ? " (its reader went away)" : " (its reader was too slow)");
  }
  if (!note.empty()) note = "nano-run: the terminal did not get " + note + "; --log-dir keeps every line";
  return note;
}

OutputRouter::OutputRouter(int world_size, OutputConfig config, OutputSink& sink)
    : config_(std::move(config)), sink_(sink), ranks_(static_cast<size_t>(world_size) + 1) {
  if (config_.log_dir.empty()) return;
  make_dirs(config_.log_dir);
  open_logs(config_.log_dir);
  summary_ = open_log(config_.log_dir, "summary.log");
}

std::unique_ptr<OutputRouter::LogFile> OutputRouter::open_log(const std::string& dir, const std::string& name) {
  // Not blocking on a FIFO someone put there; only a regular file of this user, made 0600.
  const int fd = ::open((dir + "/" + name).c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
  if (fd < 0)
    throw SettingError(Setting::kLogDir, dir, "cannot write {log_dir} " + dir + ": " + name + ": " + strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || fchmod(fd, 0600) != 0 ||
      ftruncate(fd, 0) != 0) {
    ::close(fd);
    throw SettingError(Setting::kLogDir, dir,
                       "cannot write {log_dir} " + dir + ": " + name + ": not a regular file of this user");
  }
  return std::make_unique<LogFile>(fd);
}

OutputRouter::LogFile::~LogFile() { ::close(fd_); }

void OutputRouter::LogFile::line(const std::string& text) {
  // A full disk loses log lines, never the run: what reaches the terminal is unaffected.
  const std::string whole = text + "\n";
  for (size_t done = 0; done < whole.size();) {
    const ssize_t n = ::write(fd_, whole.data() + done, whole.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

void OutputRouter::open_logs(const std::string& dir) {
  auto open = [&](const std::string& name) { return open_log(dir, name); };
  for (size_t r = 1; r < ranks_.size(); ++r)
    ranks_[r].log = open("rank-" + std::to_string(static_cast<int>(r) - 1 + config_.rank_offset) + ".log");
  ranks_[0].log = open("mpirun.log");
}

void OutputRouter::start_attempt(const std::string& name) {
  for (auto& r : ranks_) {
    r.pending[0].clear();
    r.pending[1].clear();
    r.tail.clear();
    r.hidden = false;
  }
  if (config_.log_dir.empty()) return;
  const std::string dir = config_.log_dir + "/" + name;
  make_dirs(dir);
  open_logs(dir);
}

OutputRouter::RankState& OutputRouter::state(int rank) {
  size_t index = static_cast<size_t>(rank + 1);
  if (rank < -1 || index >= ranks_.size()) throw Error("output from unknown rank " + std::to_string(rank));
  return ranks_[index];
}

bool OutputRouter::shown(int rank) {
  if (state(rank).hidden || !config_.terminal) return false;
  return rank == kMpirunStream || config_.show_ranks.empty() ||
         std::find(config_.show_ranks.begin(), config_.show_ranks.end(), rank) != config_.show_ranks.end();
}

std::string OutputRouter::tag(int rank) const {
  if (rank == kMpirunStream) return "[mpirun] ";
  if (config_.tag) return "[rank " + std::to_string(rank + config_.rank_offset) + "] ";
  return "";
}

void OutputRouter::end_drawn_line() {
  if (!drawn_.open) return;
  drawn_.open = false;
  sink_.write(drawn_.stream, "\n");
}

void OutputRouter::redraw(int rank, Stream stream, const std::string& text) {
  if (!shown(rank)) return;
  if (drawn_.open && (drawn_.rank != rank || drawn_.stream != stream)) end_drawn_line();
  drawn_ = {true, rank, stream};
  sink_.write(stream, "\r" + tag(rank) + text);
}

void OutputRouter::emit(int rank, Stream stream, const std::string& raw) {
  // A redrawn line's final state: what follows its last carriage return ("\r\n" ends a line).
  std::string line = !raw.empty() && raw.back() == '\r' ? raw.substr(0, raw.size() - 1) : raw;
  if (const size_t cr = line.rfind('\r'); cr != std::string::npos) line.erase(0, cr + 1);
  RankState& s = state(rank);
  if (stream == Stream::kErr) {
    s.tail.push_back(line);
    while (s.tail.size() > config_.tail_lines) s.tail.pop_front();
  }
  if (s.log) s.log->line(line);
  if (!shown(rank)) return;
  const bool in_place = drawn_.open && drawn_.rank == rank && drawn_.stream == stream;
  if (!in_place) end_drawn_line();
  drawn_.open = false;
  sink_.write(stream, (in_place ? "\r" : "") + tag(rank) + line + "\n");
}

void OutputRouter::feed(int rank, Stream stream, const char* data, size_t size) {
  std::string& pending = state(rank).pending[stream == Stream::kOut ? 0 : 1];
  pending.append(data, size);
  size_t start = 0;
  for (;;) {
    size_t nl = pending.find('\n', start);
    if (nl == std::string::npos) break;
    emit(rank, stream, pending.substr(start, nl - start));
    start = nl + 1;
  }
  pending.erase(0, start);
  while (pending.size() > kMaxLine) {
    emit(rank, stream, pending.substr(0, kMaxLine));
    pending.erase(0, kMaxLine);
  }
  // An unfinished line redrawn with carriage returns: only its latest state is kept and drawn
  // (when nothing follows the last '\r' yet, the state before it).
  const size_t last = pending.rfind('\r');
  if (last == std::string::npos) return;
  size_t from = last;
  if (last + 1 == pending.size()) {
    const size_t before = last == 0 ? std::string::npos : pending.rfind('\r', last - 1);
    from = before == std::string::npos ? 0 : before;
  }
  pending.erase(0, from);
  std::string text = pending;
  if (!text.empty() && text.front() == '\r') text.erase(0, 1);
  if (!text.empty() && text.back() == '\r') text.pop_back();
  if (!text.empty()) redraw(rank, stream, text);
}

void OutputRouter::finish(int rank, Stream stream) {
  std::string& pending = state(rank).pending[stream == Stream::kOut ? 0 : 1];
  if (pending.empty()) return;
  std::string line;
  line.swap(pending);
  emit(rank, stream, line);
}

std::vector<std::string> OutputRouter::stderr_tail(int rank) const {
  size_t index = static_cast<size_t>(rank + 1);
  if (rank < -1 || index >= ranks_.size()) return {};
  const auto& tail = ranks_[index].tail;
  return {tail.begin(), tail.end()};
}

void OutputRouter::hide(int rank) { state(rank).hidden = true; }

void OutputRouter::note(const std::string& line) {
  if (config_.terminal) {
    end_drawn_line();
    sink_.write(Stream::kErr, line + "\n");
  }
  if (summary_) summary_->line(line);
}

}  // namespace nano
