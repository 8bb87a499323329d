#!/usr/bin/env bash
# Every CRD of the current kubectl context Established, asked again for up to a minute in all:
# `kubectl wait` fails at once on a CRD whose status has no conditions yet (one just created).
# On giving up, the last answer's error is shown and the exit status is kubectl's.
set -uo pipefail
deadline=$((SECONDS + 60))
until kubectl wait --for=condition=Established --timeout=10s crd --all >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
        exec kubectl wait --for=condition=Established --timeout=1s crd --all >/dev/null
    fi
    sleep 1
done
