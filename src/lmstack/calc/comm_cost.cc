// Alpha-beta cost of collectives over n ranks (Hockney's model: a message of S bytes costs
// alpha + S / beta). Ring algorithms: Patarasuk & Yuan 2009 (all-reduce = reduce-scatter +
// all-gather, 2(n-1) steps of S/n); tree: a pipelined reduce up and broadcast down a binary tree
// (NCCL's double binary tree has the same cost to first order); all-to-all: pairwise exchange
// on a non-blocking network. NCCL's "bus bandwidth" = algbw x 2(n-1)/n is the ring factor.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "lmstack/calc/reports.h"

namespace lmstack::calc {

double ring_allreduce_s(double bytes, int n, double bw, double alpha) {
  if (n <= 1) return 0;
  return 2.0 * (n - 1) * alpha + 2.0 * (n - 1) / n * bytes / bw;
}

double tree_allreduce_s(double bytes, int n, double bw, double alpha) {
  if (n <= 1) return 0;
  return 2.0 * std::ceil(std::log2(n)) * alpha + 2.0 * bytes / bw;
}

double allgather_s(double bytes, int n, double bw, double alpha) {
  if (n <= 1) return 0;
  return (n - 1) * alpha + static_cast<double>(n - 1) / n * bytes / bw;
}

double alltoall_s(double bytes, int n, double bw, double alpha) {
  return allgather_s(bytes, n, bw, alpha);
}

// Pipelined broadcast along a chain (S cut into many chunks): the last rank has S after the
// pipe fills, (n-1) hops of alpha plus S/beta; nccl-tests' busbw factor for broadcast is 1.
double broadcast_s(double bytes, int n, double bw, double alpha) {
  if (n <= 1) return 0;
  return (n - 1) * alpha + bytes / bw;
}

LinkSpec shared_memory_link(double memory_bw, int n) {
  const int ranks = std::max(n, 1);
  return LinkSpec{
      "shm",
      fmt::format("shared memory: {:.3g} GB/s memory / (4 x {} ranks)", memory_bw / 1e9, ranks),
      memory_bw / (4.0 * ranks), 1e-6};
}

Report comm_report(const CommOptions& o) {
  if (o.ranks < 2) throw_error<RequestError>("--ranks must be >= 2, got {}", o.ranks);
  if (!(o.bytes > 0)) throw_error<RequestError>("--bytes must be > 0");
  const LinkSpec l = link_preset(o.link);
  const int n = o.ranks;
  const double S = o.bytes, f = 2.0 * (n - 1) / n;
  Report r;
  r.title = fmt::format("calc comm: {} over {} ranks on {}", format_quantity(S, "B"), n, l.name);
  Section& li = r.section("link", "Link");
  add_text(li, "link", "link", l.name, l.source);
  add_row(li, "bandwidth", "beta (per rank, per direction)", l.bw, "B/s", "preset");
  add_row(li, "latency", "alpha (per message)", l.latency, "s", "preset (assumed)");
  Section& s = r.section("collectives", "Collectives (alpha-beta model)");
  add_row(s, "ring_efficiency", "ring factor 2(N-1)/N", f, "x",
          "bytes each rank sends per byte all-reduced", fmt::format("2 x {} / {}", n - 1, n));
  add_row(s, "ring_bytes_per_rank", "ring all-reduce bytes sent per rank", f * S, "B",
          "2(N-1)/N x S");
  add_row(s, "allreduce_ring_s", "all-reduce, ring", ring_allreduce_s(S, n, l.bw, l.latency), "s",
          "2(N-1) alpha + 2(N-1)/N x S/beta",
          fmt::format("2x{}x{:.3g} + {:.4g} x {:.4g}/{:.4g}", n - 1, l.latency, f, S, l.bw));
  add_row(s, "allreduce_tree_s", "all-reduce, tree", tree_allreduce_s(S, n, l.bw, l.latency), "s",
          "2 ceil(log2 N) alpha + 2 S/beta (wins for small S or large N)");
  add_row(s, "allgather_s", "all-gather (S = gathered size)", allgather_s(S, n, l.bw, l.latency),
          "s", "(N-1) alpha + (N-1)/N x S/beta");
  add_row(s, "reducescatter_s", "reduce-scatter (S = input size)",
          allgather_s(S, n, l.bw, l.latency), "s", "(N-1) alpha + (N-1)/N x S/beta");
  add_row(s, "alltoall_s", "all-to-all (S = each rank's buffer)", alltoall_s(S, n, l.bw, l.latency),
          "s", "(N-1) alpha + (N-1)/N x S/beta");
  const double t = ring_allreduce_s(S, n, l.bw, l.latency);
  add_row(s, "algbw", "algorithm bandwidth S/t (ring)", S / t, "B/s",
          "what nccl-tests calls algbw");
  add_row(s, "busbw", "bus bandwidth (ring)", S / t * f, "B/s",
          "algbw x 2(N-1)/N; -> beta for large S");
  if (o.within_s > 0) {
    Section& w = r.section(
        "budget", fmt::format("To all-reduce S within {}", format_quantity(o.within_s, "s")));
    add_row(w, "needed_bits_per_s", "S / t (glossary's estimate)", S * 8 / o.within_s, "b/s",
            "S x 8 / t", fmt::format("{:.4g} x 8 / {:.4g}", S, o.within_s));
    add_row(w, "needed_ring_bw", "ring: 2(N-1)/N x S / t per rank", f * S / o.within_s, "B/s",
            "per rank, per direction");
    add_row(w, "links_needed", "links of this kind per rank", std::ceil(f * S / o.within_s / l.bw),
            "", "ceil(needed / beta)");
  }
  return r;
}

}  // namespace lmstack::calc
