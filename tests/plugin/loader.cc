#include "tests/plugin/loader.h"

#include <dlfcn.h>
#include <strings.h>

namespace pluginharness {

namespace {

const char* prefixOf(PluginType t) { return t == PluginType::Net ? "libnccl-net" : "libnccl-tuner"; }

bool endsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

void* tryOpen(Opened* o, const std::string& name) {
  o->tried.push_back(name);
  void* h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h) {
    o->openedName = name;
  } else {
    const char* e = dlerror();
    o->error = e ? e : "";
  }
  return h;
}

}  // namespace

Opened openPluginLib(PluginType type, const std::string& name) {
  Opened o;
  if (name.empty()) {
    o.handle = tryOpen(&o, std::string(prefixOf(type)) + ".so");
    return o;
  }
  o.handle = tryOpen(&o, name);
  if (o.handle) return o;
  bool hasSlash = name.find('/') != std::string::npos;
  bool isLibSo = name.compare(0, 3, "lib") == 0 && endsWith(name, ".so");
  if (!hasSlash && !isLibSo) o.handle = tryOpen(&o, std::string(prefixOf(type)) + "-" + name + ".so");
  return o;
}

std::vector<std::string> netPluginNames(const char* env) {
  if (!env) return {""};
  if (strcasecmp(env, "none") == 0) return {};
  std::vector<std::string> out;
  std::string s = env;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t comma = s.find(',', pos);
    if (comma == std::string::npos) comma = s.size();
    std::string item = s.substr(pos, comma - pos);
    if (!item.empty() && item.size() < 255) out.push_back(item);
    pos = comma + 1;
  }
  return out;
}

Symbol findNewest(void* handle, const char* prefix, int newest, int oldest) {
  for (int v = newest; v >= oldest; --v) {
    std::string sym = std::string(prefix) + std::to_string(v);
    if (void* p = dlsym(handle, sym.c_str())) return {p, v};
  }
  return {};
}

bool stillLoaded(const std::string& name) {
  void* h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (!h) return false;
  dlclose(h);
  return true;
}

}  // namespace pluginharness
