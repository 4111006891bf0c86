#!/usr/bin/env bash
# System packages for the report track (run as root by scripts/test.sh): METEOR runs pycocoevalcap's
# bundled meteor-1.5.jar, which needs a Java runtime. Nothing to do where `java` is already on PATH.
set -euo pipefail
if command -v java >/dev/null 2>&1; then
  echo "report_gen: java present ($(java -version 2>&1 | head -1))"
  exit 0
fi
echo "report_gen: installing a headless JRE for METEOR"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends default-jre-headless
java -version
