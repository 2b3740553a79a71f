// JSON for the topology file and the node records: a value tree whose every
// value and object key remembers its line and column in the parsed text, so
// callers can name the line of a bad field. nlohmann-json (3.11, Debian's
// nlohmann-json3-dev) does the reading and writing in json.cc; it records no
// positions, so we keep this small tree, and no other file (and no public
// or installed header) includes nlohmann.
//
// Reading is strict (RFC 8259: no comments, no trailing commas, no byte order
// mark; and no duplicate keys) and bounded (depth, size, number of values),
// so hostile input is an error with a line and column, never a crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "base/error.h"

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
  Value(unsigned long long i);  // above INT64_MAX: kept as a double
  Value(const char* s);
  Value(std::string s);
  static Value array();
  static Value object();

  Type type() const;
  bool isNull() const { return type() == Type::Null; }
  bool isBool() const { return type() == Type::Bool; }
  bool isNumber() const { return type() == Type::Number; }
  bool isString() const { return type() == Type::String; }
  bool isArray() const { return type() == Type::Array; }
  bool isObject() const { return type() == Type::Object; }

  // Accessors; calling one for the wrong type returns an empty value.
  bool asBool() const;
  double asNumber() const;
  // The number as an exact integer: an integer literal that fits int64_t,
  // or an integral double no larger than 2^53. False otherwise.
  bool asInteger(int64_t* out) const;
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
  friend class TreeBuilder;  // json.cc: appends members with their positions
  // Numbers are int64_t when written as integers that fit, double otherwise.
  std::variant<std::monostate, bool, double, std::string, Array, Object, int64_t> v_;
};

struct Member {
  std::string key;
  Value value;
  int line = 0, column = 0;  // where the key started
};

inline Value::Value() = default;
inline Value::Value(std::nullptr_t) {}
inline Value::Value(bool b) : v_(b) {}
inline Value::Value(double d) : v_(d) {}
inline Value::Value(int i) : v_(static_cast<int64_t>(i)) {}
inline Value::Value(unsigned i) : v_(static_cast<int64_t>(i)) {}
inline Value::Value(long i) : v_(static_cast<int64_t>(i)) {}
inline Value::Value(unsigned long i) : Value(static_cast<unsigned long long>(i)) {}
inline Value::Value(long long i) : v_(static_cast<int64_t>(i)) {}
inline Value::Value(unsigned long long i) {
  if (i <= static_cast<unsigned long long>(INT64_MAX)) v_ = static_cast<int64_t>(i);
  else v_ = static_cast<double>(i);
}
inline Value::Value(const char* s) : v_(std::string(s)) {}
inline Value::Value(std::string s) : v_(std::move(s)) {}
inline Value Value::array() {
  Value v;
  v.v_ = Array();
  return v;
}
inline Value Value::object() {
  Value v;
  v.v_ = Object();
  return v;
}

struct Limits {
  size_t maxBytes = 64u << 20;     // text length
  int maxDepth = 64;               // nested arrays / objects
  size_t maxValues = 4u << 20;     // values of any kind
  size_t maxStringBytes = 1u << 20;
};

// Parses a whole document (one value, surrounded only by whitespace). Errors
// are hocclInvalidArgument and start with where the problem is:
// "line 3, column 14: syntax error while parsing object - unexpected ..."
Status parse(const std::string& text, Value* out);
Status parse(const std::string& text, Value* out, const Limits& limits);

// Writes a value. indent > 0: pretty, one member / element per line, ending
// with a newline; indent == 0: compact, on one line. Integers are written
// exactly, and so are integral doubles up to 2^53, without a fraction. Invalid UTF-8 becomes U+FFFD; NaN and
// infinities are written as null (JSON has no spelling for them).
std::string write(const Value& v, int indent = 2);
// A JSON string literal with quotes and escapes.
std::string quote(const std::string& s);

}  // namespace json
}  // namespace hoccl
