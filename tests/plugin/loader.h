// What NCCL 2.28-2.30 does to find a plugin (src/plugin/plugin_open.cc,
// net.cc, tuner.cc), redone so tests can check our libraries the same way:
// name resolution, dlopen(RTLD_NOW | RTLD_LOCAL), symbol lookup newest to
// oldest, and the tuner's fallback to the net plugin's library.
#pragma once

#include <string>
#include <vector>

namespace pluginharness {

enum class PluginType { Net, Tuner };

struct Opened {
  void* handle = nullptr;
  std::string openedName;           // the name dlopen succeeded with
  std::vector<std::string> tried;   // every name tried, in order
  std::string error;                // last dlerror()
};

// NCCL's openPluginLib(type, name): `name` as given (a path or a file name
// for the dynamic linker), then "libnccl-<type>-<name>.so" unless the name
// has a '/' or already is lib*.so; no name: "libnccl-<type>.so".
Opened openPluginLib(PluginType type, const std::string& name);

// The NCCL_NET_PLUGIN list: unset -> [""], "none" -> [], else the comma list.
std::vector<std::string> netPluginNames(const char* env);

struct Symbol {
  void* address = nullptr;
  int version = 0;
};
// The first of prefix<newest> ... prefix<oldest> that resolves.
Symbol findNewest(void* handle, const char* prefix, int newest, int oldest);

// True if the library at `name` is still mapped (dlopen RTLD_NOLOAD).
bool stillLoaded(const std::string& name);

}  // namespace pluginharness
