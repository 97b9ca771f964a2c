#!/usr/bin/env bash
# tests/lint/docs_links.sh: the links of README.md and docs/*.md resolve, inside the repository.
#   Every Markdown link [text](target) outside fenced blocks: a web address is left alone; any
#   other target is a path relative to its page that must exist in the tree and stay inside it
#   (no absolute path, no ../ out of the repository), and its #anchor, when it has one, must be
#   a heading of the page it names, spelled as GitHub spells heading anchors (lower case,
#   punctuation dropped, spaces to hyphens, -1, -2 ... for repeats).
#   Every ../ path written anywhere in those pages (a link or not) stays inside the repository.
# Prints one line per breach and exits 1 when there is one.
# usage: docs_links.sh SOURCE_DIR
set -u
src=$(cd "$1" && pwd) || exit 2
breaches=0
breach() { echo "docs_links: $*"; breaches=$((breaches + 1)); }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# anchors PAGE: the anchors of PAGE's headings, one a line.
anchors() {
  awk '/^```/ { fenced = !fenced; next } !fenced && /^#+ / { sub(/^#+ +/, ""); print }' "$1" |
    tr '[:upper:]' '[:lower:]' | sed -E 's/[^a-z0-9 _-]//g; s/ /-/g' |
    awk '{ n = seen[$0]++; print (n ? $0 "-" n : $0) }'
}

# links PAGE: "LINE TARGET" for every Markdown link outside fenced blocks.
links() {
  awk '/^```/ { fenced = !fenced; next }
       !fenced { s = $0; while (match(s, /\]\([^) ]+\)/)) { print NR " " substr(s, RSTART + 2, RLENGTH - 3); s = substr(s, RSTART + RLENGTH) } }' "$1"
}

inside() {   # inside PATH: PATH, made absolute and normal, lies in the repository
  local p
  p=$(realpath -m "$1")
  case $p in "$src" | "$src"/*) return 0 ;; esac
  return 1
}

pages=("$src/README.md" "$src"/docs/*.md)
for page in "${pages[@]}"; do
  rel=${page#"$src"/}
  dir=$(dirname "$page")
  while read -r line target; do
    case $target in http://* | https://* | mailto:*) continue ;; esac
    path=${target%%#*}
    anchor=""
    case $target in *'#'*) anchor=${target#*#} ;; esac
    case $path in /*) breach "$rel:$line: $target is an absolute path, outside the repository"; continue ;; esac
    file=$page
    if [ -n "$path" ]; then
      file=$dir/$path
      inside "$file" || { breach "$rel:$line: $target leaves the repository"; continue; }
      [ -e "$file" ] || { breach "$rel:$line: $target does not exist"; continue; }
    fi
    if [ -n "$anchor" ]; then
      case $file in *.md) ;; *) continue ;; esac
      anchors "$file" > "$work/anchors"
      grep -qxF -- "$anchor" "$work/anchors" || breach "$rel:$line: $target: no heading of ${file#"$src"/} has the anchor #$anchor"
    fi
  done < <(links "$page")
  # ../ paths in prose and code too: none may leave the repository.
  grep -noE '(\.\./)+[A-Za-z0-9_.-][A-Za-z0-9_./-]*' "$page" | while IFS=: read -r line ref; do
    inside "$dir/$ref" || echo "$rel:$line: $ref points outside the repository"
  done > "$work/up"
  while read -r l; do breach "$l"; done < "$work/up"
done

echo "docs_links: $breaches breaches (${#pages[@]} pages)"
[ "$breaches" -eq 0 ]
