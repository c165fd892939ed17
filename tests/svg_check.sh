# The checks the SVG tests share, sourced by them: each counts failures in
# $fails (fail), needs xmllint and rsvg-convert (svg_tools), and checks
# that a document parses, fetches or runs nothing, and renders silently to
# a PNG of the size it says (check_svg).  Sets fails=0; wants $tmp.

fails=0

fail() {
  echo "FAIL: $*" >&2
  fails=$((fails + 1))
}

# Stops test $1 unless both consumers are installed.
svg_tools() {
  for tool in xmllint rsvg-convert; do
    command -v $tool >/dev/null ||
      { echo "$1: $tool is missing" >&2; exit 1; }
  done
}

# "WIDTH HEIGHT" from a PNG's header (its IHDR chunk comes first).
png_size() {
  od -An -tu1 -j16 -N8 "$1" |
    awk '{ print $1 * 16777216 + $2 * 65536 + $3 * 256 + $4,
                 $5 * 16777216 + $6 * 65536 + $7 * 256 + $8 }'
}

# Document $1 (what: $2): well-formed XML, nothing it would fetch or run,
# rendered to $1.png without a word from the renderer; of $3 x $4 pixels
# when those are given.
check_svg() {
  if ! xmllint --noout "$1" 2>"$tmp/xmllint.err"; then
    fail "$2: not well-formed XML: $(head -3 "$tmp/xmllint.err")"
    return 0
  fi
  ! grep -Eq '<script|href|url\(|@import|<image|<foreignObject' "$1" ||
    fail "$2: the document refers to something outside it"
  rsvg-convert "$1" -o "$1.png" 2>"$tmp/rsvg.err" ||
    fail "$2: rsvg-convert failed"
  [ ! -s "$tmp/rsvg.err" ] ||
    fail "$2: rsvg-convert said: $(head -3 "$tmp/rsvg.err")"
  [ "$(od -An -c -j12 -N4 "$1.png" | tr -d ' ')" = IHDR ] ||
    fail "$2: rsvg-convert wrote no PNG"
  if [ $# -ge 4 ]; then
    size=$(png_size "$1.png")
    [ "$size" = "$3 $4" ] || fail "$2: a PNG of $size, not $3 $4"
  fi
}
