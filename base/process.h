// Whether another process on this machine still runs.
#pragma once

namespace hoccl {

// True when process `pid` has ended: it no longer exists, or it is a zombie
// (exited, its parent has not reaped it yet). kill(pid, 0) alone cannot
// tell: it succeeds on a zombie, which a launcher that waits for its
// children in rank order (multiprocessing's join, a shell's `wait`) can
// keep for as long as the job runs. False while it runs or stops
// (SIGSTOP), and for a pid this process may not signal and whose state it
// cannot read. One kill() and, for a live process, one read of
// /proc/<pid>/stat.
bool processEnded(int pid);

}  // namespace hoccl
