"""Whatever a file holds, ``sharekeeper simulate`` and ``sharekeeper convert`` exit 0 with a
result or 2 with one line on stderr: never a traceback, never a crash, never a silent 0 for what
the API server (or Volcano) would refuse, and never gigabytes for a kilobyte of YAML."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import node, pod, pod_group, policy, queue
from sharekeeper.api.base import read
from sharekeeper.api.policy import SchedulerPolicy
from sharekeeper.cli import main
from sharekeeper.model import documents
from sharekeeper.model.documents import DocumentError, parse_documents
from sharekeeper.model.objects import MutableObj

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
NOW = "1795000000"
param = pytest.param


def run(*argv: str) -> tuple[int, str, str]:
    """``main(argv)``: exit code, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def assert_refused(command: str, code: int, out: str, err: str) -> None:
    """Exit 2, nothing on stdout, one line on stderr."""
    assert (code, out) == (2, ""), err
    assert err.count("\n") == 1, err
    assert err.startswith(f"sharekeeper {command}: "), err


def simulate_refusal(path: Path) -> str:
    """The line ``sharekeeper simulate -f PATH`` refuses the file with."""
    code, out, err = run("simulate", "-f", str(path), "-o", "json", "--now", NOW)
    assert_refused("simulate", code, out, err)
    return err


def write(tmp_path: Path, content: bytes | str) -> Path:
    path = tmp_path / "input.yaml"
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return path


def dump(*objects: Any) -> str:
    return yaml.safe_dump_all(objects)


def node_with(**fields: Any) -> MutableObj:
    return {**node("n1", cpu=4), **fields}


def pod_with(**spec: Any) -> MutableObj:
    made = pod("p", "a", node="n1", cpu=1)
    made["spec"].update(spec)
    return made


# --- files that are not text, or nest without end ------------------------------------------------


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        param(
            b"\x7fELF\x02\x01\x01\x00\x00\x00",
            "is binary, not UTF-8 text (it contains NUL bytes)",
            id="binary",
        ),
        param(
            "metadata: {name: caf\xe9}".encode("latin-1"),
            "is not UTF-8 text (byte 0xe9 at offset 20)",
            id="latin-1",
        ),
        param("kind: Node\n".encode("utf-16"), "is binary, not UTF-8 text", id="utf-16"),
        param(b"[" * 10_000 + b"]" * 10_000, "line 1: nests deeper than 64 levels", id="deep-list"),
        param(
            b"a: " + b"{a: " * 5_000 + b"1" + b"}" * 5_000,
            "line 1: nests deeper than 64 levels",
            id="deep-map",
        ),
        param(b'{"a": ' * 70 + b"1" + b"}" * 70, "nests deeper than 64 levels", id="deep-json"),
        param(
            b'{"a": ' * 5_000 + b"1" + b"}" * 5_000, "nests deeper than 64 levels", id="deeper-json"
        ),
        # The library's own words about what it found may follow ours; they are not asserted.
        param(
            b"kind: Node\n  metadata: x\n", "line 2, column 11: invalid YAML: ", id="yaml-syntax"
        ),
        param(
            b"a: b\nc: \x01",
            "line 2, column 4: character #x0001 is not allowed in YAML",
            id="control-character",
        ),
    ],
)
def test_a_file_that_is_not_documents_is_refused_naming_it(
    tmp_path: Path, content: bytes, fragment: str
) -> None:
    path = write(tmp_path, content)
    assert simulate_refusal(path).startswith(f"sharekeeper simulate: file {path}: {fragment}")


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        param(b' \n{"name": "p"}', [{"name": "p"}], id="ascii"),
        param('{"name": "caf\xe9"}'.encode(), [{"name": "caf\xe9"}], id="utf-8"),
        param(b'\xef\xbb\xbf{"name": "p"}', [{"name": "p"}], id="bom-is-yaml"),
    ],
)
def test_json_is_read_from_its_bytes_as_from_its_text(content: bytes, expected: Any) -> None:
    assert parse_documents(content) == expected


