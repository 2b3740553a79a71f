// A small JSON reader and writer: objects (keys keep their order),
// arrays, strings (UTF-8, every escape), numbers (double), true, false, null.
// The parser is strict (RFC 8259: no comments, no trailing commas, no
// duplicate keys) and bounded (depth, size, number of values), so hostile
// input is an error with a line and column, never a crash. Every parsed value
// remembers where it started, so callers can name the line of a bad field.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "src/base/error.h"

namespace hoccl {
namespace json {

enum class Type : uint8_t { Null, Bool, Number, String, Array, Object };
const char* typeName(Type t);  // "null", "boolean", "number", "string", "array", "object"

struct Member;

class Value {
 public:
  using Array = std::vector<Value>;
  using Object = std::vector<Member>;

  // Constructors are defined below Member: clang instantiates the variant
  // (and vector<Member>) where a constructor's body is written, and Member
  // must be complete by then.
  Value();
  Value(std::nullptr_t);
  Value(bool b);
  Value(double d);
  Value(int i);
  Value(unsigned i);
  Value(long i);
  Value(unsigned long i);
  Value(long long i);
  Value(unsigned long long i);
  Value(const char* s);
  Value(std::string s);
  static Value array();
  static Value array(Array items);
  static Value object();
  static Value object(Object members);

  Type type() const { return static_cast<Type>(v_.index()); }
  bool isNull() const { return type() == Type::Null; }
  bool isBool() const { return type() == Type::Bool; }
  bool isNumber() const { return type() == Type::Number; }
  bool isString() const { return type() == Type::String; }
  bool isArray() const { return type() == Type::Array; }
  bool isObject() const { return type() == Type::Object; }

  // Accessors; calling one for the wrong type returns an empty value.
  bool asBool() const;
  double asNumber() const;
  const std::string& asString() const;
  const Array& items() const;
  const Object& members() const;

  // Builders (turn a null into an array / object first).
  Value& push(Value v);                          // array: append, returns the new element
  Value& set(const std::string& key, Value v);   // object: replace or append
  const Value* find(const std::string& key) const;  // object member or nullptr

  // Where the value started in the parsed text (1-based; 0 if built in code).
  int line = 0;
  int column = 0;

 private:
  std::variant<std::monostate, bool, double, std::string, Array, Object> v_;
};

struct Member {
  std::string key;
  Value value;
  int line = 0, column = 0;  // where the key started
};

inline Value Value::array(Array items) {
  Value v;
  v.v_ = std::move(items);
  return v;
}

inline Value::Value() = default;
inline Value::Value(std::nullptr_t) {}
inline Value::Value(bool b) : v_(b) {}
inline Value::Value(double d) : v_(d) {}
inline Value::Value(int i) : v_(static_cast<double>(i)) {}
inline Value::Value(unsigned i) : v_(static_cast<double>(i)) {}
inline Value::Value(long i) : v_(static_cast<double>(i)) {}
inline Value::Value(unsigned long i) : v_(static_cast<double>(i)) {}
inline Value::Value(long long i) : v_(static_cast<double>(i)) {}
inline Value::Value(unsigned long long i) : v_(static_cast<double>(i)) {}
inline Value::Value(const char* s) : v_(std::string(s)) {}
inline Value::Value(std::string s) : v_(std::move(s)) {}
inline Value Value::array() { return array(Array()); }
inline Value Value::object() { return object(Object()); }

inline Value Value::object(Object members) {
  Value v;
  v.v_ = std::move(members);
  return v;
}

struct Limits {
  size_t maxBytes = 64u << 20;     // text length
  int maxDepth = 64;               // nested arrays / objects
  size_t maxValues = 4u << 20;     // values of any kind
  size_t maxStringBytes = 1u << 20;
};

// Parses a whole document (one value, surrounded only by whitespace). Errors
// are hocclInvalidArgument: "line 3, column 14: expected ',' or '}' ...".
Status parse(const std::string& text, Value* out);
Status parse(const std::string& text, Value* out, const Limits& limits);

// Writes a value. indent > 0: pretty, one member / element per line, with
// arrays of numbers, strings, booleans and nulls kept on one line when short;
// indent == 0: compact. Invalid UTF-8 becomes U+FFFD; NaN and infinities are
// written as null (JSON has no spelling for them).
std::string write(const Value& v, int indent = 2);
// A JSON string literal with quotes and escapes.
std::string quote(const std::string& s);

}  // namespace json
}  // namespace hoccl
