#!/usr/bin/env bash
# The demo: a local control plane, the CRDs, the sample queues and policies, demo nodes and
# pods, the operator running as its ServiceAccount, `kubectl get skq`, one change, and the
# table again. Everything it starts is stopped when it exits (Ctrl-C included).
# DEMO_KEEP=1 leaves the control plane running (stop it with `e2e/local-cluster down`).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
source scripts/demo-lib.sh

step "Starting a local control plane (etcd + kube-apiserver on 127.0.0.1)"
eval "$("$VENV/bin/python" e2e/local-cluster up)"
kubectl version 2>/dev/null | sed 's/^/   /'

step "Installing the CRDs and the operator's namespace and RBAC"
kubectl apply -f crds/
scripts/wait-crds-established.sh
kubectl apply -k manifests/

step "Applying the samples (queues, a SchedulerPolicy, a NodeQosEnsurancePolicy)"
kubectl apply -f manifests/samples/

step "Demo nodes and pods (no kubelet here: nodes are objects, pods are created bound)"
kubectl apply -f examples/demo-workload.yaml

LOG=$(mktemp -t sharekeeper-demo-XXXX.log)
step "Starting the operator as its ServiceAccount (RBAC from manifests/), log in $LOG"
start_operator "$LOG"
# Wait until every queue names its policy in status: the shares are published then.
QUEUES=$(kubectl get skq -o name | wc -l)
for _ in $(seq 150); do
    GOVERNED=$(kubectl get skq -o jsonpath='{.items[*].status.policy}' | wc -w)
    [[ "$GOVERNED" -ge "$QUEUES" ]] && break
    sleep 0.2
done

step "kubectl get skq"
kubectl get skq
step "kubectl get schedulerpolicies,nodeqosensurancepolicies"
kubectl get schedulerpolicies,nodeqosensurancepolicies
echo "(The QoS policy is not Ready: this control plane has no metrics-server, so node usage is"
echo " unknown and nothing is acted on; see docs/qos.md.)"

step "Node annotations on gpu-1: overcommit, and CPU/memory kept idle for its idle GPUs"
kubectl get node gpu-1 -o json | "$VENV/bin/python" -c '
import json, sys
for key, value in sorted(json.load(sys.stdin)["metadata"]["annotations"].items()):
    if key.startswith("sharekeeper.io/"):
        print(f"  {key}: {value}")'

step "One change: research's weight 2 -> 8"
kubectl patch skq research --type=merge -p '{"spec":{"weight":8}}'
sleep 2
kubectl get skq

if [[ "${DEMO_KEEP:-0}" == 1 ]]; then
    printf '\nThe control plane keeps running. Use it with:\n  eval "$(e2e/local-cluster up)"\nStop it with:\n  e2e/local-cluster down\n'
fi
