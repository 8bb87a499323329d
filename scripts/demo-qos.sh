#!/usr/bin/env bash
# Node QoS on a real node: the control plane plus one real node, 127.0.0.1 (containerd, runc,
# the kubelet and metrics-server, see e2e/realnode.py). Two busybox pods burn real CPU above
# the policy's waterline; the operator throttles the low-priority one through pods/resize until
# metrics-server shows the node under it again. Needs root (the kubelet) and Debian's
# containerd, runc and CNI plugins (`make node-packages`, which `make demo-qos` runs).
# Everything it starts is stopped and the host put back when it exits; DEMO_KEEP=1 leaves the
# cluster and the node running.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
export SHAREKEEPER_LOCAL_CLUSTER_DIR=${SHAREKEEPER_LOCAL_CLUSTER_DIR:-${TMPDIR:-/tmp}/sharekeeper-demo-qos-$UID}
source scripts/demo-lib.sh

step "Starting the control plane and a real node (containerd, kubelet, metrics-server)"
eval "$("$VENV/bin/python" e2e/local-cluster up --node)"

step "CRDs and the operator's RBAC; the operator runs below as a process"
install_sharekeeper
LOG=$(mktemp -t sharekeeper-demo-qos-XXXX.log)
start_operator "$LOG"

step "A policy with a 1.1-core waterline, and two pods burning 0.7 cores each (examples/qos-real-node.yaml)"
kubectl apply -f examples/qos-real-node.yaml
kubectl wait --for=condition=Ready --timeout=60s -n burners pod/high pod/low >/dev/null

usage() {
    kubectl get --raw /apis/metrics.k8s.io/v1beta1/nodes/127.0.0.1 2>/dev/null \
        | "$VENV/bin/python" -c 'import json,sys; u=json.load(sys.stdin)["usage"]["cpu"]; print(f"{int(u[:-1])/1e9:.2f}" if u.endswith("n") else u)' \
        || echo "?"
}
# show USAGE: the node's usage as read, the pods', low's limit and the taint.
show() {
    printf '\n%s  node 127.0.0.1 uses %s cores (metrics-server), waterline 1.1\n' "$(date +%T)" "$1"
    kubectl top pod -n burners 2>/dev/null | sed 's/^/  /' || true
    kubectl get pods -n burners -o custom-columns='POD:.metadata.name,CPU-LIMIT:.spec.containers[0].resources.limits.cpu' | sed 's/^/  /'
    kubectl get node 127.0.0.1 \
        -o jsonpath='  interference taint: {.spec.taints[?(@.key=="sharekeeper.io/interference")].effect}{"\n"}'
}

step "Every 15 s for up to 4 minutes: the node's usage, the pods', low's CPU limit"
for _ in $(seq 16); do
    node=$(usage)
    show "$node"
    under=$("$VENV/bin/python" -c "import sys; print(1 if sys.argv[1] != '?' and float(sys.argv[1]) < 1.1 else 0)" "$node")
    limit=$(kubectl get pod low -n burners -o jsonpath='{.spec.containers[0].resources.limits.cpu}')
    [[ "$under" == 1 && "$limit" != 700m ]] && break
    sleep 15
done

step "What the operator recorded: the policy's status for the node, and the Events"
kubectl get nodeqosensurancepolicy real-node-cpu -o jsonpath='{range .status.nodes[*]}{.name}: throttled {.throttled}{"\n"}{end}'
kubectl get events -n burners --field-selector involvedObject.name=low \
    -o custom-columns=REASON:.reason,COUNT:.count,MESSAGE:.message --no-headers

if [[ "${DEMO_KEEP:-0}" == 1 ]]; then
    printf '\nThe cluster and the node keep running (KUBECONFIG as above). Stop them with:\n  SHAREKEEPER_LOCAL_CLUSTER_DIR=%s e2e/local-cluster down\n' "$SHAREKEEPER_LOCAL_CLUSTER_DIR"
fi
