// Reads flight recorder dumps and says what happened (flight_why.h).
#include "src/exec/flight_why.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "base/json.h"

namespace hoccl {

std::string DumpedCall::describe() const {
  if (!collective()) return "hocclSend/hocclRecv group";
  std::string out = coll + "(count=" + std::to_string(count) + ", " + dtype;
  if (coll == "AllReduce" || coll == "ReduceScatter" || coll == "Reduce") out += ", " + op;
  if (coll == "Broadcast" || coll == "Reduce") out += ", root=" + std::to_string(root);
  return out + ")";
}

std::string rankList(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    out += (out.empty() ? "" : ",") + std::to_string(ranks[i]);
    if (j > i) out += (j == i + 1 ? "," : "-") + std::to_string(ranks[j]);
    i = j + 1;
  }
  return out;
}

namespace {

// ---- Reading -------------------------------------------------------------------

class Reader {
 public:
  explicit Reader(const std::string& file) : file_(file) {}
  Status bad(const json::Value& v, const std::string& what) const {
    return errorf(hocclInvalidArgument, "%s: line %d: %s", file_.c_str(), v.line, what.c_str());
  }
  // A member of `obj` of the given type; null (and *st set, if `required`) when absent or of another type.
  const json::Value* get(const json::Value& obj, const char* key, json::Type type, bool required, Status* st) const {
    const json::Value* v = obj.find(key);
    if (v && v->type() == type) return v;
    if (required && st->ok())
      *st = bad(obj, std::string(v ? "\"" + std::string(key) + "\" is not a " : "no \"" + std::string(key) + "\" ") +
                         (v ? json::typeName(type) : "member"));
    return nullptr;
  }
  template <class T>
  void integer(const json::Value& obj, const char* key, T* out, bool required, Status* st) const {
    const json::Value* v = get(obj, key, json::Type::Number, required, st);
    int64_t x = 0;
    if (v && v->asInteger(&x) && x >= 0) *out = static_cast<T>(x);
    else if (v && st->ok()) *st = bad(*v, "\"" + std::string(key) + "\" is not a whole number");
  }
  void text(const json::Value& obj, const char* key, std::string* out, bool required, Status* st) const {
    if (const json::Value* v = get(obj, key, json::Type::String, required, st)) *out = v->asString();
  }
  void number(const json::Value& obj, const char* key, double* out, Status* st) const {
    if (const json::Value* v = get(obj, key, json::Type::Number, false, st)) *out = v->asNumber();
  }

 private:
  const std::string& file_;
};

Status readCall(const Reader& rd, const json::Value& v, DumpedCall* c) {
  if (!v.isObject()) return rd.bad(v, "a call is not an object");
  Status st;
  rd.integer(v, "seq", &c->seq, true, &st);
  rd.text(v, "coll", &c->coll, true, &st);
  rd.text(v, "state", &c->state, true, &st);
  rd.integer(v, "count", &c->count, false, &st);
  rd.text(v, "dtype", &c->dtype, false, &st);
  rd.text(v, "op", &c->op, false, &st);
  rd.integer(v, "root", &c->root, false, &st);
  rd.text(v, "algorithm", &c->algorithm, false, &st);
  rd.text(v, "waiting", &c->waiting, false, &st);
  rd.text(v, "error", &c->error, false, &st);
  rd.number(v, "started", &c->started, &st);
  rd.number(v, "ended", &c->ended, &st);
  if (const json::Value* peers = rd.get(v, "wait_peers", json::Type::Array, false, &st)) {
    for (const json::Value& p : peers->items()) {
      int64_t x = 0;
      if (p.asInteger(&x)) c->waitPeers.push_back(static_cast<int>(x));
    }
  }
  return st;
}

}  // namespace

