#!/usr/bin/env bash
# tests/lint/docs_selftest.sh: docs_flags.sh and docs_links.sh find each kind of breach they
# exist for, planted in a copy of the docs, and pass the real docs.
#   docs_flags: a flag the page lists that no command takes, a flag a command takes that the
#     page drops, a made-up flag in README's prose.
#   docs_links: a missing page, a missing anchor, a link out of the repository, an absolute
#     path, a ../ path out of the repository in prose.
# usage: docs_selftest.sh PPTRAIN SOURCE_DIR
set -u
bin=$1 src=$2
here=$(dirname "$0")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
fail() { echo "FAIL: $*"; failed=1; }

# The tree the pages link into (every tracked file), as empty stand-ins, made once.
mkdir -p "$work/base/docs"
(cd "$src" && { git ls-files 2>/dev/null || find . -type f; }) | sed 's|^\./||' > "$work/files"
(cd "$work/base" && sed -n 's|/[^/]*$||p' "$work/files" | sort -u | xargs mkdir -p && xargs touch < "$work/files")
copy() {   # a fresh copy of the pages the checks read, in $work/tree, over the stand-ins
  rm -rf "$work/tree"; cp -r "$work/base" "$work/tree"
  cp "$src/README.md" "$work/tree/"; cp "$src"/docs/*.md "$work/tree/docs/"
}
expect() {   # expect CHECK WANT...: CHECK fails on the planted tree and prints every WANT
  local out status
  out=$(bash "$here/$1" "${@:3}" 2>&1); status=$?
  [ $status -eq 1 ] || fail "$1 exited $status on a planted breach: $out"
  grep -qF -- "$2" <<< "$out" || fail "$1 did not report: $2 (it said: $out)"
}

# docs_flags: a bogus flag listed under train, --seed dropped from check, a made-up flag in prose.
copy
sed -i '0,/^  --steps N /s//  --no-such-flag N    made up\n&/' "$work/tree/docs/usage.md"
expect docs_flags.sh "docs/usage.md lists --no-such-flag under \`pptrain train\`, which pptrain train does not take" "$bin" "$work/tree"
copy
awk '/^## `pptrain check`/ { c = 1 } /^## `pptrain plan`/ { c = 0 } !(c && /^  --seed /)' "$src/docs/usage.md" > "$work/tree/docs/usage.md"
expect docs_flags.sh "pptrain check takes --seed, which docs/usage.md does not list under \`pptrain check\`" "$bin" "$work/tree"
copy
echo "Run it with \`--turbo\`." >> "$work/tree/README.md"
expect docs_flags.sh "README.md names --turbo, which no command takes" "$bin" "$work/tree"

# docs_links: each kind of bad link.
for plant in "[gone](no-such-page.md)|README.md:LINE: no-such-page.md does not exist" \
             "[anchor](docs/usage.md#no-such-heading)|no heading of docs/usage.md has the anchor #no-such-heading" \
             "[out](../outside.md)|README.md:LINE: ../outside.md leaves the repository" \
             "[abs](/etc/passwd)|/etc/passwd is an absolute path" \
             "the map is \`../shared/DESIGN.md\`|../shared/DESIGN.md points outside the repository"; do
  copy
  echo "${plant%%|*}" >> "$work/tree/README.md"
  line=$(wc -l < "$work/tree/README.md")
  want=${plant#*|}
  expect docs_links.sh "${want//LINE/$line}" "$work/tree"
done

# The real docs pass both.
bash "$here/docs_flags.sh" "$bin" "$src" > "$work/real" 2>&1 || { fail "docs_flags on the tree itself:"; cat "$work/real"; }
bash "$here/docs_links.sh" "$src" > "$work/real" 2>&1 || { fail "docs_links on the tree itself:"; cat "$work/real"; }
[ $failed -eq 0 ] && echo "docs_selftest: 3 planted flag breaches and 5 planted link breaches found; the docs have none"
exit $failed
