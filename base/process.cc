#include "base/process.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "base/descriptors.h"

namespace hoccl {

bool processEnded(int pid) {
  if (pid <= 0) return false;
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  // /proc/<pid>/stat is "pid (comm) S ...": the state follows the last ')'
  // (comm may itself hold parentheses and spaces).
  char path[32];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  int fd;
  {
    OpeningDescriptor opening;
    fd = open(path, O_RDONLY | O_CLOEXEC);
  }
  if (fd < 0) return errno == ENOENT;  // reaped since the kill(); EMFILE: cannot tell
  char buf[512];
  const ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  const char* close = strrchr(buf, ')');
  if (!close || close[1] != ' ') return false;
  const char state = close[2];
  return state == 'Z' || state == 'X';
}

}  // namespace hoccl
