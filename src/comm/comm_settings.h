// A communicator's settings: the process's snapshot of the environment
// (base/config.h) with the communicator's hocclConfig_t on top, and the
// checks base cannot make because they need a higher layer (HOCCL_ALGO
// against the algorithm registry).
#pragma once

#include <string>
#include <vector>

#include "hoccl.h"
#include "base/config.h"
#include "base/error.h"

namespace hoccl {

// The settings of a new communicator, or of hocclGetUniqueId (config null).
// Fails with hocclInvalidArgument naming the first bad HOCCL_* value or
// config field. Does not read the environment again.
Status commSettings(const hocclConfig_t* config, Settings* out);

// `config`'s fields on top of `s` (hocclCommSplit: the parent's settings).
Status applyConfig(const hocclConfig_t* config, Settings* s);

// A copy of the caller's config for a later init (non-blocking or
// grouped) that reads no byte past config.size: a caller built against an
// older header passes a smaller struct. The fields it lacks are left as
// HOCCL_CONFIG_INITIALIZER's, and its size and magic are kept, so the copy
// is accepted or refused as the original would be.
hocclConfig_t copyConfig(const hocclConfig_t& config);

// The names HOCCL_ALGO and config->algorithm accept: auto and every
// algorithm of the registry (which also takes their former names, such as
// "board" for oneshot_shm).
std::vector<std::string> algorithmChoices();
// Checks an algorithm setting against the registry: "" when it is auto or
// names a row, which it then spells as the row's name (a former name
// becomes the current one, so split members compare names and logs show
// one); otherwise what was expected.
std::string checkAlgorithmName(std::string* algo);

}  // namespace hoccl
