#!/usr/bin/env bash
# tests/lint/lint_map.sh: the map (docs/DESIGN.md) held against the tree, so that it cannot rot.
#   1. Floors. A file includes only its own floor and those below (kernels <- engine <- storage
#      <- console); kernels/cpu and kernels/cuda stay apart; inside the console, a file includes
#      only its own level or those below: tui/pure <- the console's own files <- tui <- cmd <-
#      main.c. tui/pure includes no curses.
#   2. Names. A file's first comment, when it names a path of the tree, names the file itself or
#      a folder that holds it.
#   3. References. Every path of the tree that a comment, a script or a document names exists
#      (with or without its extension; a trailing * or a {a,b} list is a pattern).
#   4. The one writer: rename(2) and fsync(2) are called in storage/atomic_file.c alone.
# Prints one line per breach and exits 1 when there is one.
# usage: lint_map.sh SOURCE_DIR
set -u
cd "$1" || exit 2
breaches=0
breach() { echo "$*"; breaches=$((breaches + 1)); }
tops='console|engine|kernels|storage|tests|bench|docs|themes'

floor() {   # floor PATH: 0 kernels, 1 engine, 2 storage, 3 console; empty for anything else
  case $1 in kernels/*) echo 0 ;; engine/*) echo 1 ;; storage/*) echo 2 ;; console/*) echo 3 ;; esac
}
console_level() {   # console_level PATH: the level of a console file (1 above)
  case $1 in
    console/tui/pure/*) echo 0 ;;
    console/tui/*) echo 2 ;;
    console/cmd/*) echo 3 ;;
    console/main.c) echo 4 ;;
    console/*) echo 1 ;;
  esac
}

sources=$(git ls-files 'kernels/*' 'engine/*' 'storage/*' 'console/*' | grep -E '\.(c|h|cu|cuh)$')

# 1. Floors.
for f in $sources; do
  ff=$(floor "$f")
  while read -r inc; do
    [ -n "$inc" ] || continue
    fi=$(floor "$inc")
    [ -n "$fi" ] || continue
    if [ "$fi" -gt "$ff" ]; then breach "$f includes $inc: a floor up"; continue; fi
    case $f:$inc in
      kernels/cpu/*:kernels/cuda/* | kernels/cuda/*:kernels/cpu/*) breach "$f includes $inc: across kernels/cpu and kernels/cuda" ;;
      console/*:console/*)
        [ "$(console_level "$inc")" -le "$(console_level "$f")" ] ||
          breach "$f includes $inc: up the console's levels (tui/pure <- console <- tui <- cmd <- main.c)" ;;
    esac
  done < <(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f")
  case $f in
    console/tui/pure/*) grep -qE '^#include <(n?curses|ncursesw/curses)\.h>' "$f" && breach "$f includes curses: tui/pure is pure" ;;
  esac
done

# 2. Names: a first comment that opens with a path, as a label ("// engine/data: ..."), names
#    the file itself or a folder that holds it.
for f in $(git ls-files | grep -E '\.(c|h|cu|cuh|sh|py)$'); do
  first=$(grep -m1 -E '^[[:space:]]*(//|/\*|#[^!]|""")' "$f")
  case $first in '#ifndef'* | '#include'* | '#define'* | '#if'* | '#pragma'*) continue ;; esac
  named=$(sed -nE "s@^[[:space:]]*(//|/\*|#|\"\"\")[[:space:]]*(($tops)/[A-Za-z0-9_./-]*[A-Za-z0-9_]).*@\2@p" <<< "$first")
  [ -n "$named" ] || continue
  case $named in "$f" | "${f%.*}") continue ;; esac
  case $f in "$named"/*) continue ;; esac
  breach "$f: its first comment names $named"
done

# 3. References: every tree path named anywhere in the tracked text files.
exists() {   # exists PATH: a file or folder of the tree, or one with an extension added
  local p=$1
  [ -e "$p" ] && return 0
  compgen -G "$p.*" > /dev/null && return 0
  case $p in *'*'* | *'{'*) compgen -G "${p//\{*\}/*}" > /dev/null && return 0 ;; esac
  return 1
}
while IFS=: read -r f ref; do
  ref=${ref%.}
  case $ref in '' | *.theme) continue ;; esac   # a user's theme file, named as an example
  exists "$ref" || breach "$f names $ref, which the tree does not hold"
done < <(git ls-files | grep -vE '^tests/fixtures/|^tests/lint/lint_map_selftest.sh$|\.(safetensors|bin|png)$' |
           xargs grep -oE "(^|[^A-Za-z0-9_./{}*-])($tops)/[A-Za-z0-9_./{},*-]*[A-Za-z0-9_}*]" 2>/dev/null |
           sed -E "s/:[^a-z]?($tops)\//:\1\//" | sort -u)

# 4. The one writer.
for f in $sources; do
  [ "$f" = storage/atomic_file.c ] && continue
  grep -nE '(^|[^A-Za-z0-9_.>])(rename|fsync|fdatasync)[[:space:]]*\(' "$f" | grep -vE '^[0-9]+:[[:space:]]*//' |
    while IFS=: read -r line _; do echo "$f:$line calls rename or fsync: durable writes go through storage/atomic_file.c"; done
done > /tmp/lint_map_writer.$$
while read -r l; do breach "$l"; done < /tmp/lint_map_writer.$$
rm -f /tmp/lint_map_writer.$$

echo "lint_map: $breaches breaches"
[ "$breaches" -eq 0 ]
