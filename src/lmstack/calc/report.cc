// Rendering of calc reports: aligned text tables and JSON. Sizes print in SI (GB = 1e9 B, the
// unit of datasheets) with binary (GiB) beside, since allocators and nvidia-smi speak GiB.
#include "lmstack/calc/report.h"

#include <fmt/format.h>

#include <algorithm>

namespace lmstack::calc {
namespace {

std::string si(double v, const std::string& unit) {
  constexpr const char* kPrefixes[] = {"", "K", "M", "G", "T", "P", "E", "Z", "Y"};
  int i = 0;
  double x = std::fabs(v);
  while (x >= 1000 && i < 8) {
    x /= 1000;
    ++i;
  }
  return fmt::format("{:.4g} {}{}", v < 0 ? -x : x, kPrefixes[i], unit);
}

std::string seconds(double s) {
  if (s < 1e-3) return fmt::format("{:.3g} us", s * 1e6);
  if (s < 1) return fmt::format("{:.3g} ms", s * 1e3);
  if (s < 3600) return fmt::format("{:.3g} s", s);
  if (s < 86400 * 2) return fmt::format("{:.3g} h", s / 3600);
  return fmt::format("{:.4g} days", s / 86400);
}

std::string count(double v) {
  if (std::fabs(v) < 1e15 && v == std::floor(v)) {
    std::string digits = fmt::format("{:.0f}", std::fabs(v)), out;
    for (size_t i = 0; i < digits.size(); ++i) {
      if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
      out += digits[i];
    }
    return (v < 0 ? "-" : "") + out;
  }
  return fmt::format("{:.4g}", v);
}

}  // namespace

Section& Report::section(const std::string& key, const std::string& title_) {
  for (Section& s : sections)
    if (s.key == key) return s;
  sections.push_back({key, title_, {}});
  return sections.back();
}

const Row* Report::find(const std::string& key) const {
  for (const Section& s : sections)
    for (const Row& r : s.rows)
      if (r.key == key) return &r;
  return nullptr;
}

double Report::value(const std::string& key) const {
  const Row* r = find(key);
  return r ? r->value : NAN;
}

void add_row(Section& s, std::string key, std::string label, double value, std::string unit,
             std::string formula, std::string explain) {
  s.rows.push_back({std::move(key), std::move(label), value, "", std::move(unit),
                    std::move(formula), std::move(explain)});
}

void add_text(Section& s, std::string key, std::string label, std::string text, std::string formula,
              std::string explain) {
  s.rows.push_back({std::move(key), std::move(label), NAN, std::move(text), "", std::move(formula),
                    std::move(explain)});
}

std::string format_quantity(double v, const std::string& unit) {
  if (std::isnan(v)) return "n/a";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (unit == "B") {
    if (std::fabs(v) < 1000) return count(v) + " B";
    constexpr const char* kBin[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
    int i = -1;
    double x = std::fabs(v);
    while (x >= 1024 && i < 4) {
      x /= 1024;
      ++i;
    }
    return fmt::format("{} ({:.4g} {})", si(v, "B"), x, kBin[std::max(i, 0)]);
  }
  if (unit == "s") return seconds(v);
  if (unit == "%") return fmt::format("{:.3g}%", v * 100);
  if (unit == "x") return fmt::format("{:.4g}x", v);
  if (unit == "FLOP" || unit == "FLOP/s" || unit == "B/s" || unit == "b/s" || unit == "tok/s")
    return si(v, unit);
  return count(v) + (unit.empty() ? "" : " " + unit);
}

std::string render_text(const Report& r, bool explain) {
  std::string out = r.title + "\n";
  for (const Section& s : r.sections) {
    out += "\n" + s.title + "\n";
    size_t label_w = 0, value_w = 0;
    std::vector<std::string> values;
    for (const Row& row : s.rows) {
      values.push_back(std::isnan(row.value) ? row.text : format_quantity(row.value, row.unit));
      label_w = std::max(label_w, row.label.size());
      value_w = std::max(value_w, values.back().size());
    }
    for (size_t i = 0; i < s.rows.size(); ++i) {
      const Row& row = s.rows[i];
      out += fmt::format("  {:<{}}  {:>{}}", row.label, label_w, values[i], value_w);
      if (!row.formula.empty()) out += "   " + row.formula;
      out += "\n";
      if (explain && !row.explain.empty()) out += "      = " + row.explain + "\n";
    }
  }
  if (!r.notes.empty()) out += "\n";
  for (const std::string& n : r.notes) out += "note: " + n + "\n";
  return out;
}

Json render_json(const Report& r) {
  Json sections = Json::array(), values = Json::object();
  for (const Section& s : r.sections) {
    Json rows = Json::array();
    for (const Row& row : s.rows) {
      Json jr = {
          {"key", row.key}, {"label", row.label}, {"unit", row.unit}, {"formula", row.formula}};
      if (!row.explain.empty()) jr["explain"] = row.explain;
      if (std::isnan(row.value)) {
        jr["text"] = row.text;
        values[row.key] = row.text;
      } else {
        jr["value"] = std::isinf(row.value) ? Json(nullptr) : Json(row.value);
        values[row.key] = jr["value"];
      }
      rows.push_back(jr);
    }
    sections.push_back({{"key", s.key}, {"title", s.title}, {"rows", rows}});
  }
  return {{"title", r.title}, {"sections", sections}, {"values", values}, {"notes", r.notes}};
}

}  // namespace lmstack::calc
