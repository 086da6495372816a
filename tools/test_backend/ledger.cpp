// Ledger: a request log written with one O_APPEND write per line.
#include "ledger.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

namespace rondel::test_backend {

Ledger::~Ledger() {
  if (fd_ >= 0) ::close(fd_);
}

core::Result<bool> Ledger::open(const std::string& path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) return core::fail("cannot open ledger " + path + ": " + std::strerror(errno));
  return true;
}

void Ledger::append(std::string_view request_id, std::string_view method, std::string_view target,
                    uint64_t body_bytes) noexcept {
  if (fd_ < 0) return;
  try {
    line_.clear();
    line_.append(request_id.empty() ? std::string_view("-") : request_id);
    line_.push_back(' ');
    line_.append(method);
    line_.push_back(' ');
    line_.append(target.empty() ? std::string_view("-") : target);
    line_.push_back(' ');
    char digits[24];
    auto end = std::to_chars(digits, digits + sizeof digits, body_bytes).ptr;
    line_.append(digits, end);
    line_.push_back('\n');
  } catch (...) {
    return;  // Out of memory: drop the line rather than crash the backend.
  }
  const char* p = line_.data();
  size_t left = line_.size();
  while (left > 0) {
    ssize_t n = ::write(fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    p += n;
    left -= static_cast<size_t>(n);
  }
}

}  // namespace rondel::test_backend
