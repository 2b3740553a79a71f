#include "algorithms/executable.h"

namespace hoccl {

namespace {

bool receivesAnything(const Schedule& s) {
  for (const Channel& ch : s.channels)
    for (const Step& st : ch.steps)
      if (st.recvPeer >= 0) return true;
  return false;
}

}  // namespace

void addSyncSteps(const AlgoInfo& algo, const ScheduleKey& key, Schedule* s) {
  if (key.nranks < 2) return;
  const int next = (key.rank + 1) % key.nranks, prev = (key.rank + key.nranks - 1) % key.nranks;
  ScheduleKey nk = key;
  nk.rank = next;
  const bool nextReceives = receivesAnything(algo.build(nk));
  const bool receives = receivesAnything(*s);
  if (nextReceives && receives) return;
  if (s->channels.empty()) s->channels.resize(1);
  if (!nextReceives) {
    Step send;
    send.sendPeer = next;
    s->channels[0].steps.push_back(send);
  }
  if (!receives) {
    Step recv;
    recv.recvPeer = prev;
    s->channels[0].steps.push_back(recv);
  }
}

Schedule buildExecutable(const AlgoInfo& algo, const ScheduleKey& key, bool syncSteps) {
  Schedule s = algo.build(key);
  // One-shot over shared memory has no steps to add to: every rank's slot
  // note carries its call's signature, and every rank reads every note.
  if (s.oneShotShm) return s;
  if (syncSteps) addSyncSteps(algo, key, &s);
  markZeroCopyEligible(&s);
  return s;
}

}  // namespace hoccl