@pytest.mark.parametrize(
    ("content", "message"),
    [
        param(
            '{"name": "caf\xe9"}'.encode("latin-1"),
            "is not UTF-8 text (byte 0xe9 at offset 13)",
            id="latin-1",
        ),
        # Unicode spaces before "{" make it JSON, which they are not: the standard library's word.
        param(
            '\u00a0{"a": 1}'.encode(),
            "Expecting value: line 1 column 1 (char 0)",
            id="no-break-space",
        ),
        param(b'\x1c{"a": 1}', "Expecting value: line 1 column 1 (char 0)", id="separator"),
        # Positions count characters, not bytes (the "}" is byte 15).
        param(
            '{"caf\xe9": [1, 2}'.encode(),
            "Expecting ',' delimiter: line 1 column 15 (char 14)",
            id="position-after-utf-8",
        ),
    ],
)
def test_json_that_cannot_be_read_is_refused_in_the_standard_librarys_words(
    content: bytes, message: str
) -> None:
    with pytest.raises(DocumentError) as refused:
        parse_documents(content)
    assert str(refused.value) == message


def nested_json(levels: int, *, among: int = 0, at: int = 0) -> bytes:
    """A JSON object nesting ``levels`` deep; with ``among``, in a list of that many flat
    objects, at index ``at``."""
    deep = '{"a": ' * (levels - 1) + "[]" + "}" * (levels - 1)
    if not among:
        return deep.encode()
    items = ['{"b": 1}'] * among
    items[at] = deep
    return ('{"items": [' + ", ".join(items) + "]}").encode()


@pytest.mark.parametrize(
    ("among", "at"),
    [param(0, 0, id="alone"), param(5_000, 0, id="first"), param(5_000, 4_321, id="far-in-a-list")],
)
def test_json_is_read_to_64_levels_and_no_deeper(among: int, at: int) -> None:
    outer = 2 if among else 0  # the object and its list of items
    assert parse_documents(nested_json(64 - outer, among=among, at=at))
    with pytest.raises(DocumentError, match=r"^nests deeper than 64 levels$"):
        parse_documents(nested_json(65 - outer, among=among, at=at))