Status readFlightDump(const std::string& text, const std::string& file, std::vector<DumpedRank>* out) {
  json::Value doc;
  Status st = json::parse(text, &doc);
  if (!st.ok()) return Status(st.code(), file + ": " + st.message());
  Reader rd(file);
  int version = 0;
  if (doc.isObject()) rd.integer(doc, "hoccl_flight_recorder", &version, false, &st);
  if (!doc.isObject() || version != 1)
    return rd.bad(doc, "not a hoccl flight recorder dump (HOCCL_DEBUG_DUMP) of format 1");
  DumpedRank head;
  head.file = file;
  rd.number(doc, "time", &head.dumpTime, &st);
  rd.text(doc, "reason", &head.reason, false, &st);
  const json::Value* comms = rd.get(doc, "communicators", json::Type::Array, true, &st);
  if (!st.ok()) return st;
  for (const json::Value& cv : comms->items()) {
    if (!cv.isObject()) return rd.bad(cv, "a communicator is not an object");
    DumpedRank r = head;
    rd.text(cv, "comm", &r.comm, true, &st);
    rd.integer(cv, "rank", &r.rank, true, &st);
    rd.integer(cv, "nranks", &r.nranks, true, &st);
    rd.text(cv, "host", &r.host, false, &st);
    rd.integer(cv, "pid", &r.pid, false, &st);
    rd.text(cv, "error", &r.error, false, &st);
    const json::Value* calls = rd.get(cv, "calls", json::Type::Array, true, &st);
    if (!st.ok()) return st;
    if (r.rank >= r.nranks) return rd.bad(cv, "rank " + std::to_string(r.rank) + " of " + std::to_string(r.nranks));
    for (const json::Value& v : calls->items()) {
      DumpedCall c;
      HOCCL_TRY(readCall(rd, v, &c));
      r.calls.push_back(std::move(c));
    }
    out->push_back(std::move(r));
  }
  return Status();
}

// ---- Explaining ------------------------------------------------------------------

namespace {

// One communicator's dumps, by rank.
class CommStory {
 public:
  CommStory(const std::string& comm, const std::map<int, DumpedRank>& members) : comm_(comm), members_(members) {
    for (const auto& [rank, r] : members) {
      nranks_ = std::max(nranks_, r.nranks);
      uint64_t& reached = reached_[rank];
      for (const DumpedCall& c : r.calls) {
        if (!c.collective()) continue;
        calls_[rank][c.seq] = &c;
        reached = std::max(reached, c.seq);
        seqs_.insert(c.seq);
      }
    }
    for (int r = 0; r < nranks_; ++r) (members.count(r) ? present_ : missing_).push_back(r);
  }

  // The report; true if something went wrong.
  bool tell(std::string* out) {
    out_ = out;
    bool problem = disagreement() || missingOrBehind() || unfinished();
    if (problem) firstError();
    lastCompleted();
    return problem;
  }

 private:
  void headline(const std::string& s) { *out_ += "communicator " + comm_ + ": " + s + "\n"; }
  void line(const std::string& s) { *out_ += "  " + s + "\n"; }
  std::string who(int rank) const {
    auto it = members_.find(rank);
    if (it == members_.end()) return "rank " + std::to_string(rank) + " (no dump)";
    return "rank " + std::to_string(rank) + " (host " + shortHost(it->second.host) + ", pid " +
           std::to_string(it->second.pid) + ")";
  }
  // A host id without the boot id that tells containers apart ("node1:<uuid>").
  static std::string shortHost(const std::string& host) {
    const size_t colon = host.rfind(':');
    if (colon == std::string::npos || host.size() - colon - 1 != 36 || host[colon + 9] != '-') return host;
    return host.substr(0, colon);
  }
  static std::string ranksWord(const std::vector<int>& r) { return (r.size() == 1 ? "rank " : "ranks ") + rankList(r); }
  const DumpedCall* call(int rank, uint64_t seq) const {
    auto r = calls_.find(rank);
    if (r == calls_.end()) return nullptr;
    auto c = r->second.find(seq);
    return c == r->second.end() ? nullptr : c->second;
  }
  // Where a rank is in a call: "running: channel 0 ...: waiting to receive
  // from rank 3", else how it failed (the error repeats the wait).
  static std::string stateOf(const DumpedCall& c) {
    if (!c.waiting.empty()) return c.state + ": " + c.waiting;
    return c.error.empty() ? c.state : c.state + ": " + c.error;
  }
  // The earliest failure recorded, usually the cause of the others: one a
  // rank found itself, before one it was told about ("rank 1 stopped
  // because rank 0 ...": the teller records its own end after telling).
  void firstError() {
    const DumpedCall* first = nullptr;
    int firstRank = -1;
    auto relayed = [](const DumpedCall& c) { return c.error.find(" stopped because ") != std::string::npos; };
    for (const auto& [rank, r] : members_)
      for (const DumpedCall& c : r.calls) {
        if (c.state != "failed" || c.error.empty()) continue;
        const bool better = !first || (relayed(*first) && !relayed(c)) ||
                            (relayed(*first) == relayed(c) && c.ended < first->ended);
        if (better) first = &c, firstRank = rank;
      }
    if (first) {
      line("first error: rank " + std::to_string(firstRank) + " in call #" + std::to_string(first->seq) + ": " +
           first->error);
      return;
    }
    for (const auto& [rank, r] : members_)
      if (!r.error.empty()) return line("rank " + std::to_string(rank) + "'s error: " + r.error);
  }

