// `calc cluster`: a rail-optimized fat tree (as in NVIDIA's DGX SuperPOD reference design):
// GPU k of every node has its own NIC cabled to a leaf switch of rail k, so same-rank GPUs of
// all nodes meet one switch hop apart; leaves split their ports down:up by the oversubscription
// (1:1 non-blocking); spines connect the leaves; beyond a two-tier size, pods and a core layer.
// Storage (4:1) and management (10 GbE) networks are separate, sized by the same port arithmetic.
#include <fmt/format.h>

#include <cmath>

#include "lmstack/calc/reports.h"

namespace lmstack::calc {
namespace {

struct Tree {
  double leaves = 0, spines = 0, cores = 0, uplinks = 0, spine_uplinks = 0;
};

// Switches of a fat tree with `endpoints` down-links on `ports`-port switches whose leaves
// have `down` ports toward the endpoints; `groups` independent leaf groups (rails).
Tree fat_tree(double endpoints_per_group, double groups, double ports, double down) {
  Tree t;
  const double up = ports - down;
  t.leaves = groups * std::ceil(endpoints_per_group / down);
  t.uplinks = t.leaves * up;
  if (up <= 0) return t;
  if (t.leaves <= ports) {  // two tiers: every leaf reaches every spine
    t.spines = std::ceil(t.uplinks / ports);
    return t;
  }
  // Three tiers: pods of ports/2 leaves and ports/2 spines; spines send half their ports up.
  const double pods = std::ceil(t.leaves / (ports / 2));
  t.spines = pods * ports / 2;
  t.spine_uplinks = t.spines * ports / 2;
  t.cores = std::ceil(t.spine_uplinks / ports);
  return t;
}

void add_storage_and_management(const ClusterOptions& o, double nodes, Report& r) {
  Section& s = r.section("other_networks", "Storage and management networks");
  const double P = o.switch_ports, down = std::floor(P * 4 / 5);  // 4:1
  const Tree st = fat_tree(nodes, 1, P, down);
  add_row(s, "storage_leaves", "storage leaves (4:1, 1 NIC/node)", st.leaves, "",
          fmt::format("ceil(nodes / {:.0f} down ports)", down));
  add_row(s, "storage_spines", "storage spines", st.spines, "",
          fmt::format("ceil(leaves x {:.0f} up / {:.0f})", P - down, P));
  add_row(s, "mgmt_switches", "management switches (10 GbE, 48 ports)", std::ceil(nodes / 47) + 1,
          "", "ceil(nodes / 47) + 1 aggregation (one port each for the uplink)");
}

}  // namespace

Report cluster_report(const ClusterOptions& o) {
  if (o.gpus < 1 || o.gpus_per_node < 1 || o.gpus % o.gpus_per_node != 0)
    throw_error<RequestError>("--gpus {} must be a positive multiple of --gpus-per-node {}", o.gpus,
                              o.gpus_per_node);
  if (o.switch_ports < 4 || o.switch_ports % 2 != 0)
    throw_error<RequestError>("--switch-ports must be even and >= 4, got {}", o.switch_ports);
  if (!(o.oversub_down > 0 && o.oversub_up > 0))
    throw_error<RequestError>("--oversubscription must be D:U with D, U > 0");
  const LinkSpec nic = link_preset(o.nic);
  const double G = o.gpus, g = o.gpus_per_node, P = o.switch_ports, nodes = G / g;
  const double down = std::floor(P * o.oversub_down / (o.oversub_down + o.oversub_up));
  const Tree t = fat_tree(nodes, g, P, down);
  const double nic_bits = nic.bw * 8;
  Report r;
  r.title =
      fmt::format("calc cluster: {} GPUs, {} per node, {} NICs, {}-port switches, {}:{}", o.gpus,
                  o.gpus_per_node, nic.name, o.switch_ports, o.oversub_down, o.oversub_up);
  Section& s = r.section("compute_network", "Compute network (rail-optimized fat tree)");
  add_row(s, "nodes", "nodes", nodes, "", "GPUs / GPUs per node");
  add_row(s, "rails", "rails", g, "", "one per GPU index (GPU k -> rail-k leaf)");
  add_row(s, "nics", "NICs", G, "", "one per GPU");
  add_row(s, "leaf_down_ports", "leaf ports down / up", down, "",
          fmt::format("P x D/(D+U) = {} x {}/{}; {} up", P, o.oversub_down,
                      o.oversub_down + o.oversub_up, P - down));
  add_row(s, "leaf_switches", "leaf switches", t.leaves, "", "rails x ceil(nodes / down ports)",
          fmt::format("{} x ceil({} / {})", g, nodes, down));
  add_row(s, "spine_switches", "spine switches", t.spines, "",
          t.cores > 0 ? "pods x P/2 (three tiers)" : "ceil(leaves x up ports / P)",
          fmt::format("ceil({} x {} / {})", t.leaves, P - down, P));
  if (t.cores > 0)
    add_row(s, "core_switches", "core switches", t.cores, "", "ceil(spines x P/2 / P)");
  add_row(s, "switches_total", "switches", t.leaves + t.spines + t.cores, "",
          "leaf + spine + core");
  const double cables = G + t.uplinks + t.spine_uplinks;
  add_row(s, "cables", "cables", cables, "", "NIC-leaf + leaf-spine (+ spine-core)");
  add_row(s, "transceivers", "transceivers (all optical)", 2 * cables, "", "2 per cable");
  add_row(s, "leaf_down_bits", "leaf downlink capacity", down * nic_bits, "b/s",
          "down ports x NIC speed (raw P x speed = " + format_quantity(P * nic_bits, "b/s") + ")");
  add_row(s, "injection_bits", "injection per node", g * nic_bits, "b/s", "GPUs per node x NIC");
  add_row(s, "bisection_bits", "bisection bandwidth",
          G / 2 * nic_bits * std::min(1.0, o.oversub_up / o.oversub_down), "b/s",
          "G/2 x NIC x min(1, U/D)");
  add_storage_and_management(o, nodes, r);
  r.notes.push_back(
      "transceiver count assumes optics on every cable; DAC/AOC inside a rack saves some");
  return r;
}

}  // namespace lmstack::calc
