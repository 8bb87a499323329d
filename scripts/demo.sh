#!/usr/bin/env bash
# The demo: a local control plane, the CRDs, the sample queues and policies, demo nodes and
# pods, and `kubectl get queues`. Everything it starts is stopped when it exits (Ctrl-C included).
# DEMO_KEEP=1 leaves the control plane running (stop it with `e2e/local-cluster down`).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}

cleanup() {
    if [[ "${DEMO_KEEP:-0}" != 1 ]]; then
        "$VENV/bin/python" e2e/local-cluster down
    fi
}
trap cleanup EXIT

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "Starting a local control plane (etcd + kube-apiserver on 127.0.0.1)"
eval "$("$VENV/bin/python" e2e/local-cluster up)"
kubectl version 2>/dev/null | sed 's/^/   /'

step "Installing the CRDs and the operator's namespace and RBAC"
kubectl apply -f crds/
kubectl wait --for=condition=Established --timeout=60s crd --all >/dev/null
kubectl apply -k manifests/

step "Applying the samples (queues, a SchedulerPolicy, a NodeQosEnsurancePolicy)"
kubectl apply -f manifests/samples/

step "Demo nodes and pods (no kubelet here: nodes are objects, pods are created bound)"
kubectl apply -f examples/demo-workload.yaml

step "kubectl get queues"
kubectl get queues
step "kubectl get schedulerpolicies,nodeqosensurancepolicies"
kubectl get schedulerpolicies,nodeqosensurancepolicies

if [[ "${DEMO_KEEP:-0}" == 1 ]]; then
    printf '\nThe control plane keeps running. Use it with:\n  eval "$(e2e/local-cluster up)"\nStop it with:\n  e2e/local-cluster down\n'
fi
