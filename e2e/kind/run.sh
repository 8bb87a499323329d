#!/usr/bin/env bash
# Run the e2e suite on a kind cluster (needs Docker, kind and kubectl on PATH):
#
#   e2e/kind/run.sh up      create the cluster, build and load the image, deploy
#   e2e/kind/run.sh test    run the e2e suite against it (E2E_TARGET=kind)
#   e2e/kind/run.sh down    delete the cluster
#   e2e/kind/run.sh         all three, deleting the cluster even when tests fail
set -euo pipefail
cd "$(dirname "$0")/../.."

CLUSTER=${KIND_CLUSTER:-sharekeeper-e2e}
IMAGE=${IMAGE:-sharekeeper:dev}
KIND_NODE_IMAGE=${KIND_NODE_IMAGE:-kindest/node:v1.34.0}  # >= 1.33 for pods/resize
VENV=${VENV:-.venv}

up() {
    if ! kind get clusters | grep -qx "$CLUSTER"; then
        kind create cluster --name "$CLUSTER" --image "$KIND_NODE_IMAGE" \
            --config e2e/kind/kind-config.yaml --wait 5m
    fi
    kubectl config use-context "kind-$CLUSTER"
    docker build -t "$IMAGE" .
    kind load docker-image "$IMAGE" --name "$CLUSTER"
    kubectl apply -f crds/
    scripts/wait-crds-established.sh
    kubectl apply -k manifests/
    kubectl -n sharekeeper rollout status deployment/sharekeeper --timeout=180s
}

test_suite() {
    make venv VENV="$VENV"
    KUBECONFIG=${KUBECONFIG:-$HOME/.kube/config} E2E_TARGET=kind "$VENV/bin/pytest" e2e
}

down() {
    kind delete cluster --name "$CLUSTER"
}

case "${1:-all}" in
    up) up ;;
    test) test_suite ;;
    down) down ;;
    all) trap down EXIT; up; test_suite ;;
    *) echo "usage: $0 [up|test|down|all]" >&2; exit 2 ;;
esac
