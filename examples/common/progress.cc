#include "examples/common/progress.h"

#include <unistd.h>

#include <cmath>

namespace nano::examples {
namespace {

int percent(int64_t done, int64_t total) {
  if (total <= 0) return 0;
  return static_cast<int>((done * 100) / total);
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

}  // namespace

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto total = static_cast<int64_t>(seconds);
  const int64_t h = total / 3600, m = (total / 60) % 60, s = total % 60;
  char buf[64];
  if (h > 0)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", static_cast<long long>(h), static_cast<long long>(m),
                  static_cast<long long>(s));
  else
    std::snprintf(buf, sizeof buf, "%02lld:%02lld", static_cast<long long>(m), static_cast<long long>(s));
  return buf;
}

std::string format_rate(int64_t images, double seconds) {
  if (!(seconds > 0)) return "? img/s";
  return fixed(static_cast<double>(images) / seconds, 1) + " img/s";
}

double eta_seconds(int64_t done, int64_t total, double elapsed_s) {
  if (done <= 0 || elapsed_s < 0) return -1;
  return elapsed_s / static_cast<double>(done) * static_cast<double>(total - done);
}

std::string format_bar(const ProgressState& s, int width) {
  const int64_t filled = s.total > 0 ? (s.done * width) / s.total : 0;
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(static_cast<size_t>(width), ' ');
  char pct[8];
  std::snprintf(pct, sizeof pct, "%3d%%", percent(s.done, s.total));
  return "epoch " + std::to_string(s.epoch) + "/" + std::to_string(s.epochs) + " " + pct + "|" + bar + "| " +
         std::to_string(s.done) + "/" + std::to_string(s.total) + " [" + format_duration(s.elapsed_s) + "<" +
         format_duration(eta_seconds(s.done - s.resumed, s.total - s.resumed, s.elapsed_s)) + ", " +
         format_rate(s.images, s.elapsed_s) + ", loss " + fixed(s.running_loss, 4) + "]";
}

std::string format_line(const ProgressState& s) {
  return "epoch " + std::to_string(s.epoch) + "/" + std::to_string(s.epochs) + " batch " + std::to_string(s.done) +
         "/" + std::to_string(s.total) + " (" + std::to_string(percent(s.done, s.total)) + "%) " +
         format_rate(s.images, s.elapsed_s) + " elapsed " + format_duration(s.elapsed_s) + " eta " +
         format_duration(eta_seconds(s.done - s.resumed, s.total - s.resumed, s.elapsed_s)) + " loss " +
         fixed(s.running_loss, 4);
}

bool plain_line_due(int64_t done, int64_t total, int64_t last_done, double elapsed_s, double last_print_s,
                    double interval_s) {
  if (done <= last_done) return false;
  if (done >= total) return true;
  if (total > 0 && (done * 10) / total > (last_done * 10) / total) return true;
  return elapsed_s - last_print_s >= interval_s;
}

ProgressPrinter::ProgressPrinter(std::FILE* out, int epoch, int epochs, int64_t total_batches, bool enabled, int tty)
    : out_(out),
      enabled_(enabled),
      tty_(tty < 0 ? ::isatty(::fileno(out)) != 0 : tty != 0),
      start_(std::chrono::steady_clock::now()) {
  state_.epoch = epoch;
  state_.epochs = epochs;
  state_.total = total_batches;
}

void ProgressPrinter::resume_after(int64_t batches) {
  if (batches <= 0 || state_.resumed > 0) return;
  state_.resumed = batches;
  state_.done += batches;
  last_line_done_ = state_.done;  // the tenths count on from here
  if (!enabled_) return;
  std::fprintf(out_, "epoch %d/%d: resumed after batch %lld/%lld\n", state_.epoch, state_.epochs,
               static_cast<long long>(batches), static_cast<long long>(state_.total));
  std::fflush(out_);
}

void ProgressPrinter::update(int64_t batches, int64_t images, double loss) {
  state_.done += batches;
  state_.images += images;
  loss_sum_ += loss * static_cast<double>(batches);
  const int64_t here = state_.done - state_.resumed;
  state_.running_loss = here > 0 ? loss_sum_ / static_cast<double>(here) : 0;
  state_.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  draw(false);
}

void ProgressPrinter::finish() {
  state_.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  draw(true);
}

void ProgressPrinter::draw(bool final) {
  if (!enabled_) return;
  if (tty_) {
    if (!final && last_draw_s_ >= 0 && state_.elapsed_s - last_draw_s_ < 0.1) return;
    last_draw_s_ = state_.elapsed_s;
    std::fprintf(out_, "\r%s%s", format_bar(state_).c_str(), final ? "\n" : "");
  } else {
    // The final call re-prints only if the last batch has not been shown yet.
    if (!plain_line_due(state_.done, final ? state_.done : state_.total, last_line_done_, state_.elapsed_s,
                        last_line_s_))
      return;
    last_line_done_ = state_.done;
    last_line_s_ = state_.elapsed_s;
    std::fprintf(out_, "%s\n", format_line(state_).c_str());
  }
  std::fflush(out_);
}

}  // namespace nano::examples
