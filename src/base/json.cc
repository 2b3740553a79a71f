#include "src/base/json.h"

#include <cctype>
#include <charconv>
#include <cstdarg>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <unordered_set>

namespace hoccl {
namespace json {

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

bool Value::asBool() const { return isBool() && std::get<bool>(v_); }
double Value::asNumber() const { return isNumber() ? std::get<double>(v_) : 0.0; }

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

// Length of the valid UTF-8 sequence starting at p (1..4), or 0 if invalid.
size_t utf8Length(const unsigned char* p, size_t avail) {
  unsigned char c = p[0];
  if (c < 0x80) return 1;
  size_t n;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) n = 2;
  else if (c == 0xE0) n = 3, lo = 0xA0;
  else if (c == 0xED) n = 3, hi = 0x9F;  // no UTF-16 surrogates
  else if (c >= 0xE1 && c <= 0xEF) n = 3;
  else if (c == 0xF0) n = 4, lo = 0x90;
  else if (c >= 0xF1 && c <= 0xF3) n = 4;
  else if (c == 0xF4) n = 4, hi = 0x8F;
  else return 0;
  if (avail < n) return 0;
  if (p[1] < lo || p[1] > hi) return 0;
  for (size_t i = 2; i < n; ++i)
    if (p[i] < 0x80 || p[i] > 0xBF) return 0;
  return n;
}

void appendUtf8(std::string* out, uint32_t cp) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

class Parser {
 public:
  Parser(const std::string& s, const Limits& lim) : s_(s), lim_(lim) {}

  Status document(Value* out) {
    if (s_.size() > lim_.maxBytes)
      return errorf(hocclInvalidArgument, "line 1, column 1: document of %zu bytes is larger than the limit of %zu",
                    s_.size(), lim_.maxBytes);
    skipSpace();
    HOCCL_TRY(value(out, 0));
    skipSpace();
    if (p_ < s_.size()) return fail("expected end of input after the document, found %s", found().c_str());
    return Status();
  }

 private:
  const std::string& s_;
  const Limits& lim_;
  size_t p_ = 0;
  int line_ = 1;
  size_t lineStart_ = 0;
  size_t values_ = 0;

  int column() const { return static_cast<int>(p_ - lineStart_) + 1; }

  Status fail(const char* fmt, ...) __attribute__((format(printf, 2, 3))) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return errorf(hocclInvalidArgument, "line %d, column %d: %s", line_, column(), buf);
  }

  std::string found() const {
    if (p_ >= s_.size()) return "end of input";
    unsigned char c = static_cast<unsigned char>(s_[p_]);
    char buf[32];
    if (c >= 0x20 && c < 0x7F) snprintf(buf, sizeof buf, "'%c'", c);
    else snprintf(buf, sizeof buf, "byte 0x%02X", c);
    return buf;
  }

  void skipSpace() {
    while (p_ < s_.size()) {
      char c = s_[p_];
      if (c == '\n') {
        ++p_;
        ++line_;
        lineStart_ = p_;
      } else if (c == ' ' || c == '\t' || c == '\r') {
        ++p_;
      } else {
        break;
      }
    }
  }

  bool peek(char c) const { return p_ < s_.size() && s_[p_] == c; }

  Status value(Value* out, int depth) {
    if (++values_ > lim_.maxValues) return fail("more than %zu values in the document", lim_.maxValues);
    out->line = line_;
    out->column = column();
    if (p_ >= s_.size()) return fail("expected a value, found end of input");
    char c = s_[p_];
    if (c == '{' || c == '[') {
      if (depth >= lim_.maxDepth) return fail("nesting deeper than %d levels", lim_.maxDepth);
      return c == '{' ? object(out, depth + 1) : array(out, depth + 1);
    }
    if (c == '"') {
      std::string str;
      HOCCL_TRY(string(&str));
      int l = out->line, col = out->column;
      *out = Value(std::move(str));
      out->line = l, out->column = col;
      return Status();
    }
    if (c == '-' || (c >= '0' && c <= '9')) return number(out);
    if (literal("true")) return set(out, Value(true));
    if (literal("false")) return set(out, Value(false));
    if (literal("null")) return set(out, Value());
    return fail("expected a value (object, array, string, number, true, false or null), found %s", found().c_str());
  }

  static Status set(Value* out, Value v) {
    v.line = out->line, v.column = out->column;
    *out = std::move(v);
    return Status();
  }

  bool literal(const char* word) {
    size_t n = strlen(word);
    if (s_.compare(p_, n, word) != 0) return false;
    // "trueish" is not "true" followed by garbage we would report later.
    if (p_ + n < s_.size() && isalnum(static_cast<unsigned char>(s_[p_ + n]))) return false;
    p_ += n;
    return true;
  }