def test_nesting_that_crashed_the_yaml_composer_is_refused_before_it(tmp_path: Path) -> None:
    """libyaml's composer recurses in C: 100,000 ``[`` took the process down with SIGSEGV (in
    a process of its own, so that a regression fails this test and not the test run)."""
    path = write(tmp_path, b"[" * 100_000 + b"]" * 100_000)
    command = [sys.executable, "-m", "sharekeeper.cli", "simulate", "-f", str(path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert_refused("simulate", done.returncode, done.stdout, done.stderr)
    assert "line 1: nests deeper than 64 levels" in done.stderr


class FlowDepthLimitedLoader(documents.LOADER):  # type: ignore[misc,valid-type]
    """A YAML library that refuses a stream nesting deeper than ``LIMIT`` flow levels before its
    first event, in words of its own: what libyaml does at 1,000 levels since PyYAML 6.0.4
    (reading ahead), pinned here whatever version is installed."""

    LIMIT = 100
    WORDS = "nesting beyond what this library reads"

    def __init__(self, stream: bytes | str) -> None:
        text = stream.decode() if isinstance(stream, bytes) else stream
        depth = 0
        for index, char in enumerate(text):
            depth += (char in "[{") - (char in "]}")
            if depth > self.LIMIT:
                mark = yaml.Mark("<byte string>", index, 0, index, None, None)
                raise yaml.scanner.ScannerError(None, None, self.WORDS, mark)
        super().__init__(stream)


@pytest.fixture
def library_with_a_depth_limit(monkeypatch: pytest.MonkeyPatch) -> type[FlowDepthLimitedLoader]:
    monkeypatch.setattr(documents, "LOADER", FlowDepthLimitedLoader)
    return FlowDepthLimitedLoader


def test_nesting_the_library_refuses_first_is_refused_in_our_words(
    library_with_a_depth_limit: type[FlowDepthLimitedLoader],
) -> None:
    with pytest.raises(DocumentError, match=r"^line 1: nests deeper than 64 levels$"):
        parse_documents(b"[" * 1_000 + b"]" * 1_000)


def test_what_the_library_refuses_within_our_budgets_is_invalid_yaml_at_its_place(
    library_with_a_depth_limit: type[FlowDepthLimitedLoader],
) -> None:
    library_with_a_depth_limit.LIMIT = 2
    with pytest.raises(DocumentError) as refused:
        parse_documents(b"a: [[[1]]]")
    assert str(refused.value) == f"line 1, column 6: invalid YAML: {FlowDepthLimitedLoader.WORDS}"


def test_a_file_with_no_object_is_named_in_a_warning(tmp_path: Path) -> None:
    empty, comments = tmp_path / "empty.yaml", tmp_path / "comments.yaml"
    empty.write_text("")
    comments.write_text("# nothing yet\n---\n")
    (tmp_path / "nodes.yaml").write_text(dump(node("n1", cpu=4)))
    code, out, err = run("simulate", "-f", str(tmp_path), "-o", "json", "--now", NOW)
    assert code == 0, err
    assert json.loads(out)["nodes"] == {"n1": {"annotations": {}}}
    assert err.splitlines() == [
        f"sharekeeper simulate: warning: file {path} holds no object (it is empty or only comments)"
        for path in (comments, empty)
    ]


# --- objects of the wrong shape, kind, version, name or field type -------------------------------

LIST = {"apiVersion": "v1", "kind": "List"}


@pytest.mark.parametrize(
    ("document", "fragment"),
    [
        param([1, 2], "a document is not a Kubernetes object (got [1, 2])", id="document-list"),
        param(
            node_with(metadata=["x"]),
            "Node <unnamed>: metadata: must be a mapping",
            id="metadata-list",
        ),
        param(
            node_with(metadata=None),
            "Node <unnamed>: metadata: must be a mapping",
            id="metadata-null",
        ),
        param(
            node_with(metadata={"labels": {}}),
            "Node <unnamed>: metadata.name: is required",
            id="no-name",
        ),
        param(
            node_with(spec=[1]), "Node n1: spec: must be a mapping (got [1])", id="node-spec-list"
        ),
        param(
            node_with(spec="x"), "Node n1: spec: must be a mapping (got 'x')", id="node-spec-string"
        ),
        param(
            {**pod("p", "a"), "spec": "x"},
            "Pod ns/p: spec: must be a mapping (got 'x')",
            id="pod-spec-string",
        ),
        param(
            {**pod_group("g", "a"), "status": [1]},
            "PodGroup ns/g: status: must be a mapping",
            id="status-list",
        ),
        param(
            {**LIST, "items": [1, "x"]},
            "items[0]: is not a Kubernetes object (got 1)",
            id="items-scalars",
        ),
        param({**LIST, "items": 5}, "items: must be a list (got 5)", id="items-not-a-list"),
        param(
            {**LIST, "items": [{"kind": "Node"}]},
            "items[0].apiVersion: must be a non-empty string (got None)",
            id="item-without-apiversion",
        ),
        param(
            {"kind": "Node", "metadata": {"name": "n"}},
            "apiVersion: must be a non-empty string",
            id="no-apiversion",
        ),
        param(node_with(kind=5), "kind: must be a non-empty string (got 5)", id="kind-int"),
        param(
            node_with(kind=["Node"]),
            "kind: must be a non-empty string (got ['Node'])",
            id="kind-list",
        ),
        # What the fuzzer found the trimmed readers take from the API server's schema on trust.
        param(
            pod_with(nodeName={"a": 1}),
            "Pod ns/p: spec.nodeName: must be a string (got {'a': 1})",
            id="node-name-mapping",
        ),
        param(
            {**pod_group("g", "a"), "spec": {"queue": ["a"]}},
            "PodGroup ns/g: spec.queue: must be a string",
            id="podgroup-queue-list",
        ),
        param(
            pod_with(containers=[{"resources": {"requests": {"cpu": [1]}}}]),
            "spec.containers[0].resources.requests.cpu: must be a string or a number",
            id="quantity-list",
        ),
        param(
            pod_with(initContainers=[{"resources": {"limits": {"memory": None}}}]),
            "spec.initContainers[0].resources.limits.memory: must be a string or a number",
            id="init-container-quantity-null",
        ),
        param(
            pod_with(overhead={"memory": ["1Gi"]}),
            "Pod ns/p: spec.overhead.memory: must be a string or a number",
            id="overhead-list",
        ),
        param(
            {**pod_group("g", "a"), "spec": {"queue": "a", "minResources": {"cpu": {}}}},
            "PodGroup ns/g: spec.minResources.cpu: must be a string or a number",
            id="podgroup-min-resources-mapping",
        ),
        param(
            node_with(status={"allocatable": {"cpu": {"a": 1}}}),
            "Node n1: status.allocatable.cpu: must be a string or a number",
            id="allocatable-mapping",
        ),
        param(
            {**pod("p", "a"), "metadata": {"name": "p", "labels": {"sharekeeper.io/queue": ["a"]}}},
            "Pod p: metadata.labels: must map strings to strings",
            id="label-list",
        ),
        param(
            node_with(metadata={"name": "n1", "annotations": {"a": 1}}),
            "metadata.annotations: must map strings to strings",
            id="annotation-int",
        ),
    ],
)
def test_a_malformed_object_is_refused(tmp_path: Path, document: Any, fragment: str) -> None:
    path = write(tmp_path, dump(policy("p"), queue("a"), document))
    assert fragment in simulate_refusal(path)


@pytest.mark.parametrize(
    ("bad", "fragment"),
    [
        param(
            {**queue("q"), "apiVersion": "v1"},
            "Queue q: apiVersion: must be scheduling.sharekeeper.io/v1alpha1 for a Queue "
            "(got 'v1')",
            id="queue-v1",
        ),
        param(
            {**queue("q"), "apiVersion": "scheduling.sharekeeper.io/v9"},
            "(got 'scheduling.sharekeeper.io/v9')",
            id="queue-v9",
        ),
        param(
            {**policy("p2"), "apiVersion": "ensurance.sharekeeper.io/v1alpha1"},
            "SchedulerPolicy p2: apiVersion: must be scheduling.sharekeeper.io/v1alpha1",
            id="policy-other-group",
        ),
        param(
            {**node("n"), "apiVersion": "apps/v1"},
            "Node n: apiVersion: must be v1 for a Node (got 'apps/v1')",
            id="node-apps-v1",
        ),
        param(
            {**pod_group("g", "a"), "apiVersion": "scheduling.volcano.sh/v1alpha1"},
            "PodGroup ns/g: apiVersion: must be scheduling.volcano.sh/v1beta1",
            id="podgroup-v1alpha1",
        ),
        param({**queue("q"), "spec": "x"}, "Queue q: spec", id="queue-spec-string"),
        param(
            {**policy("p2"), "spec": {"queueSelector": "all"}},
            "SchedulerPolicy p2: spec.queueSelector",
            id="queue-selector-all",
        ),
        param(
            node("a\nb"),
            r"Node with an invalid name: metadata.name: must be a lowercase RFC 1123 subdomain: at "
            r"most 253 characters, a-z, 0-9, '-' and '.', starting and ending with a letter or "
            r"digit (got 'a\nb')",
            id="name-newline",
        ),
        param(
            queue("Team_A"),
            "Queue with an invalid name: metadata.name: must be a lowercase RFC",
            id="name-uppercase",
        ),
        param(pod("p" * 254, "a"), "Pod with an invalid name: metadata.name", id="name-too-long"),
        param(node("-n"), "Node with an invalid name", id="name-leading-dash"),
        param(node(""), "Node with an invalid name", id="name-empty"),
        param(
            node_with(metadata={"name": 5}),
            "Node with an invalid name: metadata.name",
            id="name-int",
        ),
        param(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a.b"}},
            "Namespace with an invalid name: metadata.name: must be a lowercase RFC 1123 label",
            id="namespace-name-dot",
        ),
        param(
            {**queue("q"), "apiVersion": "v1", "metadata": {"name": "q", "namespace": ["a"]}},
            "Queue with an invalid namespace: metadata.namespace: must be a lowercase RFC 1123 "
            "label",
            id="namespace-list",
        ),
        param(
            pod("p", "a", namespace="Team A"),
            "Pod with an invalid namespace: metadata.namespace",
            id="namespace-invalid",
        ),
        param(
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}},
            "Service s: kind: must be one of DaemonSet, Namespace, Node, NodeMetrics",
            id="unknown-kind",
        ),
    ],
)
def test_what_the_api_server_refuses_is_refused(
    tmp_path: Path, bad: MutableObj, fragment: str
) -> None:
    path = write(tmp_path, dump(policy("p"), node("n1", cpu=4), queue("a"), bad))
    assert fragment in simulate_refusal(path)