  // The first call whose signature differs between ranks.
  bool disagreement() {
    for (uint64_t seq : seqs_) {
      std::map<std::string, std::vector<int>> bySig;
      for (int r : present_)
        if (const DumpedCall* c = call(r, seq)) bySig[c->describe()].push_back(r);
      if (bySig.size() < 2) continue;
      std::string parts;
      size_t most = 0, tied = 0;
      for (const auto& [sig, ranks] : bySig) {
        parts += (parts.empty() ? "" : "; ") + ranksWord(ranks) + " " + sig;
        if (ranks.size() > most) most = ranks.size(), tied = 0;
        if (ranks.size() == most) ++tied;
      }
      headline("call #" + std::to_string(seq) + " disagrees: " + parts);
      if (tied > 1) line("no majority: every rank must make the same calls in the same order");
      else oddOnesOut(seq, bySig, most);
      // Ranks stopped before the call (by the others' failure, say).
      for (int r : present_) {
        if (call(r, seq) || reached_[r] >= seq) continue;
        const DumpedCall* last = reached_[r] ? call(r, reached_[r]) : nullptr;
        line(who(r) + " did not reach call #" + std::to_string(seq) +
             (last ? ": its last call is #" + std::to_string(last->seq) + " " + last->describe() + ", " + stateOf(*last)
                   : std::string(": no collective recorded")));
      }
      return true;
    }
    return false;
  }
  void oddOnesOut(uint64_t seq, const std::map<std::string, std::vector<int>>& bySig, size_t most) {
    const int major = majority(bySig, most);
    const DumpedCall* othersThis = call(major, seq);
    const DumpedCall* othersNext = call(major, seq + 1);
    for (const auto& [sig, ranks] : bySig) {
      if (ranks.size() == most) continue;
      for (int r : ranks) {
        line(who(r) + " is the odd one out: it called " + sig + " as call #" + std::to_string(seq));
        // A skipped call: this rank's call is the one the others make next.
        if (othersThis && othersNext && othersNext->describe() == sig)
          line("the others call that as call #" + std::to_string(seq + 1) + ": rank " + std::to_string(r) +
               " skipped call #" + std::to_string(seq) + " " + othersThis->describe() +
               " (or made its calls in another order)");
      }
    }
  }
  static int majority(const std::map<std::string, std::vector<int>>& bySig, size_t most) {
    for (const auto& [sig, ranks] : bySig)
      if (ranks.size() == most) return ranks[0];
    return 0;
  }

  // Ranks that never started the newest call the others are in, or wrote no dump.
  bool missingOrBehind() {
    uint64_t top = 0;
    for (int r : present_) top = std::max(top, reached_[r]);
    std::vector<int> behind, at;
    for (int r : present_) (reached_[r] < top ? behind : at).push_back(r);
    if (behind.empty() && missing_.empty()) return false;
    const DumpedCall* c = at.empty() ? nullptr : call(at[0], top);
    const std::string what = c ? "call #" + std::to_string(top) + " " + c->describe() : "any call";
    std::set<int> waitedOn;
    for (int r : at)
      if (const DumpedCall* mine = call(r, top))
        if (mine->state != "done") waitedOn.insert(mine->waitPeers.begin(), mine->waitPeers.end());
    if (!behind.empty()) {
      headline((behind.size() == 1 ? who(behind[0]) : ranksWord(behind)) + " never started " + what + "; " +
               ranksWord(at) + " " + (at.size() == 1 ? "is" : "are") + " in it");
      for (int r : behind) {
        const DumpedCall* last = reached_[r] ? call(r, reached_[r]) : nullptr;
        line(who(r) + ": " + (last ? "its last call is #" + std::to_string(last->seq) + " " + last->describe() + ", " +
                                        stateOf(*last)
                                   : std::string("no collective recorded")));
      }
    }
    if (!missing_.empty()) {
      std::vector<int> waited;
      for (int r : missing_)
        if (waitedOn.count(r)) waited.push_back(r);
      std::string s = "no dump from " + ranksWord(missing_) + " (of " + std::to_string(nranks_) + ")";
      if (!waited.empty()) s += "; " + ranksWord(at) + " wait in " + what + " on " + ranksWord(waited);
      if (behind.empty()) headline(s);
      else line(s);
    }
    for (int r : at)
      if (const DumpedCall* mine = call(r, top))
        line(who(r) + " in call #" + std::to_string(top) + ": " + stateOf(*mine));
    return true;
  }

