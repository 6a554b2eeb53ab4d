// `lmstack bench comm` (see bench_comm.h). Bandwidths follow nccl-tests' PERFORMANCE.md:
// algbw = S / t with S the size nccl-tests reports (all-reduce, broadcast: the buffer;
// reduce-scatter: the input; all-gather: the output; all-to-all: one rank's buffer) and
// busbw = algbw x (bytes a rank sends / S), the ring factor 2(n-1)/n for all-reduce and (n-1)/n
// for reduce-scatter, all-gather and all-to-all, 1 for broadcast: dist::modeled_bytes_sent, the
// same model CommStats counts. Each time is the slowest rank's (max over ranks), median over
// iterations after warm-up. Predictions are calc's comm_cost functions, not a second formula.
#include "lmstack/cli/bench_comm.h"

#include <cstdio>
#include <cstring>

#include "lmstack/calc/reports.h"
#include "lmstack/cli/calc_common.h"
#include "lmstack/cli/model_session.h"
#include "lmstack/core/json.h"
#include "lmstack/core/timer.h"
#include "lmstack/dist/comm.h"

namespace lmstack::cli {
namespace {

using dist::Comm;
using dist::CommKind;

struct BenchCommOptions {
  std::string min_bytes = "1KiB", max_bytes = "256MiB", ops = "all", dtype = "f32";
  std::string link = "this", machine;
  int factor = 2, iters = 0, warmup = 2;
  bool json = false;
};

// One collective: what S means for it, its cost-model kind and calc's predicted time.
struct Collective {
  const char* name;
  CommKind kind;
  bool per_rank_chunks;  // count = S / (elem x n) instead of S / elem
  double (*predict_s)(double bytes, int n, double bw, double alpha);
};

const Collective kCollectives[] = {
    {"all_reduce", CommKind::kAllReduce, false, calc::ring_allreduce_s},
    {"reduce_scatter", CommKind::kReduceScatter, true, calc::allgather_s},
    {"all_gather", CommKind::kAllGather, true, calc::allgather_s},
    {"broadcast", CommKind::kBroadcast, false, calc::broadcast_s},
    {"all_to_all", CommKind::kAllToAll, true, calc::alltoall_s},
};

void run_once(Comm& c, const Collective& op, char* send, char* recv, int64_t count, DType dt) {
  switch (op.kind) {
    case CommKind::kAllReduce:
      return c.all_reduce(recv, count, dt);
    case CommKind::kReduceScatter:
      return c.reduce_scatter(send, recv, count, dt);
    case CommKind::kAllGather:
      return c.all_gather(send, recv, count, dt);
    case CommKind::kBroadcast:
      return c.broadcast(recv, count, dt, 0);
    case CommKind::kAllToAll:
      return c.all_to_all(send, recv, count, dt);
    case CommKind::kP2p:
      break;
  }
}

// Seconds of one call on the slowest rank (ranks start together after a barrier).
double timed_call(Comm& c, const Collective& op, char* send, char* recv, int64_t count, DType dt) {
  c.barrier();
  Timer t;
  run_once(c, op, send, recv, count, dt);
  float s = static_cast<float>(t.seconds());
  c.all_reduce(&s, 1, DType::kF32, dist::ReduceOp::kMax);
  return s;
}

struct Row {
  const Collective* op = nullptr;
  double bytes = 0, time_s = 0, algbw = 0, busbw = 0, predicted_s = 0;
  int64_t count = 0;
  int iters = 0;
};

// Iterations for one size: --iters, or enough for ~0.2 s (3..50), decided on rank 0 from the
// warm-up so that every rank runs the same number.
int choose_iters(Comm& c, const BenchCommOptions& o, double warm_s) {
  int32_t iters = o.iters;
  if (iters <= 0) iters = static_cast<int32_t>(std::clamp(0.2 / std::max(warm_s, 1e-7), 3.0, 50.0));
  c.broadcast(&iters, 1, DType::kI32, 0);
  return iters;
}

Row measure(Comm& c, const BenchCommOptions& o, const Collective& op, double bytes, DType dt,
            std::vector<char>& send, std::vector<char>& recv) {
  const int n = c.size();
  const int64_t elem = dtype_bytes(dt, 1);
  Row r{&op, bytes};
  const int chunks = op.per_rank_chunks ? n : 1;
  r.count = static_cast<int64_t>(bytes) / elem / chunks;
  r.bytes = bytes = static_cast<double>(r.count * elem * chunks);  // S rounded to whole elements
  double warm = 0;
  for (int i = 0; i < o.warmup; ++i)
    warm = timed_call(c, op, send.data(), recv.data(), r.count, dt);
  r.iters = choose_iters(c, o, warm);
  std::vector<double> times;
  for (int i = 0; i < r.iters; ++i)
    times.push_back(timed_call(c, op, send.data(), recv.data(), r.count, dt));
  r.time_s = median(times);
  r.algbw = bytes / r.time_s;
  r.busbw = r.algbw * dist::modeled_bytes_sent(op.kind, static_cast<int64_t>(bytes), n) / bytes;
  return r;
}

// The link calc predicts with: a preset, or "this": shared memory at this machine's measured
// DRAM bandwidth (doctor's STREAM triad, cached in ~/.cache/lmstack/doctor.json).
calc::LinkSpec resolve_link(const BenchCommOptions& o, int n) {
  if (o.link != "this") return calc::link_preset(o.link);
  const MachineReport m = machine_report(o.machine, 1);
  if (!(m.dram_triad_gbs > 0))
    throw_error<ConfigError>(
        "the machine report has no DRAM bandwidth (dram_triad_gbs); run "
        "`lmstack doctor` or pass --link PRESET");
  return calc::shared_memory_link(m.dram_triad_gbs * 1e9, n);
}

std::vector<const Collective*> selected_ops(const std::string& ops) {
  std::vector<const Collective*> out;
  for (const Collective& c : kCollectives)
    if (ops == "all" ||
        ("," + ops + ",").find(std::string(",") + c.name + ",") != std::string::npos)
      out.push_back(&c);
  if (out.empty())
    throw_error<RequestError>(
        "--ops '{}': none of all_reduce, reduce_scatter, all_gather, "
        "broadcast, all_to_all",
        ops);
  return out;
}

void print_text(const std::vector<Row>& rows, const Comm& c, const std::string& dtype,
                const calc::LinkSpec& link) {
  std::printf("bench comm: %d ranks (%s), %s; calc: %s, beta %.3g GB/s per rank, alpha %.3g us\n",
              c.size(), c.backend().c_str(), dtype.c_str(), link.source.c_str(), link.bw / 1e9,
              link.latency * 1e6);
  std::string last;
  for (const Row& r : rows) {
    if (r.op->name != last) {
      std::printf("\n%s\n%12s %12s %6s %12s %11s %11s %12s %9s\n", r.op->name, "size", "count",
                  "iters", "time_us", "algbw_GB/s", "busbw_GB/s", "calc_us", "meas/calc");
      last = r.op->name;
    }
    std::printf("%12s %12lld %6d %12.1f %11.3f %11.3f %12.1f %9.2f\n",
                calc::format_quantity(r.bytes, "B").c_str(), static_cast<long long>(r.count),
                r.iters, r.time_s * 1e6, r.algbw / 1e9, r.busbw / 1e9, r.predicted_s * 1e6,
                r.predicted_s > 0 ? r.time_s / r.predicted_s : 0.0);
  }
  if (c.size() == 1)
    std::printf("\nworld of 1: collectives are copies; run `mpirun -np N lmstack bench comm`\n");
}

void print_json(const std::vector<Row>& rows, const Comm& c, const std::string& dtype,
                const calc::LinkSpec& link) {
  Json results = Json::array();
  for (const Row& r : rows)
    results.push_back({{"op", r.op->name},
                       {"bytes", r.bytes},
                       {"count", r.count},
                       {"iters", r.iters},
                       {"time_s", r.time_s},
                       {"algbw_bytes_per_s", r.algbw},
                       {"busbw_bytes_per_s", r.busbw},
                       {"calc_time_s", r.predicted_s}});
  const Json j = {{"kind", "bench_comm"},
                  {"ranks", c.size()},
                  {"backend", c.backend()},
                  {"dtype", dtype},
                  {"link",
                   {{"name", link.name},
                    {"source", link.source},
                    {"bw", link.bw},
                    {"latency_s", link.latency}}},
                  {"results", results}};
  std::printf("%s\n", j.dump(2).c_str());
}

int run(const BenchCommOptions& o) {
  Comm& c = dist::world();
  const DType dt = parse_dtype(o.dtype);
  dtype_bytes(dt, 1);
  const double lo = parse_bytes(o.min_bytes, "--min-bytes"),
               hi = parse_bytes(o.max_bytes, "--max-bytes");
  if (lo > hi) throw_error<RequestError>("--min-bytes {} exceeds --max-bytes {}", lo, hi);
  const std::vector<const Collective*> ops = selected_ops(o.ops);
  if (o.link != "this") calc::link_preset(o.link);  // an unknown name fails before measuring
  std::vector<char> send(static_cast<size_t>(hi)), recv(static_cast<size_t>(hi));
  for (size_t i = 0; i < send.size(); i += 4) send[i] = recv[i] = 0;  // touch every page
  std::vector<Row> rows;
  for (const Collective* op : ops)
    for (double bytes = lo; bytes <= hi; bytes *= o.factor) {
      const int64_t min_bytes = dtype_bytes(dt, 1) * (op->per_rank_chunks ? c.size() : 1);
      if (bytes < min_bytes) continue;
      rows.push_back(measure(c, o, *op, bytes, dt, send, recv));
    }
  if (c.rank() != 0) return 0;
  // Only rank 0 reports, so only it needs the machine's bandwidth; after the measurement, so
  // that a first-time probe of it does not compete with the other ranks.
  const calc::LinkSpec link = resolve_link(o, c.size());
  for (Row& r : rows) r.predicted_s = r.op->predict_s(r.bytes, c.size(), link.bw, link.latency);
  if (o.json)
    print_json(rows, c, o.dtype, link);
  else
    print_text(rows, c, o.dtype, link);
  return 0;
}

}  // namespace

void add_bench_comm(CLI::App& bench, std::function<int()>& runner) {
  auto o = std::make_shared<BenchCommOptions>();
  CLI::App* app = bench.add_subcommand(
      "comm", "collective time, algbw and busbw per size (run under mpirun) vs calc comm");
  app->add_option("--min-bytes", o->min_bytes, "smallest size S")->capture_default_str();
  app->add_option("--max-bytes", o->max_bytes, "largest size S")->capture_default_str();
  app->add_option("--factor", o->factor, "size multiplier between rows")
      ->check(CLI::Range(2, 1024))
      ->capture_default_str();
  app->add_option("--ops", o->ops,
                  "comma list of all_reduce,reduce_scatter,all_gather,broadcast,all_to_all")
      ->capture_default_str();
  app->add_option("--dtype", o->dtype, "f32 | bf16 | i32 | i8")->capture_default_str();
  app->add_option("--iters", o->iters, "timed iterations per size (0: enough for ~0.2 s)")
      ->check(CLI::Range(0, 100000));
  app->add_option("--warmup", o->warmup, "untimed iterations first")->check(CLI::Range(1, 1000));
  app->add_option("--link", o->link,
                  "calc link preset for the prediction, or 'this' (shared memory at the "
                  "measured DRAM bandwidth)")
      ->capture_default_str();
  app->add_option("--machine", o->machine, "doctor --json file (default: cached measurement)");
  app->add_flag("--json", o->json, "print JSON (rank 0)");
  app->footer(
      "Examples:\n  mpirun -np 2 lmstack bench comm\n"
      "  mpirun -np 4 --oversubscribe lmstack bench comm --max-bytes 16MiB --ops all_reduce "
      "--link nvlink-h100 --json");
  app->callback([o, &runner] { runner = [o] { return run(*o); }; });
}

}  // namespace lmstack::cli
