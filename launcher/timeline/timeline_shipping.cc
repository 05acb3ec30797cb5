#include "launcher/timeline/timeline_shipping.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "launcher/process/frames.h"
#include "launcher/timeline/timeline_merge.h"

namespace nano {

// A shipped file is read whole on nano-run's side: never cut twice, at another place.
static_assert(kMaxShippedRecords <= kMaxRecordsFileBytes, "shipped records must fit the records read per file");

namespace {

// A number as the recorder writes it: digits without a leading zero, fewer than ten of them (so
// that any reader's int holds it).
bool plain_number(const std::string& text) {
  return !text.empty() && text.size() < 10 && text.find_first_not_of("0123456789") == std::string::npos &&
         (text == "0" || text[0] != '0');
}

}  // namespace

bool is_records_file_name(const std::string& name) {
  // Exactly the name the recorder writes, "rank-R.attempt-A": no path, no sign, nothing after.
  const std::string rank = "rank-", attempt = ".attempt-";
  const size_t at = name.find(attempt);
  return name.rfind(rank, 0) == 0 && at != std::string::npos &&
         plain_number(name.substr(rank.size(), at - rank.size())) && plain_number(name.substr(at + attempt.size()));
}

std::string shipped_records_payload(const std::string& name, const std::string& bytes) { return name + "\n" + bytes; }

std::optional<std::pair<std::string, std::string>> parse_shipped_records(const std::string& payload) {
  const std::size_t newline = payload.find('\n');
  if (newline == std::string::npos) return std::nullopt;
  std::string name = payload.substr(0, newline);
  if (!is_records_file_name(name)) return std::nullopt;
  return std::make_pair(std::move(name), payload.substr(newline + 1));
}

std::string make_shipping_folder(const std::string& files_dir) {
  if (files_dir.empty()) return "";
  const std::string folder = files_dir + "/timeline";
  return ::mkdir(folder.c_str(), 0700) == 0 ? folder : "";
}

std::vector<std::string> records_to_ship(const std::string& folder) {
  std::vector<std::string> payloads;
  DIR* dir = opendir(folder.c_str());
  if (!dir) return payloads;
  while (dirent* e = readdir(dir)) {
    if (!is_records_file_name(e->d_name)) continue;
    std::ifstream in(folder + "/" + e->d_name, std::ios::binary);
    std::string bytes(kMaxShippedRecords, '\0');
    in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    bytes.resize(static_cast<std::size_t>(in.gcount()));
    payloads.push_back(shipped_records_payload(e->d_name, bytes));
  }
  closedir(dir);
  return payloads;
}

void keep_shipped_records(const std::string& folder, const std::string& payload) {
  const auto shipped = parse_shipped_records(payload);
  if (folder.empty() || !shipped) return;
  // O_EXCL: a file already there (one name sent twice) is never overwritten.
  const int fd =
      ::open((folder + "/" + shipped->first).c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return;
  write_all(fd, shipped->second);
  ::close(fd);
}

}  // namespace nano
