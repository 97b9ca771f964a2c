#!/usr/bin/env bash
# tests/lint/docs_flags.sh: docs/usage.md held to the program's flags, command by command, so
# that a flag cannot be added, renamed or removed without the page saying so.
#   The program's flags of COMMAND: every flag at the start of a line of `pptrain COMMAND --help`
#     and every flag of its usage line ([--tui], [--json]). Every row of an option table in
#     console/ ({"--flag", ...}) must show in some command's help, so no flag hides from it.
#   The page's flags of COMMAND: every flag at the start of a line, or in brackets on its usage:
#     line, inside a fenced block of the section `## \`pptrain COMMAND\``; the line `and every
#     run option of pptrain train` there adds the flag lines of train's section.
#   A breach: a flag the program has and the page does not list, or the other way round; and a
#     --flag written anywhere in README.md or docs/*.md that no command has (other programs'
#     flags, mpirun's and ctest's, are listed below).
# Prints one line per breach and exits 1 when there is one.
# usage: docs_flags.sh PPTRAIN SOURCE_DIR
set -u
bin=$1 src=$2
commands=(console train check plan history watch export sample tokenize)
breaches=0
breach() { echo "docs_flags: $*"; breaches=$((breaches + 1)); }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Flags another program takes, named where the docs show how to run it beside pptrain.
others=(--allow-run-as-root --oversubscribe --hostfile --mca --stdin --output-on-failure --lib --rows --preset
        --reps    # bench/bench_sample.c
        --tool --clock-control --metrics)   # compute-sanitizer and ncu (docs/gpu.md)

# help_flags COMMAND: the sorted flags the program gives for COMMAND.
help_flags() {
  "$bin" "$1" --help > "$work/help.$1" 2>&1 || { breach "pptrain $1 --help exited non-zero"; return; }
  {
    grep -oE '^[[:space:]]*--[a-z0-9][a-z0-9-]*' "$work/help.$1" | tr -d ' \t'
    grep -m1 '^usage:' "$work/help.$1" | grep -oE '\[--[a-z0-9][a-z0-9-]*' | tr -d '['
  } | sort -u
}

# doc_flags COMMAND: the sorted flags docs/usage.md lists in COMMAND's section.
doc_flags() {
  awk -v cmd="$1" '
    /^## / { insec = ($0 == "## `pptrain " cmd "`"); next }
    !insec { next }
    /^```/ { fenced = !fenced; next }
    fenced && /^[[:space:]]*and every run option of pptrain train[[:space:]]*$/ { print "@train"; next }
    fenced && match($0, /^[[:space:]]*--[a-z0-9][a-z0-9-]*/) { f = substr($0, RSTART, RLENGTH); gsub(/[[:space:]]/, "", f); print f }
    fenced && /^usage:/ { u = $0; while (match(u, /\[--[a-z0-9][a-z0-9-]*/)) { print "usage:" substr(u, RSTART + 1, RLENGTH - 1); u = substr(u, RSTART + RLENGTH) } }
  ' "$src/docs/usage.md" | sort -u > "$work/doc.$1"
  # The run options of train's section: its flag lines, not its usage line's own (--tui).
  if grep -qx '@train' "$work/doc.$1"; then
    { grep -vx '@train' "$work/doc.$1"; grep -v '^usage:' "$work/doc.train"; } | sed 's/^usage://' | sort -u
  else
    sed 's/^usage://' "$work/doc.$1" | sort -u
  fi
}

[ -f "$src/docs/usage.md" ] || { echo "docs_flags: $src/docs/usage.md is missing"; exit 1; }
# train first: console's section adds its flags.
for c in train "${commands[@]}"; do
  [ -f "$work/prog.$c" ] && continue
  help_flags "$c" > "$work/prog.$c"
  doc_flags "$c" > "$work/docs.$c"
  grep -q "^## \`pptrain $c\`\$" "$src/docs/usage.md" || breach "docs/usage.md has no section '## \`pptrain $c\`'"
  while read -r f; do breach "pptrain $c takes $f, which docs/usage.md does not list under \`pptrain $c\`"; done \
    < <(comm -23 "$work/prog.$c" "$work/docs.$c")
  while read -r f; do breach "docs/usage.md lists $f under \`pptrain $c\`, which pptrain $c does not take"; done \
    < <(comm -13 "$work/prog.$c" "$work/docs.$c")
done
# pptrain's own (pptrain --help names --version and --help).
"$bin" --help 2>&1 | grep -oE -- '--[a-z][a-z0-9-]*' > "$work/global"
cat "$work"/prog.* "$work/global" | sort -u > "$work/all"
[ -s "$work/all" ] || breach "no flags read from $bin"

# Every row of an option table in the console's source shows in some command's help.
grep -rhoE '^[[:space:]]*\{"--[a-z0-9][a-z0-9-]*"' "$src/console" --include='*.c' | grep -oE -- '--[a-z0-9-]+' | sort -u |
  comm -23 - "$work/all" | while read -r f; do echo "$f"; done > "$work/hidden"
while read -r f; do breach "$f is in an option table of console/ but in no command's --help"; done < "$work/hidden"

# Every --flag the docs write, in prose or code, is some command's or another program's.
printf '%s\n' "${others[@]}" | sort -u > "$work/others"
sort -u "$work/all" "$work/others" > "$work/known"
for doc in "$src/README.md" "$src"/docs/*.md; do
  grep -oE '(^|[^A-Za-z0-9_-])--[a-z][a-z0-9-]*[a-z0-9]' "$doc" | sed -E 's/^[^-]*//' | sort -u | comm -23 - "$work/known" |
    while read -r f; do echo "docs_flags: ${doc#"$src"/} names $f, which no command takes"; done
done > "$work/unknown"
while read -r l; do breach "${l#docs_flags: }"; done < "$work/unknown"

echo "docs_flags: $breaches breaches ($(wc -l < "$work/all") flags over ${#commands[@]} commands)"
[ "$breaches" -eq 0 ]
