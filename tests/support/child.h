// Runs part of a test in a fork()ed child: a lowered limit, a private mount
// or a changed user then stays there, and a hang is killed at a deadline
// instead of stopping the suite. The child reports through a pipe, one
// line per fact ("rank 1 3.21 ok"), and the parent checks the lines.
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace testutil {

struct ChildOutcome {
  std::vector<std::string> lines;  // what the child wrote, line by line
  int exitCode = -1;               // 128 + signal if killed; -1 if it outlived the deadline
  double seconds = 0;
  bool hung() const { return exitCode == -1; }
};

// A child started by startChild; waitChild collects it.
struct Child {
  pid_t pid = -1;
  int fd = -1;
  std::chrono::steady_clock::time_point start;
};

// Forks; the child runs body(out) and exits with its return value.
inline Child startChild(const std::function<int(FILE* out)>& body) {
  Child c;
  int fds[2];
  if (pipe(fds) != 0) return c;
  fflush(nullptr);
  c.start = std::chrono::steady_clock::now();
  c.pid = fork();
  if (c.pid == 0) {
    close(fds[0]);
    FILE* out = fdopen(fds[1], "w");
    setvbuf(out, nullptr, _IOLBF, 0);
    int rc = body(out);
    fflush(out);
    _exit(rc);
  }
  close(fds[1]);
  if (c.pid < 0) close(fds[0]);
  else c.fd = fds[0];
  return c;
}

// Reads what the child writes until it exits; kills it once `limitSec`
// have passed since it started (exitCode -1).
inline ChildOutcome waitChild(Child& c, double limitSec) {
  ChildOutcome o;
  if (c.pid < 0) return o;
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - c.start).count(); };
  std::string text;
  for (;;) {
    int leftMs = static_cast<int>((limitSec - elapsed()) * 1000);
    if (leftMs <= 0) break;
    pollfd p{c.fd, POLLIN, 0};
    if (poll(&p, 1, leftMs) <= 0) continue;
    char buf[4096];
    ssize_t n = read(c.fd, buf, sizeof buf);
    if (n <= 0) break;  // every holder of the pipe's write end has exited
    text.append(buf, static_cast<size_t>(n));
  }
  close(c.fd);
  int status = 0;
  pid_t done = 0;
  while ((done = waitpid(c.pid, &status, WNOHANG)) == 0 && elapsed() < limitSec) usleep(10000);
  if (done == c.pid) {
    o.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  } else {
    kill(c.pid, SIGKILL);
    waitpid(c.pid, &status, 0);
  }
  o.seconds = elapsed();
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) o.lines.push_back(line);
  return o;
}

inline ChildOutcome runInChild(double limitSec, const std::function<int(FILE* out)>& body) {
  Child c = startChild(body);
  return waitChild(c, limitSec);
}

}  // namespace testutil