def test_a_process_of_its_own_prints_the_one_line_alone(tmp_path: Path) -> None:
    """Without pytest capturing logs, the store's warning about an object it cannot read went
    to stderr too, ahead of the error saying the same."""
    path = write(tmp_path, dump(policy("p"), {**queue("q"), "spec": "x"}))
    command = [sys.executable, "-m", "sharekeeper.cli", "simulate", "-f", str(path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert_refused("simulate", done.returncode, done.stdout, done.stderr)
    assert "Queue q: spec" in done.stderr


def test_the_same_pod_twice_is_refused_with_its_namespace_left_out_once(tmp_path: Path) -> None:
    explicit = pod("p", "a", namespace="default")
    implicit = copy.deepcopy(explicit)
    del implicit["metadata"]["namespace"]
    path = write(tmp_path, dump(policy("p"), queue("a"), explicit, implicit))
    assert "Pod p: appears twice in the input" in simulate_refusal(path)


# --- aliases ------------------------------------------------------------------------------------


def laughs(levels: int) -> str:
    """Anchors ``l0``..``l<levels-1>``, each nine aliases of the one before: ``*l<n>`` stands
    for 9 ** (n + 1) strings."""
    lines = ['l0: &l0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def in_a_node(definitions: str, label: str) -> str:
    """A Node whose unknown field ``x-definitions`` holds ``definitions`` and whose label
    ``bomb`` is ``label``."""
    indented = "".join(f"  {line}\n" for line in definitions.splitlines())
    return (
        f"x-definitions:\n{indented}apiVersion: v1\nkind: Node\n"
        f"metadata:\n  name: n\n  labels:\n    bomb: {label}\n"
    )


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        # 1.1 KB standing for 387 million strings: the label's message took 3.4 GB to write.
        param(
            in_a_node(laughs(9), "*l8"),
            "has aliases standing for over 10000 nodes",
            id="billion-laughs",
        ),
        # Never looked at, so it was read: 531,441 strings sat in memory for nothing.
        param(
            in_a_node(laughs(6), "x"),
            "has aliases standing for over 10000 nodes",
            id="laughs-unread",
        ),
        param(
            in_a_node("", "&loop [*loop]"),
            "alias *loop is inside the collection it names",
            id="recursive",
        ),
        param(
            in_a_node("a: &a x\nb: [" + ", ".join(["*a"] * 101) + "]", "x"),
            "has more than 100 aliases",
            id="101-aliases",
        ),
    ],
)
def test_aliases_beyond_the_budget_are_refused_before_they_are_built(
    tmp_path: Path, text: str, fragment: str
) -> None:
    assert fragment in simulate_refusal(write(tmp_path, text))


def test_a_billion_laughs_is_refused_at_once() -> None:
    with pytest.raises(DocumentError, match="line 5: has aliases standing for over 10000 nodes"):
        parse_documents(laughs(9).encode())


SHARED_SPEC = """\
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Pod
  metadata: {name: p1, namespace: ns, labels: {sharekeeper.io/queue: a}}
  spec: &spec
    nodeName: n1
    containers:
    - name: main
      resources: {requests: {cpu: '1'}}
  status: &running {phase: Running}
- apiVersion: v1
  kind: Pod
  metadata: {name: p2, namespace: ns, labels: {sharekeeper.io/queue: a}}
  spec: *spec
  status: *running
"""


def test_a_manifest_sharing_a_block_by_alias_is_read(tmp_path: Path) -> None:
    """What hand-written manifests do with aliases, well within the budget."""
    text = dump(policy("p"), node("n1", cpu=4), queue("a")) + "---\n" + SHARED_SPEC
    code, out, err = run("simulate", "-f", str(write(tmp_path, text)), "-o", "json")
    assert (code, err) == (0, "")
    assert json.loads(out)["queues"]["a"]["allocated"] == {"cpu": "2", "pods": "2"}


# --- pod priority, as the API server's Priority admission fills it in ----------------------------


def qos_example(**batch_0_spec: Any) -> list[MutableObj]:
    """The QoS example (whose plan evicts batch-0 alone) with batch-0 created without
    ``spec.priority`` and with ``batch_0_spec`` in its spec."""
    documents = [d for d in yaml.safe_load_all((EXAMPLES / "qos-check.yaml").read_text()) if d]
    batch_0 = next(
        d for d in documents if d["metadata"]["name"] == "batch-0" and d["kind"] == "Pod"
    )
    del batch_0["spec"]["priority"]
    batch_0["spec"].update(batch_0_spec)
    return documents


def priority_class(name: str, value: Any, **fields: Any) -> MutableObj:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        **fields,
    }


