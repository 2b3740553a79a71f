#include "tests/test_util.h"

#include <thread>
#include <vector>

namespace testutil {

bool runThreads(int nranks, const std::function<void(hocclComm_t, int)>& body, std::string* error) {
  return runThreadsWithSetup(nranks, [](int) {}, body, error);
}

bool runThreadsWithSetup(int nranks, const std::function<void(int)>& setup,
                         const std::function<void(hocclComm_t, int)>& body, std::string* error) {
  hocclUniqueId id;
  if (hocclGetUniqueId(&id) != hocclSuccess) {
    if (error) *error = std::string("hocclGetUniqueId: ") + hocclGetLastError(nullptr);
    return false;
  }
  std::vector<hocclComm_t> comms(nranks, nullptr);
  std::vector<std::string> errors(nranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) {
    threads.emplace_back([&, r] {
      setup(r);
      if (hocclCommInitRank(&comms[r], nranks, id, r) != hocclSuccess) {
        errors[r] = hocclGetLastError(nullptr);
        return;
      }
      body(comms[r], r);
      hocclCommDestroy(comms[r]);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < nranks; ++r) {
    if (!errors[r].empty()) {
      if (error) *error = "rank " + std::to_string(r) + ": " + errors[r];
      return false;
    }
  }
  return true;
}

}  // namespace testutil
