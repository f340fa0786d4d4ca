# Sourced by the device scripts (devab.sh, devarms.sh, devprof.sh) after
# they set OUT: $OUT made, BIN the carried .devbin with its gzipped
# binaries unpacked.
mkdir -p "$OUT"
BIN=$(pwd)/.devbin
for f in "$BIN"/*.gz; do [ -f "$f" ] && gunzip -f "$f"; done
chmod +x "$BIN"/* 2>/dev/null