  Status object(Value* out, int depth) {
    int l = out->line, col = out->column;
    ++p_;  // '{'
    skipSpace();
    if (peek('}')) {
      ++p_;
      return set(out, Value::object());
    }
    std::unordered_set<std::string> keys;
    Value::Object members;
    for (;;) {
      if (!peek('"')) {
        if (peek('}') && !members.empty()) return fail("expected a key after ',' (trailing commas are not allowed)");
        return fail("expected a string key, found %s", found().c_str());
      }
      Member m;
      m.line = line_;
      m.column = column();
      HOCCL_TRY(string(&m.key));
      if (!keys.insert(m.key).second)
        return errorf(hocclInvalidArgument, "line %d, column %d: duplicate key %s", m.line, m.column,
                      quote(m.key).c_str());
      skipSpace();
      if (!peek(':')) return fail("expected ':' after the key %s, found %s", quote(m.key).c_str(), found().c_str());
      ++p_;
      skipSpace();
      HOCCL_TRY(value(&m.value, depth));
      members.push_back(std::move(m));
      skipSpace();
      if (peek(',')) {
        ++p_;
        skipSpace();
        continue;
      }
      if (peek('}')) {
        ++p_;
        break;
      }
      return fail("expected ',' or '}' after an object member, found %s", found().c_str());
    }
    *out = Value::object(std::move(members));
    out->line = l, out->column = col;
    return Status();
  }

  Status array(Value* out, int depth) {
    int l = out->line, col = out->column;
    *out = Value::array();
    out->line = l, out->column = col;
    ++p_;  // '['
    skipSpace();
    if (peek(']')) {
      ++p_;
      return Status();
    }
    for (;;) {
      if (peek(']')) return fail("expected a value after ',' (trailing commas are not allowed)");
      Value& v = out->push(Value());
      HOCCL_TRY(value(&v, depth));
      skipSpace();
      if (peek(',')) {
        ++p_;
        skipSpace();
        continue;
      }
      if (peek(']')) {
        ++p_;
        return Status();
      }
      return fail("expected ',' or ']' after an array element, found %s", found().c_str());
    }
  }

  Status hex4(uint32_t* cp) {
    if (p_ + 4 > s_.size()) return fail("expected 4 hex digits after \\u");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = s_[p_ + i];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= c - '0';
      else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
      else return fail("expected 4 hex digits after \\u");
    }
    p_ += 4;
    *cp = v;
    return Status();
  }

  Status string(std::string* out) {
    ++p_;  // '"'
    out->clear();
    for (;;) {
      if (p_ >= s_.size()) return fail("unterminated string");
      if (out->size() > lim_.maxStringBytes) return fail("string longer than %zu bytes", lim_.maxStringBytes);
      unsigned char c = static_cast<unsigned char>(s_[p_]);
      if (c == '"') {
        ++p_;
        return Status();
      }
      if (c < 0x20) return fail("control character U+%04X in a string (write it as an escape)", c);
      if (c == '\\') {
        ++p_;
        if (p_ >= s_.size()) return fail("unterminated string");
        char e = s_[p_++];
        switch (e) {
          case '"': out->push_back('"'); break;
          case '\\': out->push_back('\\'); break;
          case '/': out->push_back('/'); break;
          case 'b': out->push_back('\b'); break;
          case 'f': out->push_back('\f'); break;
          case 'n': out->push_back('\n'); break;
          case 'r': out->push_back('\r'); break;
          case 't': out->push_back('\t'); break;
          case 'u': {
            uint32_t cp = 0;
            HOCCL_TRY(hex4(&cp));
            if (cp >= 0xDC00 && cp <= 0xDFFF) return fail("unpaired low surrogate \\u%04X", cp);
            if (cp >= 0xD800 && cp <= 0xDBFF) {
              uint32_t lo = 0;
              if (s_.compare(p_, 2, "\\u") != 0) return fail("high surrogate \\u%04X without a low surrogate", cp);
              p_ += 2;
              HOCCL_TRY(hex4(&lo));
              if (lo < 0xDC00 || lo > 0xDFFF) return fail("high surrogate \\u%04X without a low surrogate", cp);
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            appendUtf8(out, cp);
            break;
          }
          default:
            --p_;
            return fail("invalid escape '\\%c'", e);
        }
        continue;
      }
      size_t n = utf8Length(reinterpret_cast<const unsigned char*>(s_.data()) + p_, s_.size() - p_);
      if (n == 0) return fail("invalid UTF-8 (byte 0x%02X)", c);
      out->append(s_, p_, n);
      p_ += n;
    }
  }

  Status number(Value* out) {
    size_t start = p_;
    if (peek('-')) ++p_;
    auto digit = [&] { return p_ < s_.size() && s_[p_] >= '0' && s_[p_] <= '9'; };
    if (!digit()) return fail("expected a digit in a number, found %s", found().c_str());
    if (peek('0')) {
      ++p_;
      if (digit()) return fail("numbers may not have leading zeros");
    } else {
      while (digit()) ++p_;
    }
    if (peek('.')) {
      ++p_;
      if (!digit()) return fail("expected a digit after '.', found %s", found().c_str());
      while (digit()) ++p_;
    }
    if (peek('e') || peek('E')) {
      ++p_;
      if (peek('+') || peek('-')) ++p_;
      if (!digit()) return fail("expected a digit in the exponent, found %s", found().c_str());
      while (digit()) ++p_;
    }
    double d = 0;
    auto r = std::from_chars(s_.data() + start, s_.data() + p_, d);
    if (r.ec != std::errc() || !std::isfinite(d)) {
      p_ = start;
      return fail("number out of range");
    }
    return set(out, Value(d));
  }
};

