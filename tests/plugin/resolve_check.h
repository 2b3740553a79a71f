#pragma once

#include <string>

namespace pluginharness {

// `pluginDir` holds both libraries and must be on LD_LIBRARY_PATH.
int runResolveCheck(const std::string& pluginDir);

}  // namespace pluginharness
