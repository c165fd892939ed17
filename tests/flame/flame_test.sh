#!/bin/sh
# A flame graph read by the real consumers: xmllint parses it, rsvg-convert
# renders it to a PNG of its size with nothing on stderr; nothing in it
# refers to anything outside it, odd names read back escaped, and the
# stacks too small to draw leave it small.
# usage: flame_test.sh FLAME_SAMPLE
set -eu
sample=$(realpath "$1")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../svg_check.sh"
svg_tools flame_test

svg=$tmp/flame.svg
"$sample" "$svg" 2>"$tmp/sample.err" || fail "flame_sample failed"
[ ! -s "$tmp/sample.err" ] || fail "flame_sample said: $(cat "$tmp/sample.err")"

# The document's size, and a PNG of that size.
attr() {
  xmllint --xpath "string(/*[local-name()='svg']/@$1)" "$svg"
}
check_svg "$svg" "the flame graph"
[ "$fails" -eq 0 ] || exit 1
width=$(attr width)
height=$(attr height)
size=$(png_size "$svg.png")
[ "$size" = "$width $height" ] || fail "a PNG of $size, not $width $height"
[ "$width" = 1200 ] || fail "the default width is $width, not 1200"

# A frame's tooltip, read back: its name first, its figures after.
titles="//*[local-name()='g']/*[local-name()='title']"
tip=$(xmllint --xpath "string($titles[starts-with(., '@cache.lua:7')])" "$svg")
case $tip in
"@cache.lua:7
live ~12.0 MiB ("*"%) in ~12288 blocks
allocated ~36.0 MiB ("*"%) in ~49152 allocations
estimated from sampled stacks") ;;
*) fail "the tooltip of @cache.lua:7 is '$tip'" ;;
esac
# Odd names: markup and quotes escaped, bytes not UTF-8 as U+FFFD.
odd=$(xmllint --xpath "string($titles[starts-with(., '=<odd>')])" "$svg" |
  head -1)
[ "$odd" = "=<odd> & \"name\" 'q'" ] || fail "the odd name reads '$odd'"
bad=$(xmllint --xpath "string($titles[starts-with(., 'bad ')])" "$svg" |
  head -1)
[ "$bad" = "$(printf 'bad \357\277\275\357\277\275 byte')" ] ||
  fail "the name with bytes not UTF-8 reads '$bad'"
# The root frame, and 50000 stacks too small to draw left out.
[ "$(xmllint --xpath "count($titles[starts-with(., 'all')])" "$svg")" = 1 ] ||
  fail "no root frame"
! grep -q 'tiny\.lua' "$svg" || fail "frames under 0.1 px drawn"
bytes=$(wc -c <"$svg")
[ "$bytes" -lt 32768 ] || fail "the graph is $bytes bytes"

[ "$fails" -eq 0 ] || exit 1
echo "flame: a flame graph parsed and rendered"
