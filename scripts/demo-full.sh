#!/usr/bin/env bash
# The admission demo on a whole cluster in a box: etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler and kwok (fake nodes that run what is bound to them). Three queues submit Jobs
# asking for three times the cluster; the webhook gates their pods, the operator lets them
# through in deserved proportions, the scheduler binds them, kwok runs them for 6 s each.
# Everything it starts is stopped when it exits; DEMO_KEEP=1 leaves the cluster running.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
export SHAREKEEPER_LOCAL_CLUSTER_DIR=${SHAREKEEPER_LOCAL_CLUSTER_DIR:-${TMPDIR:-/tmp}/sharekeeper-demo-full-$UID}
source scripts/demo-lib.sh

step "Starting a whole cluster in a box (etcd, apiserver, controller-manager, scheduler, kwok)"
eval "$("$VENV/bin/python" e2e/local-cluster up --full)"

step "CRDs, the operator's RBAC and webhook configuration, two 4-cpu kwok nodes, three queues"
install_sharekeeper
kubectl apply -f examples/admission-demo.yaml
kubectl wait --for=condition=Ready --timeout=60s node/kwok-1 node/kwok-2 >/dev/null

LOG=$(mktemp -t sharekeeper-demo-full-XXXX.log)
step "The operator, serving the admission webhook on 127.0.0.1 (log in $LOG)"
PORT=$("$VENV/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
start_operator "$LOG" --webhook-bind-address="127.0.0.1:$PORT" --webhook-url="https://127.0.0.1:$PORT"
for _ in $(seq 150); do
    kubectl get mutatingwebhookconfiguration sharekeeper-admission \
        -o jsonpath='{.webhooks[0].clientConfig.url}' 2>/dev/null | grep -q "$PORT" && break
    sleep 0.2
done
# Until the API server calls that URL, the batch namespace's pods would be refused (the
# webhook did not gate them: docs/admission.md, fail closed): wait for a dry run to be gated.
PROBE='{"apiVersion":"v1","kind":"Pod","metadata":{"name":"probe","labels":{"sharekeeper.io/queue":"analytics"}},"spec":{"containers":[{"name":"main","image":"example/probe:1"}]}}'
for _ in $(seq 150); do
    echo "$PROBE" | kubectl create --dry-run=server -n batch -f - \
        -o jsonpath='{.spec.schedulingGates[*].name}' 2>/dev/null \
        | grep -q sharekeeper.io/admission && break
    sleep 0.2
done

step "Three Jobs of 8 one-cpu pods each: 24 cpu asked of 8"
kubectl apply -f examples/admission-demo-jobs.yaml

show() {
    kubectl get skq analytics training serving
    kubectl get pods -n batch --no-headers \
        -o custom-columns='Q:.metadata.labels.sharekeeper\.io/queue,GATES:.spec.schedulingGates[*].name,PHASE:.status.phase,NODE:.spec.nodeName' \
        | awk '{state = ($2 != "<none>") ? "gated" : $3; n[$1" "state]++}
               END {for (k in n) print "  " k ": " n[k]}' | sort
}
sleep 4
step "Queues, and their pods: held by the gate, or let through and running on kwok nodes"
show
kubectl get events -n batch --field-selector reason=AdmissionWaiting -o custom-columns=POD:.involvedObject.name,WHY:.message --no-headers | head -3

step "One change: serving's weight 1 -> 5 (nothing is preempted; its share grows as pods end)"
kubectl patch skq serving --type=merge -p '{"spec":{"weight":5}}' >/dev/null
sleep 8
show

if [[ "${DEMO_KEEP:-0}" == 1 ]]; then
    printf '\nThe cluster keeps running (KUBECONFIG as above). Stop it with:\n  SHAREKEEPER_LOCAL_CLUSTER_DIR=%s e2e/local-cluster down\n' "$SHAREKEEPER_LOCAL_CLUSTER_DIR"
fi
