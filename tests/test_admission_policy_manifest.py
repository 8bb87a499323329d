"""Static checks of ``manifests/admission-policies.yaml`` against the code it guards: the names
the policies compare are the ones the webhook and the operator use, every refusal has a message,
and kustomize installs the file. What each policy refuses on a real API server is in
``e2e/test_admission_policies.py``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from sharekeeper.model.pods import (
    ADMISSION_GATE,
    ADMITTED_ANNOTATION,
    GROUP_ANNOTATION,
    QUEUE_LABEL,
    VOLCANO_QUEUE_ANNOTATION,
)

MANIFESTS = Path(__file__).resolve().parent.parent / "manifests"
DOCUMENTS = list(yaml.safe_load_all((MANIFESTS / "admission-policies.yaml").read_text()))
POLICIES = {d["metadata"]["name"]: d for d in DOCUMENTS if d["kind"] == "ValidatingAdmissionPolicy"}
BINDINGS = [d for d in DOCUMENTS if d["kind"] == "ValidatingAdmissionPolicyBinding"]


def expressions(policy: dict[str, Any]) -> str:
    spec = policy["spec"]
    parts = [c["expression"] for c in spec.get("matchConditions", [])]
    parts += [v["expression"] for v in spec.get("variables", [])]
    parts += [v["expression"] for v in spec["validations"]]
    return "\n".join(parts)


def operator_account() -> str:
    account = yaml.safe_load((MANIFESTS / "serviceaccount.yaml").read_text())["metadata"]
    return f"system:serviceaccount:{account['namespace']}:{account['name']}"


def test_kustomize_installs_the_policies_each_with_a_denying_binding() -> None:
    kustomization = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())
    assert "admission-policies.yaml" in kustomization["resources"]
    assert sorted(b["spec"]["policyName"] for b in BINDINGS) == sorted(POLICIES)
    assert all(b["spec"]["validationActions"] == ["Deny"] for b in BINDINGS)


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_each_policy_fails_closed_matches_only_pods_and_says_what_to_do(name: str) -> None:
    spec = POLICIES[name]["spec"]
    assert spec["failurePolicy"] == "Fail"
    for rule in spec["matchConstraints"]["resourceRules"]:
        # Never a subresource: pods/resize (throttling) and pods/eviction must go by.
        assert (rule["apiGroups"], rule["resources"]) == ([""], ["pods"])
    for validation in spec["validations"]:
        assert validation["message"].strip(), validation
        assert validation["reason"] == "Forbidden"


def test_the_policies_use_the_names_the_code_uses() -> None:
    every = "\n".join(expressions(policy) for policy in POLICIES.values())
    for name in (ADMISSION_GATE, ADMITTED_ANNOTATION):
        assert f"'{name}'" in every, name
    for name in ("sharekeeper-admission-at-creation", "sharekeeper-queue-immutable"):
        text = expressions(POLICIES[name])
        for key in (QUEUE_LABEL, VOLCANO_QUEUE_ANNOTATION, GROUP_ANNOTATION):
            assert f"'{key}'" in text, (name, key)
    updates = expressions(POLICIES["sharekeeper-pod-updates"])
    assert f"'{operator_account()}'" in updates
    assert "'sharekeeper:releasers'" in updates


def test_opted_in_is_the_webhooks_namespace_selector() -> None:
    webhooks = list(yaml.safe_load_all((MANIFESTS / "webhook.yaml").read_text()))
    config = next(d for d in webhooks if d["kind"] == "MutatingWebhookConfiguration")
    selector = config["webhooks"][0]["namespaceSelector"]
    for name in ("sharekeeper-admission-at-creation", "sharekeeper-queue-immutable"):
        assert POLICIES[name]["spec"]["matchConstraints"]["namespaceSelector"] == selector
    ((key, value),) = selector["matchLabels"].items()
    assert f"[?'{key}'].orValue('') == '{value}'" in expressions(
        POLICIES["sharekeeper-gate-opt-in"]
    )


def test_an_update_of_a_pod_outside_admission_is_matched_by_one_policy() -> None:
    """Each policy that matches a pod update costs the API server a conversion of the old and
    the new pod, on every update of every pod of the cluster (benchmarks/README.md,
    bench_policies.py): outside namespaces that opted in, one policy at most."""

    def updates(constraints: dict[str, Any]) -> bool:
        return any("UPDATE" in rule["operations"] for rule in constraints["resourceRules"])

    everywhere = [
        name
        for name, policy in POLICIES.items()
        if updates(constraints := policy["spec"]["matchConstraints"])
        and "namespaceSelector" not in constraints
    ]
    assert everywhere == ["sharekeeper-pod-updates"]