void writeNumber(std::string* out, double d) {
  if (!std::isfinite(d)) {
    *out += "null";
    return;
  }
  char buf[64];
  if (d == std::floor(d) && std::fabs(d) < 1e15) {
    snprintf(buf, sizeof buf, "%lld", static_cast<long long>(d));
    *out += buf;
    return;
  }
  auto r = std::to_chars(buf, buf + sizeof buf, d);
  out->append(buf, r.ptr);
}

bool isScalar(const Value& v) { return !v.isArray() && !v.isObject(); }

void writeValue(std::string* out, const Value& v, int indent, int level, bool spaced);

// Writes v on one line; "spaced" puts a space after ':' and ','.
std::string oneLine(const Value& v) {
  std::string s;
  writeValue(&s, v, 0, 0, true);
  return s;
}

bool fitsOnOneLine(const Value& v, int level, int indent) {
  if (v.isArray()) {
    for (const Value& e : v.items())
      if (!isScalar(e)) return false;
  } else if (v.isObject()) {
    for (const Member& m : v.members())
      if (!isScalar(m.value)) return false;
  } else {
    return true;
  }
  return oneLine(v).size() + static_cast<size_t>(level * indent) <= 100;
}

void newline(std::string* out, int indent, int level) {
  out->push_back('\n');
  out->append(static_cast<size_t>(indent * level), ' ');
}

void writeValue(std::string* out, const Value& v, int indent, int level, bool spaced) {
  switch (v.type()) {
    case Type::Null: *out += "null"; return;
    case Type::Bool: *out += v.asBool() ? "true" : "false"; return;
    case Type::Number: writeNumber(out, v.asNumber()); return;
    case Type::String: *out += quote(v.asString()); return;
    case Type::Array:
    case Type::Object: break;
  }
  bool obj = v.isObject();
  size_t n = obj ? v.members().size() : v.items().size();
  out->push_back(obj ? '{' : '[');
  if (n == 0) {
    out->push_back(obj ? '}' : ']');
    return;
  }
  bool pretty = indent > 0 && !fitsOnOneLine(v, level, indent);
  for (size_t i = 0; i < n; ++i) {
    if (i) *out += (spaced && !pretty) ? ", " : ",";
    if (pretty) newline(out, indent, level + 1);
    if (obj) {
      const Member& m = v.members()[i];
      *out += quote(m.key);
      *out += (spaced || pretty) ? ": " : ":";
      writeValue(out, m.value, pretty ? indent : 0, level + 1, spaced || pretty);
    } else {
      writeValue(out, v.items()[i], pretty ? indent : 0, level + 1, spaced || pretty);
    }
  }
  if (pretty) newline(out, indent, level);
  out->push_back(obj ? '}' : ']');
}

}  // namespace

Status parse(const std::string& text, Value* out) { return parse(text, out, Limits()); }

Status parse(const std::string& text, Value* out, const Limits& limits) {
  Value v;
  Parser p(text, limits);
  HOCCL_TRY(p.document(&v));
  *out = std::move(v);
  return Status();
}

std::string quote(const std::string& s) {
  std::string out = "\"";
  const unsigned char* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = p[i];
    if (c == '"') out += "\\\"";
    else if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c == '\b') out += "\\b";
    else if (c == '\f') out += "\\f";
    else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      snprintf(buf, sizeof buf, "\\u%04X", c);
      out += buf;
    } else if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else {
      size_t n = utf8Length(p + i, s.size() - i);
      if (n == 0) {
        out += "\xEF\xBF\xBD";  // U+FFFD
        ++i;
        continue;
      }
      out.append(s, i, n);
      i += n;
      continue;
    }
    ++i;
  }
  out.push_back('"');
  return out;
}

std::string write(const Value& v, int indent) {
  std::string out;
  writeValue(&out, v, indent < 0 ? 0 : indent, 0, false);
  if (indent > 0) out.push_back('\n');
  return out;
}

}  // namespace json
}  // namespace hoccl