def evicted(tmp_path: Path, *documents: MutableObj) -> list[str]:
    path = write(tmp_path, dump(*documents))
    code, out, err = run("simulate", "-f", str(path), "-o", "json", "--now", NOW)
    assert (code, err) == (0, "")
    return [action["pod"] for action in json.loads(out)["actions"]]


def test_a_pod_without_class_or_priority_has_priority_0(tmp_path: Path) -> None:
    assert evicted(tmp_path, *qos_example()) == ["batch/batch-0"]


@pytest.mark.parametrize(
    ("spec", "classes"),
    [
        param(
            {"priorityClassName": "important"},
            [priority_class("important", 5_000)],
            id="declared-class",
        ),
        param({}, [priority_class("everyone", 5_000, globalDefault=True)], id="global-default"),
    ],
)
def test_a_pod_gets_the_priority_of_its_class_and_is_spared(
    tmp_path: Path, spec: MutableObj, classes: list[MutableObj]
) -> None:
    """The example's maxPriority is 999: a pod whose class is worth more is no candidate, so
    the next one goes instead."""
    assert evicted(tmp_path, *qos_example(**spec), *classes) == ["batch/batch-2"]


@pytest.mark.parametrize(
    ("spec", "classes"),
    [
        param({"priorityClassName": "system-cluster-critical"}, [], id="system-cluster-critical"),
        param({"priorityClassName": "system-node-critical"}, [], id="system-node-critical"),
        param(
            {"priorityClassName": "system-node-critical"},
            [priority_class("system-node-critical", 2_000_001_000)],
            id="built-in-declared-too",
        ),
    ],
)
def test_a_system_class_outside_kube_system_spares_nothing(
    tmp_path: Path, spec: MutableObj, classes: list[MutableObj]
) -> None:
    """Any namespace may name the built-in system classes: outside kube-system the pod counts
    as priority 0, and the busiest BestEffort pod goes, as without a class."""
    assert evicted(tmp_path, *qos_example(**spec), *classes) == ["batch/batch-0"]


