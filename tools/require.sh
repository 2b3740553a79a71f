# shellcheck shell=bash
# Sourced by the scripts README.md's "Install and run" table lists: each checks what it
# needs before it starts, and names the Debian packages that are missing,
# instead of failing half-way through a build.
#
#   require_begin NAME
#   require_cmd COMMAND PACKAGE        a program on PATH
#   require_header HEADER PACKAGE      a C++ header the compiler finds
#   require_library_deps               what building the library needs
#                                      besides cmake, make and g++
#   require_end                        prints what is missing and exits 2
#
# Keep the lists in step with README.md's table (tools/newcomer-check.sh
# installs only what the table says, so a gap shows up there).

_require_name=""
_require_missing=()

require_begin() {
  _require_name=$1
  _require_missing=()
}

_require_add() {
  local p
  for p in "${_require_missing[@]}"; do [[ $p == "$1" ]] && return; done
  _require_missing+=("$1")
}

require_cmd() {
  command -v "$1" >/dev/null 2>&1 || _require_add "$2"
}

require_header() {
  command -v c++ >/dev/null 2>&1 || return 0  # reported by require_cmd c++
  printf '#include <%s>\n' "$1" | c++ -x c++ -E - >/dev/null 2>&1 || _require_add "$2"
}

# The library's required packages (header only, so only the build needs them):
# every command that builds hoccl calls this.
require_library_deps() {
  require_header nlohmann/json.hpp nlohmann-json3-dev
}

require_end() {
  ((${#_require_missing[@]})) || return 0
  {
    echo "$_require_name: missing Debian packages: ${_require_missing[*]}"
    echo "  install them with: apt-get install ${_require_missing[*]}"
    echo "  (README.md, \"Install and run\", lists what each command needs)"
  } >&2
  exit 2
}
