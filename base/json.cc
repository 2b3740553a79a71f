#include "base/json.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <unordered_set>

// Reading and writing JSON with nlohmann-json. Reading goes through its SAX
// interface into our Value tree: nlohmann checks the grammar, escapes,
// surrogates, UTF-8 and numbers; we add the positions, the limits, the
// duplicate-key check, and error messages that start "line L, column C:".
#include <nlohmann/json.hpp>

namespace hoccl {
namespace json {

using Nlohmann = nlohmann::ordered_json;  // keeps keys in the order written

const char* typeName(Type t) {
  switch (t) {
    case Type::Null: return "null";
    case Type::Bool: return "boolean";
    case Type::Number: return "number";
    case Type::String: return "string";
    case Type::Array: return "array";
    case Type::Object: return "object";
  }
  return "?";
}

Type Value::type() const {
  switch (v_.index()) {
    case 1: return Type::Bool;
    case 2: case 6: return Type::Number;
    case 3: return Type::String;
    case 4: return Type::Array;
    case 5: return Type::Object;
    default: return Type::Null;
  }
}

bool Value::asBool() const { return isBool() && std::get<bool>(v_); }

double Value::asNumber() const {
  if (auto* i = std::get_if<int64_t>(&v_)) return static_cast<double>(*i);
  if (auto* d = std::get_if<double>(&v_)) return *d;
  return 0.0;
}

bool Value::asInteger(int64_t* out) const {
  if (auto* i = std::get_if<int64_t>(&v_)) {
    *out = *i;
    return true;
  }
  auto* d = std::get_if<double>(&v_);
  if (!d || *d != std::floor(*d) || std::fabs(*d) > 9007199254740992.0) return false;
  *out = static_cast<int64_t>(*d);
  return true;
}

const std::string& Value::asString() const {
  static const std::string empty;
  return isString() ? std::get<std::string>(v_) : empty;
}

const Value::Array& Value::items() const {
  static const Array empty;
  return isArray() ? std::get<Array>(v_) : empty;
}

const Value::Object& Value::members() const {
  static const Object empty;
  return isObject() ? std::get<Object>(v_) : empty;
}

Value& Value::push(Value v) {
  if (!isArray()) v_ = Array();
  Array& a = std::get<Array>(v_);
  a.push_back(std::move(v));
  return a.back();
}

Value& Value::set(const std::string& key, Value v) {
  if (!isObject()) v_ = Object();
  Object& o = std::get<Object>(v_);
  for (Member& m : o) {
    if (m.key == key) {
      m.value = std::move(v);
      return m.value;
    }
  }
  o.push_back(Member{key, std::move(v)});
  return o.back().value;
}

const Value* Value::find(const std::string& key) const {
  for (const Member& m : members())
    if (m.key == key) return &m.value;
  return nullptr;
}

namespace {

struct Position {
  int line = 1, column = 1;
};

// Line and column (1-based, columns in bytes) of text[offset].
Position positionOf(const std::string& text, size_t offset) {
  Position p;
  size_t lineStart = 0;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++p.line;
      lineStart = i + 1;
    }
  }
  p.column = static_cast<int>(offset - lineStart) + 1;
  return p;
}

// nlohmann's message without its "[json.exception...] parse error at line
// L, column C: " prefix (we give our own position), bytes outside printable
// ASCII written as \xNN.
std::string reason(const std::string& what) {
  std::string s = what;
  if (s.compare(0, 1, "[") == 0 && s.find("] ") != std::string::npos) s.erase(0, s.find("] ") + 2);
  if (s.compare(0, 15, "parse error at ") == 0 && s.find(": ") != std::string::npos) s.erase(0, s.find(": ") + 2);
  std::string out;
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7F) {
      out.push_back(static_cast<char>(c));
    } else {
      char buf[8];
      snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    }
  }
  return out;
}

// What a newcomer most likely wrote, when nlohmann stopped at text[offset]
// saying `why`.
std::string hint(const std::string& text, size_t offset, const std::string& why) {
  if (offset >= text.size()) return "";
  char c = text[offset];
  if ((c == '}' || c == ']') && why.find("unexpected") != std::string::npos) {
    size_t i = offset;
    while (i > 0 && (text[i - 1] == ' ' || text[i - 1] == '\t' || text[i - 1] == '\r' || text[i - 1] == '\n')) --i;
    if (i > 0 && text[i - 1] == ',') return " (trailing commas are not allowed)";
  }
  if (c == '/' && why.find("invalid literal") != std::string::npos) return " (comments are not allowed)";
  if (c >= '0' && c <= '9' && why.find("unexpected number") != std::string::npos) {
    size_t start = offset;
    while (start > 0 && text[start - 1] >= '0' && text[start - 1] <= '9') --start;
    if (start < offset && text[start] == '0') return " (numbers may not have leading zeros)";
  }
  return "";
}

bool isSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

}  // namespace