def test_a_priority_already_set_is_kept_whatever_the_class(tmp_path: Path) -> None:
    """A pod read from a cluster was admitted already: its priority is the one it got."""
    documents = qos_example(priority=0, priorityClassName="gone")
    everyone = priority_class("everyone", 5_000, globalDefault=True)
    assert evicted(tmp_path, *documents, everyone) == ["batch/batch-0"]


@pytest.mark.parametrize(
    ("spec", "classes", "fragment"),
    [
        param(
            {"priorityClassName": "missing"},
            [],
            "Pod batch/batch-0: spec.priorityClassName: names no PriorityClass of the input "
            "(got 'missing')",
            id="unknown-class",
        ),
        param(
            {"priorityClassName": 5},
            [],
            "spec.priorityClassName: must be a string (got 5)",
            id="class-not-a-string",
        ),
        param(
            {},
            [priority_class("high", "1000")],
            "PriorityClass high: value: must be an integer",
            id="value-string",
        ),
        param(
            {},
            [priority_class("high", 10**9 + 1)],
            "value: must be from -2147483648 to 1000000000",
            id="value-too-high",
        ),
        param(
            {},
            [priority_class("system-mine", 5)],
            "PriorityClass system-mine: the system- prefix is reserved",
            id="system-prefix",
        ),
        param(
            {},
            [priority_class("system-node-critical", 5)],
            "the system- prefix is reserved",
            id="system-value",
        ),
        param(
            {},
            [priority_class("a", 1, globalDefault="yes")],
            "globalDefault: must be true or false",
            id="global-default-string",
        ),
        param(
            {},
            [
                priority_class("a", 1, globalDefault=True),
                priority_class("b", 2, globalDefault=True),
            ],
            "PriorityClass b: globalDefault: PriorityClass a is the default already",
            id="two-defaults",
        ),
        param(
            {},
            [{**priority_class("a", 1), "apiVersion": "scheduling.k8s.io/v1beta1"}],
            "PriorityClass a: apiVersion: must be scheduling.k8s.io/v1",
            id="class-v1beta1",
        ),
    ],
)
def test_what_priority_admission_refuses_is_refused(
    tmp_path: Path, spec: MutableObj, classes: list[MutableObj], fragment: str
) -> None:
    path = write(tmp_path, dump(*qos_example(**spec), *classes))
    assert fragment in simulate_refusal(path)


