# Shared by the demos (sourced): the clean-up on exit, the step banner, and the operator run
# as its ServiceAccount. Needs VENV; the control plane is the one `e2e/local-cluster` keeps in
# $SHAREKEEPER_LOCAL_CLUSTER_DIR (or its default).

OPERATOR_PID=
cleanup() {
    if [[ -n "$OPERATOR_PID" ]]; then
        kill "$OPERATOR_PID" 2>/dev/null && wait "$OPERATOR_PID" 2>/dev/null || true
    fi
    if [[ "${DEMO_KEEP:-0}" != 1 ]]; then
        "$VENV/bin/python" e2e/local-cluster down
    fi
}
trap cleanup EXIT

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

# start_operator LOG [ARG...]: `sharekeeper run ARG...` in the background, as the operator's
# ServiceAccount (a token the API server issues, so RBAC from manifests/ applies), logging to LOG.
start_operator() {
    local log=$1 token kubeconfig
    shift
    token=$(kubectl create token sharekeeper -n sharekeeper --duration=1h)
    kubeconfig=$(mktemp -t sharekeeper-demo-kubeconfig-XXXX)
    kubectl config view --raw --minify --flatten | sed "s/token: .*/token: $token/" > "$kubeconfig"
    KUBECONFIG=$kubeconfig "$VENV/bin/sharekeeper" run --liveness-port=0 --metrics-port=0 "$@" \
        >"$log" 2>&1 &
    OPERATOR_PID=$!
}

# install_sharekeeper: the CRDs, then the operator's RBAC and webhook configuration from
# manifests/, its Deployment at 0 replicas: the demos run the operator as a process, and its
# replicas would only take node room.
install_sharekeeper() {
    kubectl apply -f crds/ >/dev/null
    scripts/wait-crds-established.sh
    kubectl apply -k manifests/ >/dev/null
    kubectl scale deployment/sharekeeper -n sharekeeper --replicas=0 >/dev/null
}
