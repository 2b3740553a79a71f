// Logging from the NCCL plugins through NCCL's logger, the function NCCL
// hands to every init. hoccl's own log lines (the TCP transport's, the
// topology loader's) go there too unless HOCCL_DEBUG is set, in which case
// hoccl keeps logging where HOCCL_DEBUG_FILE says.
#pragma once

#include "hoccl_nccl/common.h"

namespace hoccl {
namespace ncclplugin {

// Remembers NCCL's logger (the latest non-null one) for plog().
void useNcclLogger(ncclDebugLogger_t fn);

// printf-style line at NCCL's level and subsystem flags; a no-op until
// NCCL has given a logger.
void plog(ncclDebugLogLevel level, unsigned long flags, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));

}  // namespace ncclplugin
}  // namespace hoccl

#define PLOG_WARN(...) ::hoccl::ncclplugin::plog(NCCL_LOG_WARN, NCCL_ALL, __FILE__, __LINE__, __VA_ARGS__)
#define PLOG_INFO(flags, ...) ::hoccl::ncclplugin::plog(NCCL_LOG_INFO, flags, __FILE__, __LINE__, __VA_ARGS__)
