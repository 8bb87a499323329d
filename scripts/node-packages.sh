#!/usr/bin/env bash
# The Debian packages a real node runs on (e2e/realnode.py, `e2e/local-cluster up --node`):
# containerd and runc for the containers, the CNI plugins for their network, and a static busybox
# from which the node's images are built. Installs only the missing ones, with one `apt-get
# update` first; does nothing when all are installed.
#
# --if-root: what `make test` calls. Without root or apt-get, say so and do nothing (the real-node
# e2e tests then skip, naming what is missing) instead of failing.
set -euo pipefail
PACKAGES=(containerd runc containernetworking-plugins busybox-static)

missing=()
for package in "${PACKAGES[@]}"; do
	status=$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null || true)
	[[ $status == "install ok installed" ]] || missing+=("$package")
done
if [[ ${#missing[@]} -eq 0 ]]; then
	echo "node packages: ${PACKAGES[*]} installed"
	exit 0
fi
if [[ ${1:-} == --if-root ]] && { [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; }; then
	echo "node packages: ${missing[*]} missing, not installed (needs root and apt-get);" \
		"the real-node e2e tests will skip"
	exit 0
fi
echo "node packages: installing ${missing[*]}"
apt-get update
apt-get install -y "${missing[@]}"
