#!/bin/sh
# ljmpctl flame on a real VM's recording with call stacks: xmllint parses
# the graph, rsvg-convert renders it with nothing on stderr, nothing in it
# refers outside it, and the hot line's frames above its two callers are
# as wide as the callers' 300 and 700 allocations; a stream without
# stacks is drawn flat and says so; sampled stacks say they are
# estimates.
# usage: flame_stacks_test.sh LUAJIT LJMPCTL STACKS_LUA
set -eu
luajit=$(realpath "$1")
ljmpctl=$(realpath "$2")
stacks=$(realpath "$3")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../svg_check.sh"
svg_tools flame_stacks_test

# The frames of graph $1 as "X<tab>Y<tab>WIDTH<tab>NAME" lines: each frame
# is a group of its tooltip (whose first line is its name) and its box.
frames() {
  awk 'BEGIN { RS = "<g>"; OFS = "\t" }
    /^<title>/ {
      t = substr($0, 8); e = index(t, "</title>"); n = index(t, "\n")
      name = substr(t, 1, (n > 0 && n < e ? n : e) - 1)
      if (!match($0, /<rect x="[0-9.]*" y="[0-9.]*" width="[0-9.]*"/))
        next
      r = substr($0, RSTART, RLENGTH)
      gsub(/[a-z<="]/, "", r)
      split(r, a, " ")
      print a[1], a[2], a[3], name
    }' "$1"
}

# The width of graph $1's frame named $2 right above its frame named $3
# (the same x, the row above), or nothing.
width_above() {
  frames "$1" | awk -F '\t' -v name="$2" -v parent="$3" '
    $4 == parent { py[$1] = $2 }
    $4 == name { x[NR] = $1; y[NR] = $2; w[NR] = $3 }
    END { for (i in x) if ((x[i] in py) && py[x[i]] - y[i] > 0 &&
                           py[x[i]] - y[i] < 40) print w[i] }'
}

# The name graph $1 gives stacks.lua's line $2.
line_name() {
  frames "$1" | awk -F '\t' -v want="stacks.lua:$2" '
    substr($4, length($4) - length(want) + 1) == want { print $4; exit }'
}

# A recording: line 13 of stacks.lua reached from lines 14 and 15, 300
# and 700 times, with the JIT on.
(cd "$(dirname "$stacks")" && "$luajit" stacks.lua on callers "$tmp/callers.bin") \
  >/dev/null
"$ljmpctl" flame "$tmp/callers.bin" -o "$tmp/alloc.svg" --by alloc ||
  fail "flame FILE --by alloc failed"
check_svg "$tmp/alloc.svg" "by alloc"
hot=$(line_name "$tmp/alloc.svg" 13)
a=$(line_name "$tmp/alloc.svg" 14)
b=$(line_name "$tmp/alloc.svg" 15)
[ -n "$hot" ] && [ -n "$a" ] && [ -n "$b" ] ||
  fail "no frames of stacks.lua:13, 14 and 15: $(frames "$tmp/alloc.svg")"
w14=$(width_above "$tmp/alloc.svg" "$hot" "$a")
w15=$(width_above "$tmp/alloc.svg" "$hot" "$b")
awk -v a="$w14" -v b="$w15" 'BEGIN {
  r = a / (a + b); exit !(a > 0 && b > 0 && r > 0.3 * 0.98 && r < 0.3 * 1.02) }' ||
  fail "the hot line's widths from its callers are '$w14' and '$w15', not 300:700"
grep -q 'widths: bytes allocated; [^<]*callers\.bin; exact' "$tmp/alloc.svg" ||
  fail "the subtitle does not say what the widths are"

# Live bytes (the default), and the title given.
"$ljmpctl" flame "$tmp/callers.bin" -o "$tmp/live.svg" --title "T <&>" \
  --width 800 || fail "flame FILE failed"
check_svg "$tmp/live.svg" "by live"
grep -q 'widths: live bytes' "$tmp/live.svg" || fail "live: no subtitle"
grep -q '<title>T &lt;&amp;&gt;</title>' "$tmp/live.svg" ||
  fail "live: the title given is not the document's"
grep -q 'width="800"' "$tmp/live.svg" || fail "live: --width not taken"

# Sampled stacks: estimates, said in the subtitle and the tooltips.
(cd "$(dirname "$stacks")" && STACKS_SAMPLE=4096 \
  "$luajit" stacks.lua on sampled "$tmp/sampled.bin") >/dev/null
"$ljmpctl" flame "$tmp/sampled.bin" -o "$tmp/sampled.svg" ||
  fail "flame of sampled stacks failed"
check_svg "$tmp/sampled.svg" sampled
grep -q 'estimated from sampled stacks (one per 4096 bytes)' \
  "$tmp/sampled.svg" || fail "sampled: the subtitle says no estimate"

# A stream without stacks: flat, and said so.
"$ljmpctl" report --strip-stacks -o "$tmp/flat.bin" "$tmp/callers.bin"
"$ljmpctl" flame "$tmp/flat.bin" -o "$tmp/flat.svg" || fail "flat failed"
check_svg "$tmp/flat.svg" flat
grep -q 'the stream has no call stacks: one frame per site (attach --stacks' \
  "$tmp/flat.svg" || fail "flat: the subtitle does not say it has no stacks"
[ -z "$(line_name "$tmp/flat.svg" 14)" ] ||
  fail "flat: a caller's frame without stacks"
[ -n "$(line_name "$tmp/flat.svg" 13)" ] || fail "flat: no frame of the site"

# Refused: an unknown --by, no operand; a missing file says so.
if "$ljmpctl" flame "$tmp/callers.bin" --by nope -o "$tmp/x.svg" \
  2>/dev/null; then
  fail "--by nope was taken"
fi
if "$ljmpctl" flame -o "$tmp/x.svg" 2>/dev/null; then
  fail "no operand was taken"
fi
if "$ljmpctl" flame "$tmp/absent.bin" -o "$tmp/x.svg" 2>/dev/null; then
  fail "an absent file was taken"
fi
[ ! -e "$tmp/x.svg" ] || fail "a graph was left by a failed run"

[ "$fails" -eq 0 ] || exit 1
echo "flame: graphs of a recording's call stacks parsed, rendered, measured"
