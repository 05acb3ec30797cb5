#include "runtime/in_program_report.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

namespace nano {
namespace detail {

const char* result_kind(const TrainResult& r) {
  struct Kind {
    const char* operator()(std::monostate) const { return "nothing"; }
    const char* operator()(double) const { return "double"; }
    const char* operator()(int64_t) const { return "int64"; }
    const char* operator()(const std::string&) const { return "string"; }
    const char* operator()(const at::Tensor&) const { return "tensor"; }
  };
  return std::visit(Kind{}, r);
}

}  // namespace detail

namespace in_program {
namespace {

// The archive's keys. "result_kind" holds result_kind()'s word, so the file does not depend on
// the order of TrainResult's alternatives.
constexpr const char* kNames = "names";
constexpr const char* kOptimizers = "optimizers";
constexpr const char* kResultKind = "result_kind";
constexpr const char* kResult = "result";
constexpr const char* kResultTensor = "result_tensor";

std::string tensor_key(std::size_t i) { return "t" + std::to_string(i); }
std::string optimizer_key(std::size_t i) { return "optimizer-" + std::to_string(i); }

}  // namespace

void write_report(const std::string& path, const Report& report) {
  torch::serialize::OutputArchive archive;
  std::string names;
  for (const std::string& name : report.names) names += name + "\n";
  archive.write(kNames, c10::IValue(names));
  archive.write(kOptimizers, c10::IValue(static_cast<int64_t>(report.optimizer_states.size())));
  for (std::size_t i = 0; i < report.optimizer_states.size(); ++i) {
    const std::string& bytes = report.optimizer_states[i];
    at::Tensor t = at::empty({static_cast<int64_t>(bytes.size())}, at::kByte);
    std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
    archive.write(optimizer_key(i), t, /*is_buffer=*/true);
  }
  for (std::size_t i = 0; i < report.tensors.size(); ++i)
    archive.write(tensor_key(i), report.tensors[i].detach(), /*is_buffer=*/true);
  archive.write(kResultKind, c10::IValue(std::string(detail::result_kind(report.result))));
  if (auto* d = std::get_if<double>(&report.result)) archive.write(kResult, c10::IValue(*d));
  if (auto* i = std::get_if<int64_t>(&report.result)) archive.write(kResult, c10::IValue(*i));
  if (auto* s = std::get_if<std::string>(&report.result)) archive.write(kResult, c10::IValue(*s));
  if (auto* t = std::get_if<at::Tensor>(&report.result)) archive.write(kResultTensor, t->detach(), true);
  // Into the file the caller made for it (mkstemp: 0600, its own), never through a link nor into
  // a file of the same name that the caller did not make.
  const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC);
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::getuid()) {
    const std::string why = fd < 0 ? std::strerror(errno) : "not the caller's own file";
    if (fd >= 0) ::close(fd);
    throw Error("nano: rank 0 cannot write its results to " + path + ": " + why);
  }
  std::string failure;
  archive.save_to([fd, &failure](const void* data, size_t size) -> size_t {
    for (size_t done = 0; done < size;) {
      const ssize_t n = ::write(fd, static_cast<const char*>(data) + done, size - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        if (failure.empty()) failure = n < 0 ? std::strerror(errno) : "short write";
        return done;
      }
      done += static_cast<size_t>(n);
    }
    return size;
  });
  ::close(fd);
  if (!failure.empty()) throw Error("nano: rank 0 cannot write its results to " + path + ": " + failure);
}

Report read_report(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || st.st_size == 0) {
    throw Error("nano: rank 0 finished without reporting its results to " + path +
                " (did the re-executed program reach the same training call?)");
  }
  Report report;
  torch::serialize::InputArchive archive;
  archive.load_from(path);
  c10::IValue v;
  archive.read(kNames, v);
  const std::string names = v.toStringRef();
  std::size_t start = 0;
  for (std::size_t end; (end = names.find('\n', start)) != std::string::npos; start = end + 1) {
    report.names.push_back(names.substr(start, end - start));
    at::Tensor t;
    archive.read(tensor_key(report.tensors.size()), t, /*is_buffer=*/true);
    report.tensors.push_back(t);
  }
  archive.read(kOptimizers, v);
  for (int64_t i = 0; i < v.toInt(); ++i) {
    at::Tensor t;
    archive.read(optimizer_key(static_cast<std::size_t>(i)), t, /*is_buffer=*/true);
    report.optimizer_states.emplace_back(static_cast<const char*>(t.data_ptr()), static_cast<std::size_t>(t.numel()));
  }
  archive.read(kResultKind, v);
  const std::string kind = v.toStringRef();
  if (kind == "double" || kind == "int64" || kind == "string") archive.read(kResult, v);
  if (kind == "double") report.result = v.toDouble();
  if (kind == "int64") report.result = v.toInt();
  if (kind == "string") report.result = v.toStringRef();
  if (kind == "tensor") {
    at::Tensor t;
    archive.read(kResultTensor, t, true);
    report.result = t;
  }
  return report;
}

}  // namespace in_program
}  // namespace nano
