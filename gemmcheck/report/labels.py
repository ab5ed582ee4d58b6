"""Where a test sits in the allure tree and what it is labelled with: feature (the suite),
story (the claim), severity, tags, and the catalog instantiation it runs on."""

from __future__ import annotations

import re

from gemmcheck.contract.catalog import Instance

INSTANCE_PARAMS = ("reference", "broken", "any_kernel")

# Suite directory -> allure feature; and how much a failure there matters.
FEATURES = {"compile": "compile", "correctness": "correctness", "hazards": "hazards",
            "performance": "performance"}
SEVERITY = {"correctness": "critical", "hazards": "critical", "compile": "normal",
            "performance": "minor", "harness": "minor"}
# Stories that read better than the test's name; any other test's story is its name in words.
STORIES = {
    "test_worked_example_bit_for_bit": "exact result: the seed's worked example",
    "test_partial_sums_after_the_first_phase": "exact result: the seed's worked example",
    "test_seed_matrix_is_the_exact_product": "exact result: the seed's worked example",
}


def instance_of(item) -> tuple[str, Instance] | None:
    """The catalog instantiation a test runs on: whichever parameter holds an Instance
    (reference, broken, any_kernel, and the hazards suite's own, direct or indirect)."""
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return None
    names = [n for n in INSTANCE_PARAMS if n in callspec.params]
    names += [n for n in callspec.params if n not in INSTANCE_PARAMS]
    for name in names:
        if isinstance(callspec.params[name], Instance):
            return name, callspec.params[name]
    return None


def kernels_of(item) -> list[str]:
    """The kernels of a test that runs on several instantiations at once (a parameter holding a
    sequence of Instances, e.g. the compile suite's one test per source), in catalog order."""
    callspec = getattr(item, "callspec", None)
    names: list[str] = []
    for value in (callspec.params.values() if callspec else ()):
        if isinstance(value, (list, tuple)) and value and all(isinstance(v, Instance) for v in value):
            names += [v.spec.name for v in value if v.spec.name not in names]
    return names


def feature_of(nodeid: str) -> str:
    parts = nodeid.split("::")[0].split("/")
    if "suites" in parts and parts.index("suites") + 1 < len(parts) - 1:
        suite = parts[parts.index("suites") + 1]
        return FEATURES.get(suite, suite)
    return "harness"


def story_of(function_name: str) -> str:
    if function_name in STORIES:
        return STORIES[function_name]
    return re.sub(r"^test_", "", function_name).replace("_", " ")


def labels_for(item) -> list[tuple[str, str]]:
    """(label, value) pairs for one test: epic, feature, story, severity, tags, kernel."""
    feature = feature_of(item.nodeid)
    name = getattr(item, "originalname", item.name.split("[")[0])
    labels = [("epic", "gemmcheck"), ("feature", feature), ("story", story_of(name))]
    found = instance_of(item)
    severity = SEVERITY.get(feature, "normal")
    if found:
        fixture, inst = found
        if fixture == "broken" or (fixture == "any_kernel" and not inst.spec.is_reference):
            severity = "normal"   # a broken variant is caught, or a detector has a gap
        labels += [("tag", inst.dtype), *([("tag", f"TILE{inst.declared_tile}")] if inst.declared_tile else []),
                   ("tag", "reference" if inst.spec.is_reference else "broken variant"),
                   ("kernel", inst.spec.name), ("instantiation", inst.id),
                   ("expect", inst.spec.expect)]
    else:   # Categories group failures by kernel: a source's build failure under its kernels
        labels += [("kernel", name) for name in kernels_of(item)]
    labels.append(("severity", severity))
    return labels