// Builds the Value tree from nlohmann's SAX events. The events come in the
// order of the tokens in the text, and the text up to each token has been
// checked by then, so a cursor that steps over one token per event knows
// where every value and key starts.
class TreeBuilder : public nlohmann::json_sax<Nlohmann> {
 public:
  TreeBuilder(const std::string& text, const Limits& limits, Value* root)
      : text_(text), limits_(limits), root_(root) {}

  bool null() override { return scalar(Value()); }
  bool boolean(bool b) override { return scalar(Value(b)); }
  bool number_integer(number_integer_t i) override { return scalar(Value(static_cast<long long>(i))); }
  bool number_unsigned(number_unsigned_t u) override { return scalar(Value(static_cast<unsigned long long>(u))); }

  bool number_float(number_float_t, const string_t& literal) override {
    // Our own conversion, which, unlike nlohmann's, rejects underflow too.
    double d = 0;
    auto r = std::from_chars(literal.data(), literal.data() + literal.size(), d);
    if (r.ec != std::errc() || r.ptr != literal.data() + literal.size() || !std::isfinite(d)) {
      Position p = next();
      return fail(p, "number out of range: " + literal);
    }
    return scalar(Value(d));
  }

  bool string(string_t& s) override {
    if (s.size() > limits_.maxStringBytes) return fail(next(), stringTooLong());
    return scalar(Value(std::move(s)));
  }

  bool binary(binary_t&) override { return fail(next(), "binary values are not JSON"); }

  bool start_object(std::size_t) override { return open(Value::object()); }
  bool start_array(std::size_t) override { return open(Value::array()); }

  bool key(string_t& k) override {
    Position p = next();
    if (k.size() > limits_.maxStringBytes) return fail(p, stringTooLong());
    if (!keys_.back().insert(k).second) return fail(p, "duplicate key " + quote(k));
    auto& members = std::get<Value::Object>(stack_.back()->v_);
    members.push_back(Member{std::move(k), Value(), p.line, p.column});
    return true;
  }

  bool end_object() override {
    next();
    keys_.pop_back();
    stack_.pop_back();
    return true;
  }

  bool end_array() override {
    next();
    stack_.pop_back();
    return true;
  }

  bool parse_error(std::size_t byte, const std::string& token, const Nlohmann::exception& e) override {
    // `byte` counts what nlohmann read, the offending byte last (one past
    // the end at end of input).
    size_t offset = byte > 0 ? std::min(byte - 1, text_.size()) : 0;
    std::string why = e.id == 406 ? "number out of range: " + reason(token) : reason(e.what());
    // A bad byte in a string or number is named exactly; an unexpected or
    // unknown token by where it starts.
    bool inToken = why.find("invalid string") != std::string::npos || why.find("invalid number") != std::string::npos ||
                   why.find("unexpected end of input") != std::string::npos;
    bool structural = offset < text_.size() && std::strchr("{}[],:", text_[offset]) && text_[offset] != '\0' &&
                      why.find("unexpected") != std::string::npos;
    Position where = inToken || structural ? positionOf(text_, offset) : peek();
    if (offset < text_.size() && static_cast<unsigned char>(text_[offset]) >= 0x80 &&
        why.find("UTF-8") != std::string::npos) {
      char buf[24];
      snprintf(buf, sizeof buf, " (byte 0x%02X)", static_cast<unsigned char>(text_[offset]));
      why += buf;
    }
    fail(where, why + hint(text_, offset, why));
    return false;
  }

  const std::string& error() const { return error_; }

 private:
  const std::string& text_;
  const Limits& limits_;
  Value* root_;
  std::vector<Value*> stack_;  // open arrays and objects, innermost last
  std::vector<std::unordered_set<std::string>> keys_;  // of each open object
  size_t values_ = 0;
  std::string error_;
  // Where the tokens that events stood for end: the cursor steps over one
  // token per event.
  struct Cursor {
    size_t at = 0;
    int line = 1;
    size_t lineStart = 0;

    Position position() const { return Position{line, static_cast<int>(at - lineStart) + 1}; }

    void skipSeparators(const std::string& t) {
      for (; at < t.size() && (isSpace(t[at]) || t[at] == ',' || t[at] == ':'); ++at) {
        if (t[at] == '\n') {
          ++line;
          lineStart = at + 1;
        }
      }
    }

    // Steps over one token that nlohmann has accepted.
    void skipToken(const std::string& t) {
      auto digits = [&] {
        while (at < t.size() && t[at] >= '0' && t[at] <= '9') ++at;
      };
      if (at >= t.size()) return;
      char c = t[at++];
      if (c == '"') {
        while (at < t.size() && t[at] != '"') at += t[at] == '\\' ? 2 : 1;
        ++at;
      } else if (c == '-' || (c >= '0' && c <= '9')) {
        if (c == '-') c = at < t.size() ? t[at++] : '0';
        if (c != '0') digits();  // "012" is the number 0, then an error
        if (at < t.size() && t[at] == '.') ++at, digits();
        if (at < t.size() && (t[at] == 'e' || t[at] == 'E')) {
          ++at;
          if (at < t.size() && (t[at] == '+' || t[at] == '-')) ++at;
          digits();
        }
      } else if (c == 't' || c == 'n') {
        at += 3;  // true, null
      } else if (c == 'f') {
        at += 4;  // false
      }
    }
  };
  Cursor cursor_;