  // Every rank reached the same call: did it finish everywhere?
  bool unfinished() {
    uint64_t top = 0;
    for (int r : present_) top = std::max(top, reached_[r]);
    std::vector<int> open;
    const DumpedCall* any = nullptr;
    for (int r : present_) {
      const DumpedCall* c = call(r, top);
      if (c) any = c;
      if (c && c->state != "done") open.push_back(r);
    }
    if (!any) return false;
    if (open.empty()) {
      headline("every rank completed call #" + std::to_string(top) + " " + any->describe() +
               ", the last recorded; no hang or mismatch recorded");
      return false;
    }
    headline("call #" + std::to_string(top) + " " + any->describe() + " did not complete on " + ranksWord(open));
    // A rank that started the call only after another had given up on it
    // is the one the others waited for (clocks of different hosts may
    // differ by their synchronisation's error).
    double firstEnd = 0;
    int firstFailed = -1;
    for (int r : open) {
      const DumpedCall* c = call(r, top);
      if (c->state == "failed" && c->ended > 0 && (firstFailed < 0 || c->ended < firstEnd)) {
        firstEnd = c->ended;
        firstFailed = r;
      }
    }
    for (int r : open) {
      const DumpedCall* c = call(r, top);
      if (firstFailed >= 0 && c->started > firstEnd)
        line(who(r) + " started it " + seconds(c->started - firstEnd) + " after rank " + std::to_string(firstFailed) +
             " had failed in it: the others waited for it");
    }
    for (int r : open) line(who(r) + ": " + stateOf(*call(r, top)));
    return true;
  }

  static std::string seconds(double s) {
    char buf[32];
    snprintf(buf, sizeof buf, "%.3f s", s);
    return buf;
  }

  void lastCompleted() {
    uint64_t common = UINT64_MAX;
    const DumpedCall* c = nullptr;
    for (int r : present_) {
      uint64_t done = 0;
      for (const auto& [seq, call] : calls_[r])
        if (call->state == "done") done = seq;
      common = std::min(common, done);
    }
    if (common == 0 || common == UINT64_MAX || !present_.size() || !(c = call(present_[0], common))) return;
    line("last call every rank completed: #" + std::to_string(common) + " " + c->describe());
  }

  std::string comm_;
  const std::map<int, DumpedRank>& members_;
  int nranks_ = 0;
  std::vector<int> present_, missing_;
  std::map<int, uint64_t> reached_;                              // newest collective per rank
  std::map<int, std::map<uint64_t, const DumpedCall*>> calls_;  // per rank, by number
  std::set<uint64_t> seqs_;
  std::string* out_ = nullptr;
};

}  // namespace

FlightVerdict explainFlight(std::vector<DumpedRank> ranks) {
  std::map<std::string, std::map<int, DumpedRank>> byComm;
  for (DumpedRank& r : ranks) {
    std::map<int, DumpedRank>& members = byComm[r.comm];
    auto it = members.find(r.rank);
    if (it == members.end() || it->second.dumpTime <= r.dumpTime) members[r.rank] = std::move(r);
  }
  FlightVerdict v;
  for (const auto& [comm, members] : byComm) {
    CommStory story(comm, members);
    v.problem |= story.tell(&v.text);
  }
  if (byComm.empty()) v.text = "no communicator in the dumps\n";
  return v;
}

}  // namespace hoccl
