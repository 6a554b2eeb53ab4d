// Report: what every `calc` subcommand produces, rendered three ways: a readable table with the
// formula behind each row, the same with the step-by-step derivation (--explain), and JSON
// (--json). Quantities carry a unit so the table can print them humanly (GB and GiB, ms, ...).
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "lmstack/core/json.h"

namespace lmstack::calc {

// Units the renderer knows: "B" (bytes), "B/s", "FLOP", "FLOP/s", "s", "b/s" (bits/s), "x"
// (ratio), "%" (value is a fraction 0..1), "" (plain count).
struct Row {
  std::string key;     // snake_case, unique within the report (JSON key)
  std::string label;   // human name
  double value = NAN;  // NaN for text rows
  std::string text;    // text value (when value is NaN)
  std::string unit;
  std::string formula;  // the rule, symbols and numbers
  std::string explain;  // step-by-step derivation (--explain)
};

struct Section {
  std::string key;
  std::string title;
  std::vector<Row> rows;
};

struct Report {
  std::string title;
  std::vector<Section> sections;
  std::vector<std::string> notes;  // conventions, assumptions, warnings

  Section& section(const std::string& key, const std::string& title);
  // Value of the row with this key (any section); NaN when absent.
  double value(const std::string& key) const;
  const Row* find(const std::string& key) const;
};

// Adds a numeric row to `s`.
void add_row(Section& s, std::string key, std::string label, double value, std::string unit,
             std::string formula, std::string explain = "");
void add_text(Section& s, std::string key, std::string label, std::string text,
              std::string formula = "", std::string explain = "");

// Human form: 16.06 GB (14.96 GiB), 4.18 ms, 1.98 PFLOP/s, 12,345.
std::string format_quantity(double value, const std::string& unit);
// Table text; with `explain`, each row's derivation follows it.
std::string render_text(const Report& r, bool explain);
// {"title", "sections":[{"key","title","rows":[{key,label,value|text,unit,formula,explain}]}],
//  "values":{row key: value or text}, "notes":[...]}.
Json render_json(const Report& r);

}  // namespace lmstack::calc
