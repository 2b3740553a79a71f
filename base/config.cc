// The settings snapshot: the table (config_table.cc) applied to the
// environment once per process.
#include "base/config.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <strings.h>

namespace hoccl {
namespace {

std::string join(const std::vector<std::string>& names, const char* lastSep) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? lastSep : ", ") + names[i];
  return out;
}

size_t rowIndex(const char* name) {
  const std::vector<SettingDecl>& all = allSettings();
  for (size_t i = 0; i < all.size(); ++i)
    if (strcmp(all[i].name, name) == 0) return i;
  fprintf(stderr, "hoccl: internal error: undeclared setting %s\n", name);
  abort();
}

std::mutex snapshotMutex;
std::shared_ptr<const SettingsSnapshot> currentSnapshot;  // guarded by snapshotMutex

}  // namespace

const SettingDecl& settingDecl(const char* name) { return allSettings()[rowIndex(name)]; }

std::string invalidSetting(const char* name, const std::string& value, const std::string& expected) {
  return std::string(name) + "=\"" + value + "\" is invalid: expected " + expected;
}

std::string applySetting(Settings* s, const char* name, const std::string& text) {
  std::string why = settingDecl(name).field.parse(text, s);
  return why.empty() ? "" : invalidSetting(name, text, why);
}

std::string expectOneOf(const std::string& value, const std::vector<std::string>& choices) {
  for (const std::string& c : choices)
    if (strcasecmp(value.c_str(), c.c_str()) == 0) return "";
  return (choices.size() > 2 ? "one of " : "") + join(choices, choices.size() > 2 ? ", " : " or ");
}

std::string Settings::fingerprint() const {
  std::string out;
  for (const SettingDecl& d : allSettings())
    if (d.mustMatchAcrossRanks) out += std::string(d.name) + "=" + d.field.show(*this) + "\n";
  return out;
}

SettingsSnapshot SettingsSnapshot::fromEnvironment() {
  SettingsSnapshot snap;
  for (const SettingDecl& d : allSettings()) {
    Row r;
    const char* env = getenv(d.name);
    r.fromEnvironment = env && *env;
    r.text = r.fromEnvironment ? env : d.defaultValue;
    std::string why = d.field.parse(r.text, &snap.values_);
    if (!why.empty()) {
      r.problem = invalidSetting(d.name, r.text, why);
      // The default stands in, so readers that tolerate a bad value (the
      // logger) still get a sane one.
      d.field.parse(d.defaultValue, &snap.values_);
      if (snap.error_.empty()) snap.error_ = r.problem;
    }
    snap.rows_.push_back(std::move(r));
  }
  return snap;
}

const SettingsSnapshot::Row& SettingsSnapshot::row(const char* name) const { return rows_[rowIndex(name)]; }
const std::string& SettingsSnapshot::text(const char* name) const { return row(name).text; }
bool SettingsSnapshot::fromEnvironment(const char* name) const { return row(name).fromEnvironment; }
const std::string& SettingsSnapshot::problem(const char* name) const { return row(name).problem; }

std::shared_ptr<const SettingsSnapshot> processSettings() {
  std::lock_guard<std::mutex> lock(snapshotMutex);
  if (!currentSnapshot) currentSnapshot = std::make_shared<const SettingsSnapshot>(SettingsSnapshot::fromEnvironment());
  return currentSnapshot;
}

void reloadSettingsForTesting() {
  std::lock_guard<std::mutex> lock(snapshotMutex);
  currentSnapshot.reset();
}

}  // namespace hoccl