  // Where the next token starts; steps over it.
  Position next() {
    cursor_.skipSeparators(text_);
    Position p = cursor_.position();
    cursor_.skipToken(text_);
    return p;
  }

  // Where the next token starts.
  Position peek() const {
    Cursor c = cursor_;
    c.skipSeparators(text_);
    return c.position();
  }

  bool fail(Position p, const std::string& why) {
    if (error_.empty()) error_ = "line " + std::to_string(p.line) + ", column " + std::to_string(p.column) + ": " + why;
    return false;
  }

  std::string stringTooLong() const { return "string longer than " + std::to_string(limits_.maxStringBytes) + " bytes"; }

  // Where the next value goes: the root, the end of the open array, or the
  // last key of the open object.
  Value* slot() {
    if (stack_.empty()) return root_;
    Value& top = *stack_.back();
    if (top.isArray()) return &top.push(Value());
    return &std::get<Value::Object>(top.v_).back().value;
  }

  bool place(Value v, Position p, Value** where) {
    if (++values_ > limits_.maxValues)
      return fail(p, "more than " + std::to_string(limits_.maxValues) + " values in the document");
    *where = slot();
    **where = std::move(v);
    (*where)->line = p.line;
    (*where)->column = p.column;
    return true;
  }

  bool scalar(Value v) {
    Value* where = nullptr;
    return place(std::move(v), next(), &where);
  }

  bool open(Value container) {
    Position p = next();
    if (stack_.size() >= static_cast<size_t>(limits_.maxDepth))
      return fail(p, "nesting deeper than " + std::to_string(limits_.maxDepth) + " levels");
    Value* where = nullptr;
    if (!place(std::move(container), p, &where)) return false;
    stack_.push_back(where);
    if (where->isObject()) keys_.emplace_back();
    return true;
  }
};

Status parse(const std::string& text, Value* out) { return parse(text, out, Limits()); }

Status parse(const std::string& text, Value* out, const Limits& limits) {
  if (text.size() > limits.maxBytes)
    return errorf(hocclInvalidArgument, "line 1, column 1: document of %zu bytes is larger than the limit of %zu",
                  text.size(), limits.maxBytes);
  // nlohmann skips a byte order mark; RFC 8259 lets a parser refuse one, as
  // we always have.
  if (text.compare(0, 3, "\xEF\xBB\xBF") == 0)
    return Status(hocclInvalidArgument, "line 1, column 1: byte order mark (U+FEFF) before the document");
  // nlohmann takes a NUL byte for the end of the input; no JSON text has one.
  size_t nul = text.find('\0');
  if (nul != std::string::npos) {
    Position p = positionOf(text, nul);
    return errorf(hocclInvalidArgument, "line %d, column %d: NUL byte (0x00) in the text", p.line, p.column);
  }
  // No document at all: said in our words (nlohmann's differ between
  // releases: 3.11.2 "unexpected end of input", 3.11.3 "attempting to parse
  // an empty input").
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    Position p = positionOf(text, text.size());
    return errorf(hocclInvalidArgument, "line %d, column %d: unexpected end of input: no JSON value in the text",
                  p.line, p.column);
  }
  Value v;
  TreeBuilder builder(text, limits, &v);
  bool ok = Nlohmann::sax_parse(text, &builder, Nlohmann::input_format_t::json, /*strict=*/true,
                                /*ignore_comments=*/false);
  if (!ok) return Status(hocclInvalidArgument, builder.error().empty() ? "invalid JSON" : builder.error());
  *out = std::move(v);
  return Status();
}

namespace {

Nlohmann toNlohmann(const Value& v) {
  switch (v.type()) {
    case Type::Null: return nullptr;
    case Type::Bool: return v.asBool();
    case Type::String: return v.asString();
    case Type::Number: {
      int64_t i = 0;
      if (v.asInteger(&i)) return i;  // int64 values, and integral doubles up to 2^53
      return v.asNumber();  // NaN and infinities are written as null
    }
    case Type::Array: {
      Nlohmann a = Nlohmann::array();
      for (const Value& e : v.items()) a.push_back(toNlohmann(e));
      return a;
    }
    case Type::Object: {
      Nlohmann o = Nlohmann::object();
      auto& members = o.get_ref<Nlohmann::object_t&>();
      // Keys are unique already: append without nlohmann's linear search.
      for (const Member& m : v.members()) members.Container::emplace_back(m.key, toNlohmann(m.value));
      return o;
    }
  }
  return nullptr;
}

}  // namespace

std::string quote(const std::string& s) {
  return Nlohmann(s).dump(-1, ' ', /*ensure_ascii=*/false, Nlohmann::error_handler_t::replace);
}

std::string write(const Value& v, int indent) {
  std::string out =
      toNlohmann(v).dump(indent > 0 ? indent : -1, ' ', /*ensure_ascii=*/false, Nlohmann::error_handler_t::replace);
  if (indent > 0) out.push_back('\n');
  return out;
}

}  // namespace json
}  // namespace hoccl