# --- fuzzing ------------------------------------------------------------------------------------

KINDS = ["Node", "Pod", "PodGroup", "Namespace", "Queue", "SchedulerPolicy", "PriorityClass",
         "NodeQosEnsurancePolicy", "NodeMetrics", "PodMetrics", "List"]  # fmt: skip
API_VERSIONS = ["v1", "scheduling.volcano.sh/v1beta1", "scheduling.sharekeeper.io/v1alpha1",
                "ensurance.sharekeeper.io/v1alpha1", "metrics.k8s.io/v1beta1",
                "scheduling.k8s.io/v1", "apps/v1"]  # fmt: skip
WORDS = ["", "0", "1", "-1", "500m", "1Gi", "1e309", "0.5", "a\nb", "n1", "a", "ns", "cpu",
         "memory", "nvidia.com/gpu", "system-node-critical", "Running", "BestEffort", "Always",
         "overcommit", "proportion", "2026-11-21T10:00:00Z"]  # fmt: skip
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=12)
    | st.sampled_from(WORDS + KINDS + API_VERSIONS)
)
KEYS = st.sampled_from(WORDS) | st.text(max_size=6) | st.integers(-1, 1)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=12,
)
OBJECTS = st.fixed_dictionaries(
    {
        "apiVersion": st.sampled_from(API_VERSIONS) | SCALARS,
        "kind": st.sampled_from(KINDS) | SCALARS,
        "metadata": st.fixed_dictionaries({"name": st.sampled_from(WORDS) | SCALARS}) | VALUES,
    },
    optional=dict.fromkeys(("spec", "status", "items", "value", "usage", "containers"), VALUES),
)
SEEDS = [
    [d for d in yaml.safe_load_all((EXAMPLES / name).read_text()) if d]
    for name in ("cluster.yaml", "qos-check.yaml", "minimal.yaml")
] + [
    [
        policy("p"),
        node("n1", cpu=4, memory="8Gi", gpu=2),
        queue("a", capability={"cpu": 2}, guarantee={"cpu": 1}),
        pod("p1", "a", node="n1", cpu=1, group="g"),
        pod_group("g", "a", min_resources={"cpu": 1}),
        priority_class("high", 1000, globalDefault=True),
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns", "labels": {"a": "b"}}},
    ]
]


