// Operations of the Jinja evaluator shared by expressions (jinja_eval.cc), filters and
// methods: attribute/item access with jinja2's fallbacks, Python's arithmetic, comparisons
// and membership. All throw RenderError with Python's wording on a type mismatch.
#pragma once

#include <string>

#include "lmstack/tokenizer/jinja_ast.h"
#include "lmstack/tokenizer/jinja_value.h"

namespace lmstack::tokenizer::jinja {

// obj.name: a bound method when obj's type has one, else the dict/namespace entry, else
// Undefined naming what is missing. Throws if obj itself is Undefined.
Value get_attr(const Value& obj, const std::string& name);
// obj[key]: list/str index (negative counts from the end), dict key; missing -> Undefined.
Value get_item(const Value& obj, const Value& key);
// The dotted attribute path "a.b.0" of obj (selectattr/map/sort attribute=...).
Value get_attribute_path(const Value& obj, const std::string& path);

// + - * / // % ** on numbers, str and list (Python semantics; Undefined operands throw).
Value binary_arithmetic(BinaryOp op, const Value& a, const Value& b);
// One comparison: "==", "!=", "<", "<=", ">", ">=", "in", "not in".
bool compare(const std::string& op, const Value& a, const Value& b);
// Python `item in container` (substring, list element or dict key; Undefined is empty).
bool contains(const Value& container, const Value& item);

}  // namespace lmstack::tokenizer::jinja
