// `lmstack calc comm | cluster`: collective times over a link (alpha-beta model) and the switch
// arithmetic of a rail-optimized fat tree (src/lmstack/calc/comm_cost.cc, cluster.cc).
#include <memory>

#include "lmstack/calc/reports.h"
#include "lmstack/cli/calc_common.h"

namespace lmstack::cli {
namespace {

struct CommArgs {
  std::string bytes;
  calc::CommOptions o;
  CalcOutput out;
};

struct ClusterArgs {
  std::string oversub = "1:1";
  calc::ClusterOptions o;
  CalcOutput out;
};

}  // namespace

CalcSubcommand setup_calc_comm(CLI::App& calc) {
  auto a = std::make_shared<CommArgs>();
  CLI::App* sub = calc.add_subcommand(
      "comm", "ring/tree all-reduce, all-gather, reduce-scatter, all-to-all times (alpha-beta)");
  sub->add_option("--bytes", a->bytes, "message size S (280GB, 1.5GiB, 4e9)")->required();
  sub->add_option("--ranks", a->o.ranks, "ranks N")->capture_default_str();
  sub->add_option("--link", a->o.link, "link preset (calc list): nvlink-h100, ndr, ...")
      ->capture_default_str();
  sub->add_option("--within", a->o.within_s, "also: bandwidth needed to all-reduce S in T s");
  add_calc_output_flags(sub, a->out);
  return {sub, [a] {
            calc::CommOptions o = a->o;
            o.bytes = parse_bytes(a->bytes, "--bytes");
            return print_calc_report(calc::comm_report(o), a->out);
          }};
}

CalcSubcommand setup_calc_cluster(CLI::App& calc) {
  auto a = std::make_shared<ClusterArgs>();
  CLI::App* sub = calc.add_subcommand(
      "cluster", "rail-optimized fat tree: nodes, leaf/spine switches, cables, bandwidth");
  sub->add_option("--gpus", a->o.gpus, "GPUs")->capture_default_str();
  sub->add_option("--gpus-per-node", a->o.gpus_per_node, "GPUs (and NICs) per node")
      ->capture_default_str();
  sub->add_option("--nic", a->o.nic, "NIC / switch speed (edr hdr ndr xdr roce-400 ...)")
      ->capture_default_str();
  sub->add_option("--switch-ports", a->o.switch_ports, "ports per switch")->capture_default_str();
  sub->add_option("--oversubscription", a->oversub, "leaf down:up ports, e.g. 1:1 or 2:1")
      ->capture_default_str();
  add_calc_output_flags(sub, a->out);
  return {sub, [a] {
            calc::ClusterOptions o = a->o;
            const size_t colon = a->oversub.find(':');
            if (colon == std::string::npos)
              throw_error<RequestError>("--oversubscription '{}': expected D:U like 1:1",
                                        a->oversub);
            const auto d = parse_numbers(a->oversub.substr(0, colon), 1, "--oversubscription");
            const auto u = parse_numbers(a->oversub.substr(colon + 1), 1, "--oversubscription");
            o.oversub_down = d[0];
            o.oversub_up = u[0];
            return print_calc_report(calc::cluster_report(o), a->out);
          }};
}

}  // namespace lmstack::cli