@st.composite
def mutated(draw: st.DrawFn, seeds: list[list[Any]]) -> list[Any]:
    """A seed's documents with one to three values inside them replaced or removed: what each
    reader does with each field (``OBJECTS`` tries kinds and versions, so these keep theirs)."""
    documents: list[Any] = copy.deepcopy(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, 3))):
        parent: Any = documents
        key: Any = draw(st.integers(0, len(documents) - 1))
        for _ in range(draw(st.integers(1, 12))):
            child = parent[key]
            if isinstance(child, dict):
                keys = [k for k in child if k not in ("kind", "apiVersion")]
            else:
                keys = list(range(len(child))) if isinstance(child, list) else []
            if not keys:
                break
            parent, key = child, draw(st.sampled_from(keys))
        if isinstance(parent, dict) and draw(st.booleans()):
            del parent[key]
        else:
            parent[key] = draw(VALUES)
    return documents


@st.composite
def files(draw: st.DrawFn, documents: st.SearchStrategy[list[Any]]) -> bytes:
    """Documents as multi-document YAML, or as one JSON List."""
    drawn = draw(documents)
    if draw(st.booleans()):
        return yaml.safe_dump_all(drawn).encode()
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": drawn}).encode()


YAML_SOUP = st.text(alphabet="[]{}:,-&*!|>'\"\n #a1%?.", max_size=80).map(str.encode)


@contextlib.contextmanager
def no_reader_failed() -> Iterator[None]:
    """The store turns a reader's exception into an unreadable object (exit 2, as for bad
    input): only its log tells a reader's bug."""
    failures: list[str] = []
    handler = logging.Handler(logging.ERROR)
    handler.emit = lambda record: failures.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger("sharekeeper")
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
    assert not failures


@pytest.fixture(scope="module")
def fuzz_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz") / "input.yaml"


@settings(max_examples=200)
@given(
    content=st.one_of(
        st.binary(max_size=300),
        YAML_SOUP,
        files(st.lists(OBJECTS, max_size=4)),
        files(mutated(SEEDS)),
    )
)
def test_simulate_exits_0_or_2_on_any_file(fuzz_file: Path, content: bytes) -> None:
    fuzz_file.write_bytes(content)
    with no_reader_failed():
        code, out, err = run("simulate", "-f", str(fuzz_file), "-o", "json", "--now", NOW)
    if code == 0:  # a file with no object is warned about (exit 0)
        assert all(line.startswith("sharekeeper simulate: warning: ") for line in err.splitlines())
        json.loads(out)
    else:
        assert_refused("simulate", code, out, err)


VOLCANO_CONFIG = {
    "tiers": [
        {
            "plugins": [
                {"name": "gang"},
                {
                    "name": "proportion_optimize",
                    "arguments": {
                        "proportion_optimize.GuaranteeEnable": False,
                        "proportion_optimize.PriorityType": "Guarantee",
                    },
                },
                {
                    "name": "overcommit",
                    "arguments": {"overcommit-factor": 1.5, "overcommit-factor.cpu": 0.5},
                },
                {
                    "name": "predicates",
                    "arguments": {
                        "predicate.ProportionalEnable": True,
                        "predicate.resources": "nvidia.com/gpu",
                        "predicate.resources.nvidia.com/gpu.cpu": 4,
                        "predicate.resources.nvidia.com/gpu.memory": 8,
                    },
                },
                {
                    "name": "resource-strategy-fit",
                    "arguments": {
                        "proportional": {
                            "enable": True,
                            "resources": "nvidia.com/gpu",
                            "resourceProportion": {"nvidia.com/gpu.cpu": 2},
                        }
                    },
                },
            ]
        }
    ]
}


@settings(max_examples=200)
@given(
    content=st.one_of(
        st.binary(max_size=300),
        YAML_SOUP,
        st.lists(VALUES, max_size=3).map(lambda tiers: yaml.safe_dump({"tiers": tiers}).encode()),
        mutated([[VOLCANO_CONFIG]]).map(lambda documents: yaml.safe_dump(documents[0]).encode()),
    )
)
def test_convert_exits_0_or_2_and_prints_only_valid_policies(
    fuzz_file: Path, content: bytes
) -> None:
    fuzz_file.write_bytes(content)
    code, out, err = run("convert", str(fuzz_file))
    if code == 0:
        assert all(line.startswith("sharekeeper convert: ") for line in err.splitlines())
        read(SchedulerPolicy, yaml.safe_load(out))
    else:
        assert_refused("convert", code, out, err)
