// hoccl-paro: which PaRO strategy to train with on a described cluster
// (docs/paro.md). Per strategy: the collectives' predicted time per
// optimizer step (hoccl's cost model, as hoccl-sim), the training state per
// rank, whether it fits, and a recommendation.
//
//   hoccl-paro --nodes 4 --ranks-per-node 8 --node-gbit 100 --params 1G --accum 4 --mem-gb 80
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "base/json.h"
#include "programs/machine_args.h"
#include "src/tune/paro_advisor.h"

using namespace hoccl;
using namespace hoccl::tune;

namespace {

void usage(FILE* f) {
  std::fprintf(f,
               "usage: hoccl-paro --params N [--trainable N] [--accum A] [--dtype D] [--optimizer-bytes B]\n"
               "                  [--units U] [--optimizer-ns T] [--mem-gb G] [--json] [machine options]\n"
               "Predicts each PaRO strategy's communication time per optimizer step (and, given\n"
               "--optimizer-ns, its optimizer update) and its training state per rank, and recommends\n"
               "the fastest that fits.\n\n"
               "model:\n"
               "  --params N             parameters, e.g. 7000000000, 7G or 7B (K, M, G or B, T: powers of 1000)\n"
               "  --trainable N          trainable parameters [all]\n"
               "  --accum A              micro-steps (backward passes) per optimizer step [1]\n"
               "  --dtype D              parameters and gradients: bf16, fp16 or fp32 [bf16]\n"
               "  --optimizer-bytes B    optimizer state per trainable parameter besides the fp32\n"
               "                         master copy (Adam: 8, SGD with momentum: 4) [8]\n"
               "  --units U              calls each collective is split into (modules) [1]\n"
               "  --optimizer-ns T       one rank's optimizer time per trainable parameter it updates, in\n"
               "                         ns (time Adam's step on this hardware); every strategy is charged\n"
               "                         for its share of the state [0: not costed]\n"
               "  --mem-gb G             memory per rank for the training state, GB (10^9 B) [no limit]\n"
               "  --intra-allgather B:MS an all-gather of B bytes on every node's ranks at once took MS ms\n"
               "                         (measured): the intra group's copy rates (--shm-gbps, --node-mem-gbps)\n"
               "                         are scaled together until the advisor predicts that (for nodes whose\n"
               "                         cores are shared, as on the emulated cluster)\n"
               "  --engine E             how calls are costed: schedule (the builders' schedules simulated, as\n"
               "                         hoccl-sim), model (the closed form) or auto (schedule for groups of up\n"
               "                         to 32 ranks) [auto]\n"
               "  --json                 one JSON object instead of the table\n\n"
               "machine (as hoccl-sim):\n%s",
               machineArgsHelp().c_str());
}

bool count(const char* s, double* out) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  if (end == s || v < 0) return false;
  if (*end == 'K' || *end == 'k') v *= 1e3, ++end;
  else if (*end == 'M') v *= 1e6, ++end;
  else if (*end == 'G' || *end == 'B') v *= 1e9, ++end;
  else if (*end == 'T') v *= 1e12, ++end;
  if (*end) return false;
  *out = v;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  MachineArgs ma;
  paro::ModelSize model;
  double params = -1, trainable = -1, memGb = 0, intraMs = 0;
  uint64_t intraBytes = 0;
  bool json = false;
  paro::Engine engine = paro::Engine::Auto;
  std::string dtype = "bf16";
  for (int i = 1; i < argc; ++i) {
    std::string err;
    const char* a = argv[i];
    if (parseMachineArg(argc, argv, &i, &ma, &err)) {
      if (!err.empty()) {
        std::fprintf(stderr, "hoccl-paro: %s\n", err.c_str());
        return 2;
      }
      continue;
    }
    auto val = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "hoccl-paro: %s needs a value\n", a);
        std::exit(2);
      }
      return argv[++i];
    };
    auto bad = [&](const char* v, const char* want) {
      std::fprintf(stderr, "hoccl-paro: %s %s: expected %s\n", a, v, want);
      std::exit(2);
    };
    double x = 0;
    if (!strcmp(a, "--params") || !strcmp(a, "--trainable")) {
      const char* v = val();
      if (!count(v, &x) || x < 1) bad(v, "a parameter count such as 125000000 or 7G");
      (a[2] == 'p' ? params : trainable) = x;
    } else if (!strcmp(a, "--accum") || !strcmp(a, "--units") || !strcmp(a, "--optimizer-bytes")) {
      const char* v = val();
      char* end = nullptr;
      const long n = std::strtol(v, &end, 10);
      const long lo = !strcmp(a, "--optimizer-bytes") ? 0 : 1;
      if (!*v || *end || n < lo || n > 1000000) bad(v, lo ? "an integer >= 1" : "an integer >= 0");
      (a[2] == 'a' ? model.accum : a[2] == 'u' ? model.units : model.optimizerBytes) = int(n);
    } else if (!strcmp(a, "--dtype")) {
      dtype = val();
      if (dtype == "bf16" || dtype == "fp16") model.elemBytes = 2;
      else if (dtype == "fp32") model.elemBytes = 4;
      else bad(dtype.c_str(), "bf16, fp16 or fp32");
    } else if (!strcmp(a, "--optimizer-ns")) {
      const char* v = val();
      char* end = nullptr;
      model.optimizerNs = std::strtod(v, &end);
      if (!*v || *end || !(model.optimizerNs >= 0) || model.optimizerNs > 1e9) bad(v, "a time in ns >= 0");
    } else if (!strcmp(a, "--mem-gb")) {
      const char* v = val();
      char* end = nullptr;
      memGb = std::strtod(v, &end);
      if (!*v || *end || !(memGb > 0)) bad(v, "a positive number of GB");
    } else if (!strcmp(a, "--intra-allgather")) {
      const char* v = val();
      const char* colon = std::strchr(v, ':');
      char* end = nullptr;
      const std::string b = colon ? std::string(v, colon) : std::string();
      if (!colon || !count(b.c_str(), &x) || x < 1 || x > 1e15 || !*(colon + 1)) bad(v, "BYTES:MS, e.g. 2461760:7.5");
      intraMs = std::strtod(colon + 1, &end);
      if (*end || !(intraMs > 0) || intraMs > 1e9) bad(v, "BYTES:MS with a time in ms above 0");
      intraBytes = uint64_t(x);
    } else if (!strcmp(a, "--engine")) {
      const char* v = val();
      if (!paro::parseEngine(v, &engine)) bad(v, "schedule, model or auto");
    } else if (!strcmp(a, "--json")) {
      json = true;
    } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      return 0;
    } else {
      std::fprintf(stderr, "hoccl-paro: unknown option %s\n", a);
      usage(stderr);
      return 2;
    }
  }
  if (params < 0) {
    std::fprintf(stderr, "hoccl-paro: --params is required (the model's parameter count)\n");
    return 2;
  }
  if (trainable > params) {
    std::fprintf(stderr, "hoccl-paro: --trainable %.0f is more than --params %.0f\n", trainable, params);
    return 2;
  }
  model.params = params;
  model.trainable = trainable < 0 ? params : trainable;
  Machine m;
  TuneFile tf;
  std::string desc, why;
  Status st = buildMachine(ma, &m, &tf, &desc);
  if (!st.ok()) {
    std::fprintf(stderr, "hoccl-paro: %s\n", st.message().c_str());
    return 1;
  }
  if (!paro::Advisor(m, tf.rules, tf.path).rectangular(&why)) {
    std::fprintf(stderr, "hoccl-paro: %s\n", why.c_str());
    return 1;
  }
  paro::IntraFit fit;
  if (intraBytes > 0) {
    if (!paro::fitIntraRates(m, tf.rules, tf.path, intraBytes, intraMs, &fit, &why, engine)) {
      std::fprintf(stderr, "hoccl-paro: --intra-allgather: %s\n", why.c_str());
      return 2;
    }
  }
  paro::Advisor advisor(m, tf.rules, tf.path, engine, fit.scale);
  const std::vector<paro::Costed> rows = advisor.evaluate(model, memGb * 1e9);
  const int best = paro::recommend(rows);
  if (json) {
    json::Value out = json::Value::object();
    out.set("machine", desc);
    out.set("engine", std::string(paro::engineName(engine)));
    out.set("nodes", advisor.nodes());
    out.set("ranks_per_node", advisor.perNode());
    if (intraBytes > 0) {
      json::Value f = json::Value::object();
      f.set("bytes", double(intraBytes));
      f.set("measured_ms", intraMs);
      f.set("predicted_ms", fit.predictedMs);
      f.set("scale", fit.scale);
      f.set("shm_gbps", fit.shmGbps);
      f.set("node_mem_gbps", fit.nodeMemGbps);
      f.set("warning", fit.warning);
      out.set("intra_fit", f);
    }
    out.set("recommended", best < 0 ? json::Value(nullptr) : json::Value(std::string(rows[best].strategy.name)));
    json::Value list = json::Value::array();
    for (const paro::Costed& r : rows) {
      json::Value row = json::Value::object();
      row.set("name", std::string(r.strategy.name));
      row.set("levels", std::string(paro::levelName(r.strategy.p)) + paro::levelName(r.strategy.g) +
                            paro::levelName(r.strategy.os));
      row.set("comm_ms", r.commUs() / 1e3);
      row.set("optimizer_ms", r.optimizerUs / 1e3);
      row.set("total_ms", r.totalUs() / 1e3);
      row.set("micro_ms", r.microUs / 1e3);
      row.set("boundary_ms", r.boundaryUs / 1e3);
      row.set("step_ms", r.stepUs / 1e3);
      row.set("state_bytes", r.state.total());
      row.set("fits", r.fits);
      json::Value calls = json::Value::array();
      for (const paro::CallCost& c : r.calls) {
        json::Value call = json::Value::object();
        call.set("phase", std::string(paro::phaseName(c.call.phase)));
        call.set("group", std::string(paro::groupName(c.call.group)));
        call.set("kind", std::string(c.call.coll == CollKind::AllGather       ? "AG"
                                     : c.call.coll == CollKind::ReduceScatter ? "RS"
                                                                              : "AR"));
        call.set("elements", c.elems);
        call.set("per_step", c.perStep);
        call.set("ms_each", c.us / 1e3);
        calls.push(call);
      }
      row.set("calls", calls);
      list.push(row);
    }
    out.set("strategies", list);
    std::printf("%s\n", json::write(out).c_str());
    return best < 0 ? 3 : 0;
  }
  std::printf("# hoccl-paro: %s; calls costed by the %s engine\n", desc.c_str(), paro::engineName(engine));
  std::printf("# model: %.4g parameters, %.4g trainable, %s, %d micro-step(s) per step, optimizer %d+4 B per "
              "trainable parameter, %d call(s) per collective%s\n",
              model.params, model.trainable, dtype.c_str(), model.accum, model.optimizerBytes, model.units,
              memGb > 0 ? "" : "; no memory limit");
  if (memGb > 0) std::printf("# memory per rank for the training state: %g GB\n", memGb);
  if (intraBytes > 0)
    std::printf("# intra-node rates fitted to an all-gather of %llu B in %g ms: %.4g Gbit/s per rank, node memory "
                "%.4g Gbit/s (x%.4g; the fitted model predicts %.3g ms)%s%s\n",
                (unsigned long long)intraBytes, intraMs, fit.shmGbps, fit.nodeMemGbps, fit.scale, fit.predictedMs,
                fit.warning.empty() ? "" : "; WARNING: ", fit.warning.c_str());
  std::printf("# communication per optimizer step (ms): all micro-steps, the accumulation boundary, after the step\n");
  const bool optim = model.optimizerNs > 0;
  if (optim)
    std::printf("# optimizer: %g ns per updated parameter; \"total\" is communication plus the update\n",
                model.optimizerNs);
  std::printf("%-8s %-6s %12s %12s %12s %12s", "strategy", "p g os", "comm ms", "micro", "boundary", "after step");
  if (optim) std::printf(" %12s %12s", "optimizer", "total ms");
  std::printf(" %14s  %s\n", "state GB/rank", "fits");
  for (const paro::Costed& r : rows) {
    std::printf("%-8s %s %s %s  %12.3f %12.3f %12.3f %12.3f", r.strategy.name, paro::levelName(r.strategy.p),
                paro::levelName(r.strategy.g), paro::levelName(r.strategy.os), r.commUs() / 1e3, r.microUs / 1e3,
                r.boundaryUs / 1e3, r.stepUs / 1e3);
    if (optim) std::printf(" %12.3f %12.3f", r.optimizerUs / 1e3, r.totalUs() / 1e3);
    std::printf(" %14.3f  %s\n", r.state.total() / 1e9, r.fits ? "yes" : "NO (out of memory)");
  }
  if (best < 0) {
    std::printf("recommended: none (no strategy's training state fits in %g GB per rank)\n", memGb);
    return 3;
  }
  std::printf("recommended: %s (%.3f ms of communication", rows[best].strategy.name, rows[best].commUs() / 1e3);
  if (optim) std::printf(" and %.3f ms of optimizer", rows[best].optimizerUs / 1e3);
  std::printf(" per step, %.3f GB per rank)\n", rows[best].state.total() / 1e9);
  return 0;
}
