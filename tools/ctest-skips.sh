#!/usr/bin/env bash
# Lists the tests that did not run, with the reason each gave, from the JUnit
# file of `ctest --output-junit FILE`:
#   tools/ctest-skips.sh FILE
# Prints "N tests skipped" (nothing else when N is 0), then one line per test:
# "  name: reason". The reason is the test's own "reason:" line, else the
# line after GoogleTest's "Skipped", else its SKIPPED line, else ctest's.
set -euo pipefail
[[ -r ${1:-} ]] || { echo "usage: $0 JUNIT_FILE" >&2; exit 2; }
awk '
  function unxml(s) { gsub(/&lt;/, "<", s); gsub(/&gt;/, ">", s); gsub(/&quot;/, "\"", s); gsub(/&apos;/, "\047", s); gsub(/&amp;/, "\\&", s); return s }
  function trim(s) { sub(/^[ \t*]+/, "", s); sub(/[ \t]+$/, "", s); return s }
  function flush() {
    if (name == "") return
    r = reason != "" ? reason : after != "" ? after : banner != "" ? banner : msg
    n++; out = out sprintf("  %s: %s\n", name, r == "" ? "(no reason given)" : r)
    name = ""
  }
  /<testcase / {
    flush()
    inout = 0; reason = after = banner = msg = ""; want = 0
    if ($0 ~ /status="notrun"/) { match($0, /name="[^"]*"/); name = unxml(substr($0, RSTART + 6, RLENGTH - 7)) }
    next
  }
  name == "" { next }
  /<skipped message=/ { match($0, /message="[^"]*"/); msg = unxml(substr($0, RSTART + 9, RLENGTH - 10)) }
  /<system-out>/ { inout = 1; sub(/.*<system-out>/, "") }
  inout {
    line = unxml($0); sub(/<\/system-out>.*/, "", line)
    if (want && after == "" && trim(line) != "") after = trim(line)
    want = 0
    if (reason == "" && line ~ /reason:/) { reason = line; sub(/.*reason:[ \t]*/, "", reason) }
    if (line ~ /: Skipped$/) want = 1
    if (banner == "" && line ~ /SKIPPED/ && line !~ /^\[  SKIPPED \]/) banner = trim(line)
    if ($0 ~ /<\/system-out>/) inout = 0
  }
  END { flush(); if (n) printf "%d test%s skipped\n%s", n, n == 1 ? "" : "s", out }
' "$1"
