#include "base/regular_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace hoccl {

FILE* openForWriting(const std::string& path) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, 0644);
  if (fd < 0) return nullptr;
  const int flags = fcntl(fd, F_GETFL);
  FILE* f = flags >= 0 && fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == 0 ? fdopen(fd, "w") : nullptr;
  if (!f) {
    const int err = errno;
    close(fd);
    errno = err;
  }
  return f;
}

const char* notRegularFile(mode_t mode) {
  if (S_ISREG(mode)) return "";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

Status readRegularFile(const std::string& path, size_t maxBytes, std::string* out) {
  // O_NONBLOCK: opening a FIFO with no writer returns at once; the check
  // below then refuses it. A regular file ignores the flag.
  const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return errorf(hocclInvalidArgument, "cannot open %s: %s", path.c_str(), strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  struct stat st;
  if (fstat(fd, &st) != 0) return errorf(hocclInvalidArgument, "cannot stat %s: %s", path.c_str(), strerror(errno));
  if (!S_ISREG(st.st_mode))
    return errorf(hocclInvalidArgument, "%s is %s, not a regular file", path.c_str(), notRegularFile(st.st_mode));
  if (static_cast<unsigned long long>(st.st_size) > maxBytes)
    return errorf(hocclInvalidArgument, "%s is larger than %zu bytes (%lld bytes)", path.c_str(), maxBytes,
                  static_cast<long long>(st.st_size));
  // Read at most one byte past the limit: a file that grew since fstat is
  // refused too, never read without end.
  std::string text(static_cast<size_t>(st.st_size) + 1, '\0');
  size_t got = 0;
  for (;;) {
    if (got == text.size()) {
      if (text.size() > maxBytes) break;
      text.resize(std::min(maxBytes + 1, text.size() * 2));
    }
    const ssize_t n = read(fd, &text[got], text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errorf(hocclInvalidArgument, "cannot read %s: %s", path.c_str(), strerror(errno));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  if (got > maxBytes) return errorf(hocclInvalidArgument, "%s is larger than %zu bytes", path.c_str(), maxBytes);
  text.resize(got);
  *out = std::move(text);
  return Status();
}

}  // namespace hoccl
