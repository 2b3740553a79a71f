// Reading the files that settings name (HOCCL_TOPO_FILE, HOCCL_TUNE_FILE,
// HOCCL_TUNER_RULES, HOCCL_TOPO_PROBE_DIR's results): regular files only,
// whole and bounded. Opening never blocks, so a FIFO or a device named by
// mistake is refused at once instead of stopping init in open() or read().
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdio>
#include <string>

#include "base/error.h"

namespace hoccl {

// The whole of `path` into *out if it is a regular file of at most
// maxBytes; else hocclInvalidArgument naming the path and what is wrong
// (missing, a FIFO, a directory, too large). The caller adds the setting.
Status readRegularFile(const std::string& path, size_t maxBytes, std::string* out);

// fopen(path, "w") that does not block on a FIFO no process reads (it
// fails with ENXIO instead); null with errno set on failure. For the files
// settings name for writing (HOCCL_DEBUG_FILE, HOCCL_TOPO_DUMP_FILE), where
// a pipe or a terminal that is read is fine.
FILE* openForWriting(const std::string& path);

// "" for a regular file; else what the mode is ("a FIFO", "a directory",
// "a character device", ...), for messages.
const char* notRegularFile(mode_t mode);

}  // namespace hoccl
