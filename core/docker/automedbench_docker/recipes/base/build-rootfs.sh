#!/usr/bin/env bash
# Build the base image without any registry: a Debian root filesystem from debootstrap, imported.
# Usage: build-rootfs.sh IMAGE_TAG [SUITE] [MIRROR]   (needs root and debootstrap)
set -euo pipefail
tag=${1:?usage: build-rootfs.sh IMAGE_TAG [SUITE] [MIRROR]}
suite=${2:-bookworm}
mirror=${3:-http://deb.debian.org/debian}
# Python plus the scientific stack the demo tracks' reference solutions and the evaluator use (scikit-image:
# the enhancement SSIM), all from Debian.
# Track images are built with no network (no apt-get there), so what their recipes need is here:
# pywt, pydicom and h5py for the enhancement track's classical stack and stagers.
# default-jre-headless: the report track's METEOR runs pycocoevalcap's meteor-1.5.jar on Java in the evaluator
# (and the evaluator image builds without network too); it adds about 200 MB to the base, shared by every image.
packages=python3,python3-numpy,python3-scipy,python3-nibabel,python3-pil,python3-skimage,python3-pywt,\
python3-pydicom,python3-h5py,procps,default-jre-headless
root=$(mktemp -d /var/tmp/automedbench-rootfs.XXXXXX)
trap 'rm -rf "$root"' EXIT
debootstrap --variant=minbase --include="$packages" "$suite" "$root" "$mirror" >"$root.log" 2>&1 \
  || { tail -20 "$root.log" >&2; exit 1; }
rm -f "$root.log"
# What a container never needs: downloaded .debs, package lists, docs, manuals, translations.
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* \
       "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/locale/*
tar -C "$root" -c . | docker import \
  --change 'ENV LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD ["python3"]' ${AUTOMEDBENCH_RECIPE:+--change "LABEL org.automedbench.recipe=$AUTOMEDBENCH_RECIPE"} \
  - "$tag" >/dev/null
echo "built $tag"
